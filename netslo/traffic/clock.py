"""Clock and timer helpers. All timestamps are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, ns)."""

from __future__ import annotations

import ctypes
import os
import time

now_ns = time.monotonic_ns
PR_SET_TIMERSLACK = 29
# The kernel lets a poll/select/epoll timeout of t s end up to t/1000 late (its slack estimate for
# such sleeps: 1 ms after 1 s, against the 50 µs timer slack of a short sleep); a long wait for a
# send therefore stops this long before its deadline and sleeps the rest again.
FINAL_SLEEP_S = 0.002


async def sleep_until(t_ns: int) -> None:
    """asyncio sleep until CLOCK_MONOTONIC ``t_ns`` (ns): waits longer than ``2 * FINAL_SLEEP_S`` end
    ``FINAL_SLEEP_S`` early and the rest is slept again."""
    import asyncio  # only its callers' event loop needs it; importing this module stays light
    while (left := (t_ns - now_ns()) / 1e9) > 0:
        await asyncio.sleep(left - FINAL_SLEEP_S if left > 2 * FINAL_SLEEP_S else left)


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
