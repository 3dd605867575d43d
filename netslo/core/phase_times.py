"""Where a run's wall time goes: seconds per kind of work (provider up, pods, probing, ...).

``timed(kind)`` around a piece of engine work adds its wall time (s, monotonic clock) to ``kind``.
Only the outermost timed block of a thread counts: a probe made while an impairment is verified is
impairment time, an agent exec inside a probe is probing time, so the kinds never overlap and their
sum never exceeds the wall time. Work on threads other than the one that started the run is
counted when that thread is the outermost timer of its own (e.g. a background bulk flow's start).

``scheduled(seconds, kind)`` records how long a measurement takes by its own definition (requests x
send period, a flow's length, a settle time), whatever the machine does around it; it counts for the
kind of the thread's outermost timed block, or ``kind`` when none runs. The sum over a run is the
least time its measurements can take one after another: the rest of the wall time is overhead.

``totals()`` is a copy of seconds, calls and scheduled seconds per kind; ``reset()`` starts over (the
pytest plugin resets at session start and writes ``phases.json`` at the end, see
``netslo.gate.plugin.gate_time``).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from functools import wraps

KINDS = ("provider up", "user-mode-linux boot", "pods", "responders", "impairment apply/verify/clear",
         "probing", "bulk flows and pod commands", "analysis", "reports", "teardown")

_lock = threading.Lock()
_seconds: dict[str, float] = {}
_calls: dict[str, int] = {}
_scheduled: dict[str, float] = {}
_depth = threading.local()


@contextmanager
def timed(kind: str):
    """Add the block's wall time to ``kind`` unless an outer timed block of this thread runs."""
    if kind not in KINDS:
        raise ValueError(f"phase kind: value {kind!r} — expected one of {', '.join(KINDS)}")
    depth = getattr(_depth, "n", 0)
    _depth.n = depth + 1
    if depth == 0:
        _depth.kind = kind
    t0 = time.monotonic()
    try:
        yield
    finally:
        _depth.n = depth
        if depth == 0:
            dt = time.monotonic() - t0
            with _lock:
                _seconds[kind] = _seconds.get(kind, 0.0) + dt
                _calls[kind] = _calls.get(kind, 0) + 1


def timed_call(kind: str):
    """Decorator form of ``timed``."""
    def wrap(fn):
        @wraps(fn)
        def inner(*args, **kwargs):
            with timed(kind):
                return fn(*args, **kwargs)
        return inner
    return wrap


@contextmanager
def on_behalf():
    """A worker thread's part of a block its starter times as a whole (e.g. the pairs of one mesh
    round, measured at once): neither its time nor its schedule is counted again."""
    depth = getattr(_depth, "n", 0)
    _depth.n, _depth.silent = depth + 1, True
    try:
        yield
    finally:
        _depth.n, _depth.silent = depth, False


def scheduled(seconds: float, kind: str) -> None:
    """Add ``seconds`` of measurement schedule to the thread's outermost timed kind (else ``kind``)."""
    if kind not in KINDS:
        raise ValueError(f"phase kind: value {kind!r} — expected one of {', '.join(KINDS)}")
    if getattr(_depth, "silent", False):
        return
    if getattr(_depth, "n", 0):
        kind = _depth.kind
    with _lock:
        _scheduled[kind] = _scheduled.get(kind, 0.0) + seconds


def scheduled_total() -> float:
    """Seconds of measurement schedule recorded since the last ``reset()``, all kinds."""
    with _lock:
        return sum(_scheduled.values())


def totals() -> dict[str, dict]:
    """kind -> {"seconds": s, "calls": n, "scheduled": s}, in ``KINDS`` order; kinds with neither left out."""
    with _lock:
        return {k: {"seconds": _seconds.get(k, 0.0), "calls": _calls.get(k, 0), "scheduled": _scheduled.get(k, 0.0)}
                for k in KINDS if k in _seconds or k in _scheduled}


def reset() -> None:
    with _lock:
        _seconds.clear()
        _calls.clear()
        _scheduled.clear()
