"""Allure plots rendered off the measurement path, by a worker process at idle CPU priority.

Rendering a test's plots takes about 0.3 s of CPU (matplotlib); done in the test's report phase it
adds that to every test and runs between measurements. Instead:

    later = DeferredPlots(alluredir)     starts ``python -m netslo.report.render_worker SPOOL``
    later.attach(name, plot)             adds the attachment to the open Allure result at once, as an
                                         empty placeholder, and spools the plot for the worker
    later.close()                        (session end) waits for the worker, then renders here what it
                                         did not write (it died, or was killed): every attachment ends
                                         with its PNG; the spool directory is removed

The worker runs under SCHED_IDLE (nice 19 where that is refused): it gets only CPU time no other
process wants, so it never delays a probe; at the session's end it has usually drained the spool.
The spool is ``<alluredir>/.netslo-plots/``: one pickle per plot (``NNNNNN.job``: the PNG's file
name in the alluredir and the ``plots.Plot``), written atomically; ``END`` there tells the worker to
exit once the jobs are done. Nothing the parent does blocks on the worker. The worker ignores SIGINT
(a Ctrl-C ends the session, whose close() still waits for it) and exits when its parent is gone.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import allure_commons

from netslo.report import plots

SPOOL = ".netslo-plots"
END = "END"
POLL_S = 0.2            # how often an idle worker looks for new jobs
CLOSE_TIMEOUT_S = 600.0  # the longest close() waits for the worker before rendering the rest itself


def _write_atomic(path: Path, data: bytes) -> None:
    """``data`` into ``path`` whole or not at all (the reader never sees a part)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def run_job(job: Path, alluredir: Path) -> None:
    """Render one spooled plot into the alluredir and remove the job."""
    with job.open("rb") as f:
        file_name, plot = pickle.load(f)
    _write_atomic(alluredir / file_name, plots.render(plot))
    job.unlink()


def pending(spool: Path) -> list[Path]:
    return sorted(spool.glob("*.job"))


def _idle_priority() -> None:
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def main(spool_dir: str) -> int:
    """The worker: render every job of ``spool_dir`` (inside an alluredir) until END is there and no job is."""
    _idle_priority()
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C is the session's: its close() still waits
    spool = Path(spool_dir)
    alluredir = spool.parent
    parent = os.getppid()
    while os.getppid() == parent:
        jobs = pending(spool)
        for job in jobs:
            run_job(job, alluredir)
        if not jobs:
            # listed again after END is seen: a last job may have come between the listing and END
            if (spool / END).exists() and not pending(spool):
                return 0
            time.sleep(POLL_S)
    return 1


class _Capture:
    """An allure-commons hook: the file name Allure gives the attachment whose source is ``source``."""

    def __init__(self, source: str):
        self.source = source
        self.file_name: str | None = None

    @allure_commons.hookimpl
    def report_attached_file(self, source, file_name):
        if str(source) == self.source:
            self.file_name = file_name


class DeferredPlots:
    """Plot attachments of an Allure run rendered by the worker (see the module docstring)."""

    def __init__(self, alluredir):
        self.alluredir = Path(alluredir).absolute()
        self.spool = self.alluredir / SPOOL
        shutil.rmtree(self.spool, ignore_errors=True)   # a killed run's
        self.spool.mkdir(parents=True)
        self.placeholder = self.spool / "placeholder.png"
        self.placeholder.write_bytes(b"")
        self._capture = _Capture(str(self.placeholder))
        allure_commons.plugin_manager.register(self._capture)
        self.sent = 0
        self.rendered_here = 0
        self.worker = subprocess.Popen([sys.executable, "-m", "netslo.report.render_worker", str(self.spool)],
                                       stdin=subprocess.DEVNULL)

    def attach(self, name: str, plot: plots.Plot) -> None:
        """Attach ``name`` (a PNG) to the open Allure result now; its bytes follow from the worker."""
        import allure
        self._capture.file_name = None
        allure.attach.file(str(self.placeholder), name=name, attachment_type=allure.attachment_type.PNG)
        if self._capture.file_name is None:   # no Allure result is open: nothing to fill in
            return
        self.sent += 1
        _write_atomic(self.spool / f"{self.sent:06d}.job",
                      pickle.dumps((self._capture.file_name, plot), protocol=pickle.HIGHEST_PROTOCOL))

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Wait for the worker (``timeout`` s at most), render what is left here, remove the spool."""
        (self.spool / END).write_text("")
        try:
            self.worker.wait(timeout)
        except subprocess.TimeoutExpired:
            self.worker.kill()
            self.worker.wait()
        for job in pending(self.spool):
            run_job(job, self.alluredir)
            self.rendered_here += 1
        allure_commons.plugin_manager.unregister(self._capture)
        shutil.rmtree(self.spool, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
