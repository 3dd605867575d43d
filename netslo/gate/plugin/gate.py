"""The gate's verdict over the whole session: every selected SLO test (marker ``cni``) is tallied as
passed / failed / errored / xfailed / skipped-expected / skipped-unexpected (``netslo.report.tally``),
and the session fails when anything was not measured and met, unless declared expected.

- A skip counts as expected only with a category the run declared (``--netslo-allow-skip``, the SLO
  file's ``allow_skips``; known CNI limitations are always declared).
- An exception that is not an SLO verdict (infrastructure, configuration, not enough samples) in a
  test body counts as *errored*, not failed.
- A known-limitation xfail holds only when the test failed with the exception type and message the
  limitation table gives; any other failure (a crash, an assertion about something else) is a failure.
"""

from __future__ import annotations

import re

import pytest

from netslo.core.errors import InfrastructureError, NotEnoughSamples, SpecError, Unsupported
from netslo.gate.plugin.hooks import OPTIONS, RESULTS, active
from netslo.report import summary as summary_mod
from netslo.report import tally as tally_mod
from netslo.slo import skips

TALLY = pytest.StashKey[tally_mod.Tally]()
DESELECTED = pytest.StashKey[set]()
LIMITATION = pytest.StashKey[tuple]()   # (reason, exception type, message regex) of an expected limitation
NOT_A_VERDICT = (InfrastructureError, NotEnoughSamples, SpecError)


def skip(category: str, why: str):
    """Skip the running test with a skip category (``netslo.slo.skips``); undeclared, it fails the gate."""
    pytest.skip(skips.reason(category, why))


def skip_unsupported(e: BaseException, category: str | None = None):
    """Skip for a missing capability (an ``Unsupported``), with its category unless one is given.
    Any other exception is not a capability this run lacks (an infrastructure failure, a bug): it is
    raised again, so the test errors with its cause instead of skipping."""
    if not isinstance(e, Unsupported):
        raise e
    skip(category or e.category, str(e))


def expect_failure(item, reason: str, raises: type, match: str) -> None:
    """Strict xfail that holds only for a ``raises`` exception whose message matches ``match``."""
    item.stash[LIMITATION] = (reason, raises, match)
    item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=raises))


def pytest_configure(config):
    if active(config):
        config.stash[TALLY] = tally_mod.Tally(config.stash[OPTIONS].allowed_skips)
        config.stash[DESELECTED] = set()


def pytest_deselected(items):
    if items and DESELECTED in items[0].config.stash:
        items[0].config.stash[DESELECTED].update(i.nodeid for i in items)


def _skip_message(report) -> str:
    lr = report.longrepr
    text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return text.removeprefix("Skipped: ")


def _limitation_holds(item, call) -> str | None:
    """None when the xfail is the expected limitation; else why it is not."""
    reason, raises, match = item.stash[LIMITATION]
    exc = call.excinfo.value if call.excinfo else None
    if not isinstance(exc, raises):
        return f"expected {raises.__name__} for the known limitation, got {type(exc).__name__}: {exc}"
    if not re.search(match, str(exc)):
        return f"failed, but not for the known limitation /{match}/ ({reason}): {exc}"
    return None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)   # outermost: sees the report after xfail handling
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if not active(item.config) or item.get_closest_marker("cni") is None:
        return
    t = item.config.stash[TALLY]
    if LIMITATION in item.stash and report.when == "call" and hasattr(report, "wasxfail"):
        wrong = _limitation_holds(item, call)
        if wrong:
            report.outcome, report.longrepr = "failed", wrong
            del report.wasxfail
    if report.skipped:
        if hasattr(report, "wasxfail"):
            t.record(item.nodeid, tally_mod.XFAILED, report.wasxfail)
        else:
            t.skip(item.nodeid, _skip_message(report))
    elif report.failed:
        exc = call.excinfo.value if call.excinfo else None
        errored = report.when != "call" or isinstance(exc, NOT_A_VERDICT)
        t.record(item.nodeid, tally_mod.ERRORED if errored else tally_mod.FAILED, str(report.longreprtext or ""))
    elif report.when == "call":
        t.record(item.nodeid, tally_mod.PASSED)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    t = config.stash.get(TALLY, None)
    if t is None:
        return
    writer = config.stash.get(RESULTS, None)
    if writer is not None:
        writer.tally = t
        writer.write()
    if t.entries and not t.green and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    """One screen: a line per measured scenario, the counts, and every test that was not passed."""
    t = config.stash.get(TALLY, None)
    if t is None or not t.entries:
        return
    tr = terminalreporter
    writer = config.stash.get(RESULTS, None)
    tr.section("netslo SLO gate")
    if writer is not None and writer.records:
        tr.write_line("environment: " + ", ".join(f"{k}={v}" for k, v in writer.environment.items()))
        for rec in writer.records:
            tr.write_line(summary_mod.terminal_row(rec), red=rec["verdict"] != "pass")
        for line in summary_mod.family_rows(writer.records):   # dual-stack runs: v4 beside v6
            tr.write_line(line)
    for e in t.entries.values():
        if e.status != tally_mod.PASSED:
            tr.write_line(f"{e.status:<18} {e.test}: {tally_mod.one_line(e.reason, 160)}",
                          red=e.status in (tally_mod.FAILED, tally_mod.ERRORED, tally_mod.SKIPPED_UNEXPECTED),
                          yellow=e.status in (tally_mod.SKIPPED_EXPECTED, tally_mod.XFAILED))
    tr.write_line(t.headline(), green=t.green, red=not t.green, bold=True)
    if writer is not None and writer.written:
        tr.write_line(f"results: {writer.written}")


def excused_missing(config, baseline_tests) -> dict:
    """Baseline tests absent now on purpose: deselected (-k/-m) or a declared skip -> why."""
    deselected = config.stash.get(DESELECTED, set())
    t = config.stash.get(TALLY, None)
    out = {}
    for test in baseline_tests:
        base = "::".join(test.split("::")[:2])   # an extra outcome '<nodeid>::<name>' -> its test
        if test in deselected or base in deselected:
            out[test] = "deselected"
        elif t is not None:
            e = t.entries.get(test) or t.entries.get(base)
            if e is not None and e.status in (tally_mod.SKIPPED_EXPECTED, tally_mod.XFAILED):
                out[test] = f"{e.status}: {e.reason}"
    return out
