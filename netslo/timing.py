"""Clock and timer helpers. All timestamps are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, ns)."""

from __future__ import annotations

import ctypes
import os
import time

now_ns = time.monotonic_ns
PR_SET_TIMERSLACK = 29
START_LEAD_NS = 20_000_000   # a probe's first send, at least this long after it is ready to send


def schedule_start(interval_ns: int, phase_ns: int | None = None, lead_ns: int = START_LEAD_NS) -> int:
    """CLOCK_MONOTONIC ns of a schedule's first send: ``lead_ns`` from now, or with ``phase_ns`` the
    first instant at least ``lead_ns`` from now that is ``phase_ns`` past a multiple of ``interval_ns``.
    Schedules of one host with the same interval and phases a/b then send |a - b| apart (mod the
    interval), whichever of them started first."""
    earliest = now_ns() + lead_ns
    if phase_ns is None:
        return earliest
    return earliest + (phase_ns - earliest) % interval_ns


def set_timer_slack(ns: int = 1) -> bool:
    """Ask the kernel for tight timer wake-ups (default slack is 50 µs). True if it worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0) == 0
    except OSError:
        return False


def pin_cpu(cpu: int | None) -> None:
    """Pin this process to one CPU (None = leave as is)."""
    if cpu is not None:
        os.sched_setaffinity(0, {int(cpu)})
