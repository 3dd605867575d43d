"""Progress of a run for a person watching it, through the ``netslo.core.progress`` logger (INFO).

The engine reports phases (provider up, cluster create, CNI install, image build, UML boot), each
scenario's batches and verdict, and impairment verification. The pytest plugin shows these lines
in the terminal (quiet under ``-q``); with pytest's live logging (``log_cli``) they appear there
instead. Without a handler nothing is printed.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager

log = logging.getLogger("netslo.core.progress")
HEARTBEAT_S = 5.0   # a long phase says it is still running this often


def note(message: str) -> None:
    """One progress line."""
    log.info(message)


@contextmanager
def phase(name: str, heartbeat_s: float = HEARTBEAT_S):
    """Report ``name`` starting, a line with the elapsed time every ``heartbeat_s`` while it runs,
    and how long it took (or that it failed). Yields nothing."""
    t0 = time.monotonic()
    stop = threading.Event()

    def beat():
        while not stop.wait(heartbeat_s):
            log.info("%s: still running, %.0f s", name, time.monotonic() - t0)

    log.info("%s ...", name)
    ticker = threading.Thread(target=beat, name=f"netslo-progress-{name}", daemon=True)
    ticker.start()
    try:
        yield
    except BaseException as e:
        log.info("%s: failed after %.1f s (%s)", name, time.monotonic() - t0, type(e).__name__)
        raise
    finally:
        stop.set()
        ticker.join()
    log.info("%s: done in %.1f s", name, time.monotonic() - t0)
