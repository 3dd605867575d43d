"""Progress lines in the pytest terminal: which test runs (k/N, time left), phases with their
elapsed time, batches and verdicts (``netslo.core.progress`` records). Quiet under ``-q``; when pytest's
live logging is on (``log_cli``) the records go there and this handler stays out of the way."""

from __future__ import annotations

import logging
import time

import pytest

from netslo.core import phase_times
from netslo.core.progress import log as progress_log
from netslo.gate.plugin.hooks import active

HANDLER = pytest.StashKey["TerminalProgress"]()


class TerminalProgress(logging.Handler):
    """Writes progress records as whole lines in the terminal reporter's style."""

    def __init__(self, config):
        super().__init__(logging.INFO)
        self.config = config
        self.t0 = time.monotonic()
        self.done = 0
        self.total = 0
        self.test_t0 = None
        self.spent = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if tr is None:
            return
        line = f"[netslo {time.monotonic() - self.t0:6.1f}s] {record.getMessage()}"
        # logging.Handler.handle() holds this handler's lock around emit(): lines never interleave
        if capture is not None:
            with capture.global_and_fixture_disabled():
                tr.ensure_newline()
                tr.write_line(line)
        else:
            tr.ensure_newline()
            tr.write_line(line)

    def left(self) -> str:
        """Estimated time left from the mean duration of the tests done so far, without the
        once-per-session cluster set-up (``provider up``, which the first test's set-up pays)."""
        if not self.done:
            return "?"
        once = phase_times.totals().get("provider up", {}).get("seconds", 0.0)
        s = max(0.0, self.spent - once) / self.done * (self.total - self.done)
        return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


def _live_logging(config) -> bool:
    return bool(config.getini("log_cli") or config.getoption("log_cli_level", None))


def pytest_configure(config):
    if not active(config) or config.get_verbosity() < 0 or _live_logging(config):
        if active(config) and _live_logging(config):
            progress_log.setLevel(logging.INFO)
        return
    handler = TerminalProgress(config)
    progress_log.addHandler(handler)
    progress_log.setLevel(logging.INFO)
    progress_log.propagate = False
    config.stash[HANDLER] = handler


def pytest_unconfigure(config):
    handler = config.stash.get(HANDLER, None)
    if handler is not None:
        progress_log.removeHandler(handler)
        progress_log.propagate = True


def pytest_collection_finish(session):
    handler = session.config.stash.get(HANDLER, None)
    if handler is not None:   # after -k/-m deselection
        handler.total = sum(1 for i in session.items if i.get_closest_marker("cni"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    config = item.config
    handler = config.stash.get(HANDLER, None)
    if handler is None or item.get_closest_marker("cni") is None:
        return
    handler.test_t0 = time.monotonic()
    progress_log.info("test %d/%d (left ~%s): %s", handler.done + 1, handler.total, handler.left(), item.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    handler = item.config.stash.get(HANDLER, None)
    if handler is None or handler.test_t0 is None:
        return
    handler.done += 1
    handler.spent += time.monotonic() - handler.test_t0
    handler.test_t0 = None
