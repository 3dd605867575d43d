"""Stalls that make a failing measurement worth taking once more.

Two kinds, both one-off events of a shared CI machine rather than properties of the network:

* **host stall**: the measuring client itself was descheduled. Its own send-timer error (actual send
  time minus schedule) exceeded the stall level (``stall_level``): ``HOST_STALL_S``, or half the
  smallest delay threshold the run breaks if that is less (at least ``STALL_FLOOR_S``) — a client that
  lost half a threshold's budget to its own lateness may have made the breach itself (a 7 ms wake-up
  on a loaded CI machine against a 5 ms P50). A slow network cannot delay the client's timer.
* **path freeze**: something on the path (the server pod, its node, a node container of a local
  cluster) stopped for a while and then went on. Every request sent during the freeze waits for its
  end and is answered right after it: a run of at least ``FREEZE_MIN_REQUESTS`` consecutive requests,
  the first waiting at least ``HOST_STALL_S``, whose answers arrive within ``FREEZE_COMPRESSION`` of
  the time over which they were sent (requests sent 3 ms apart answered within a fraction of a
  millisecond of each other). A queue that builds and drains (congestion, a shaper) releases its
  requests at its service rate, spread over about the time they arrived in, so it does not match.

A failing verdict over either is measured afresh, up to three times (``runner.REMEASURE_AFTER_STALL``),
and the last measurement is judged; the message says so. A regression that causes them recurs and
still fails. When the last one still
failed over a host stall, its thresholds are judged again on the requests no stall touched
(``untouched``): if none fails there (or the stalls touched every request, so nothing is left to
judge), the client's own lateness made the breach and the scenario is an infrastructure error naming
it, never an SLO failure; if one fails there too, the network broke it.
Before measuring again after a host stall the runner waits (bounded) until the client keeps time
again (``runner.client_keeps_time``: short runs of its own probe), so the next measurement does not
start inside the same stall; ``wait_for_quiet_host`` is the same wait on this process's own timers,
for callers without a probe to repeat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from netslo.core.units import format_duration
from netslo.slo.spec import FRACTION_METRICS
from netslo.stats.analysis import Analysis
from netslo.stats.samples import SampleSet

HOST_STALL_S = 0.010
STALL_SHARE = 0.5           # stall_level: this share of the smallest delay threshold broken ...
STALL_FLOOR_S = 0.002       # ... but never below this (a Python sender on a busy 2-core VM stays below it)
FREEZE_MIN_REQUESTS = 5
FREEZE_COMPRESSION = 0.25
QUIET_STEP_S = 0.001        # wait_for_quiet_host: one timer step
QUIET_WINDOW_S = 0.5        # ... a window of steps, none later than half the stall level, is quiet
QUIET_LIMIT_S = 10.0        # ... and it gives up after this long (so does runner.client_keeps_time)


@dataclass(frozen=True)
class Freeze:
    """The longest freeze seen: how long the first held request waited (s), when it was sent (s after
    the run's first send), how many requests were held (from the first, those that waited more than
    twice the median wait around it), and the span of their answers (s)."""

    wait: float
    at: float
    held: int
    answered_within: float


def stall_level(thresholds=()) -> float:
    """Client lateness (s) that counts as a host stall in a run judged on ``thresholds`` (the broken
    ones): ``HOST_STALL_S``, or ``STALL_SHARE`` of the smallest delay threshold among them if that is
    less, never below ``STALL_FLOOR_S``. Fraction thresholds (loss) do not lower it."""
    delays = [t.limit for t in thresholds if t.metric not in FRACTION_METRICS and t.limit > 0]
    return max(STALL_FLOOR_S, min([HOST_STALL_S] + [STALL_SHARE * d for d in delays]))


def host_stall(analysis: Analysis, level: float = HOST_STALL_S) -> float | None:
    """Worst sender timer error (s) if the measuring host itself stalled during the run (the client
    was later than ``level`` s at least once), else None."""
    worst = analysis.metrics["timer_error.max"].value
    return worst if worst > level else None


def untouched(samples: SampleSet, level: float = HOST_STALL_S) -> np.ndarray:
    """Mask of the requests no host stall touched. A request the client sent more than
    ``level`` s late shows that the client was not running from its scheduled time to its send:
    that request, and every request in flight then (sent before that send, answered after that
    schedule), may carry the client's lateness instead of the path's delay. Lost requests count by
    their send time only (a stall does not lose them)."""
    sched, send, recv = samples.column("sched_ns"), samples.column("send_ns"), samples.column("recv_ns")
    late = (send - sched) > level * 1e9
    keep = ~late
    if not late.any():
        return keep
    starts, ends = sched[late], send[late]
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])   # latest end of any window begun by then
    answered = keep & (recv >= 0)
    k = np.searchsorted(starts, recv[answered], side="left") - 1       # last window begun before the answer
    hit = (k >= 0) & (ends[np.maximum(k, 0)] > send[answered])
    keep[np.flatnonzero(answered)[hit]] = False
    return keep


def wait_for_quiet_host(limit: float = QUIET_LIMIT_S, level: float = HOST_STALL_S) -> float:
    """Wait until this process's 1 ms timers keep time for ``QUIET_WINDOW_S`` (no step later than
    ``level / 2``), at most ``limit`` s; the seconds waited. Where the client is a plain
    process of this host (embedded) that is its host; a stall inside a kind pod need not show here."""
    t0 = time.monotonic()
    while True:
        window_end = time.monotonic() + QUIET_WINDOW_S
        quiet = True
        while (now := time.monotonic()) < window_end:
            time.sleep(QUIET_STEP_S)
            quiet &= time.monotonic() - now - QUIET_STEP_S <= level / 2
        if quiet or time.monotonic() - t0 >= limit:
            return time.monotonic() - t0


def path_freeze(samples: SampleSet) -> Freeze | None:
    """The longest path freeze in ``samples`` (see the module doc), else None. Holds two columns
    (16 B per request), never the whole rows: a soak's failing run may hold millions of requests."""
    send, wait = samples.column("send_ns"), samples.column("recv_ns")
    if np.any(send[1:] < send[:-1]):                              # parts of an interleaved run
        order = np.argsort(send, kind="stable")
        send, wait = send[order], wait[order]
    lost = wait < 0
    wait -= send                                                  # in place: recv_ns - send_ns
    wait[lost] = -1
    del lost
    k = FREEZE_MIN_REQUESTS
    first = np.flatnonzero(wait[:max(len(wait) - k + 1, 0)] >= HOST_STALL_S * 1e9)
    if not len(first):
        return None
    idx = first[:, None] + np.arange(k)                           # k consecutive requests from each
    recv = send[idx] + wait[idx]
    held = ((wait[idx] >= 0).all(axis=1)
            & ((recv.max(axis=1) - recv.min(axis=1)) <= FREEZE_COMPRESSION * (send[first + k - 1] - send[first])))
    hit = first[held]
    if not len(hit):
        return None
    i = int(hit[np.argmax(wait[hit])])
    around = wait[max(i - 1000, 0):i + 1000]
    usual = 2 * np.median(around[around >= 0])                    # twice the usual wait around it
    j = i + 1
    while j < len(send) and wait[j] > usual:                      # held: waited more than that
        j += 1
    recv = send[i:j] + wait[i:j]
    return Freeze(float(wait[i]) / 1e9, float(send[i] - send[0]) / 1e9, j - i, float(recv.max() - recv.min()) / 1e9)


def why_remeasure(analysis: Analysis, samples: SampleSet, level: float = HOST_STALL_S) -> str | None:
    """The note for a failing run worth measuring again, or None (see the module doc); ``level``:
    the client lateness (s) that counts as a host stall (``stall_level``). A run with both names
    both, the path's freeze first. Over a host stall a "freeze" that held fewer than
    ``FREEZE_MIN_REQUESTS`` requests is the stall's own pattern (the request in flight read late, the
    missed ones sent at once and answered together), not the path's."""
    why = []
    stall = host_stall(analysis, level)
    freeze = path_freeze(samples)
    if freeze is not None and (stall is None or freeze.held >= FREEZE_MIN_REQUESTS):
        why.append(f"the path froze: {freeze.held} requests sent from {freeze.at:.2f} s into the run were held "
                   f"(the first for {format_duration(freeze.wait)}) and answered within "
                   f"{format_duration(freeze.answered_within)} of each other")
    if stall is not None:
        why.append(f"the measuring host stalled (sender timer error max {format_duration(stall)}, "
                   f"stall level {format_duration(level)})")
    return ", and ".join(why) or None
