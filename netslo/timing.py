"""Clock and timer helpers. All timestamps are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, ns)."""

from __future__ import annotations

import ctypes
import os
import time

now_ns = time.monotonic_ns
PR_SET_TIMERSLACK = 29


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
