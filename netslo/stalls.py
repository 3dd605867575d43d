"""Stalls that make a failing measurement worth taking once more.

Two kinds, both one-off events of a shared CI machine rather than properties of the network:

* **host stall**: the measuring client itself was descheduled. Its own send-timer error (actual send
  time minus schedule) exceeded ``HOST_STALL_S``; a slow network cannot delay the client's timer.
* **path freeze**: something on the path (the server pod, its node, a node container of a local
  cluster) stopped for a while and then went on. Every request sent during the freeze waits for its
  end and is answered right after it: a run of at least ``FREEZE_MIN_REQUESTS`` consecutive requests,
  the first waiting at least ``HOST_STALL_S``, whose answers arrive within ``FREEZE_COMPRESSION`` of
  the time over which they were sent (requests sent 3 ms apart answered within a fraction of a
  millisecond of each other). A queue that builds and drains (congestion, a shaper) releases its
  requests at its service rate, spread over about the time they arrived in, so it does not match.

A failing verdict over either is measured afresh once and the second measurement is judged; the
message says so. A regression that causes them recurs in the second measurement and still fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .samples import SampleSet
from .stats import Analysis
from .units import format_duration

HOST_STALL_S = 0.010
FREEZE_MIN_REQUESTS = 5
FREEZE_COMPRESSION = 0.25


@dataclass(frozen=True)
class Freeze:
    """The longest freeze seen: how long the first held request waited (s), when it was sent (s after
    the run's first send), how many requests were held (from the first, those that waited more than
    twice the run's median), and the span of their answers (s)."""

    wait: float
    at: float
    held: int
    answered_within: float


def host_stall(analysis: Analysis) -> float | None:
    """Worst sender timer error (s) if the measuring host itself stalled during the run, else None."""
    worst = analysis.metrics["timer_error.max"].value
    return worst if worst > HOST_STALL_S else None


def path_freeze(samples: SampleSet) -> Freeze | None:
    """The longest path freeze in ``samples`` (see the module doc), else None."""
    r = samples.rows
    r = r[r["recv_ns"] >= 0]
    k = FREEZE_MIN_REQUESTS
    if len(r) < k:
        return None
    r = r[np.argsort(r["send_ns"], kind="stable")]
    send, recv = r["send_ns"].astype(np.int64), r["recv_ns"].astype(np.int64)
    win_send = send[k - 1:] - send[:1 - k]                        # send span of each window of k requests
    win_recv = (np.lib.stride_tricks.sliding_window_view(recv, k).max(axis=1)
                - np.lib.stride_tricks.sliding_window_view(recv, k).min(axis=1))
    first_wait = (recv - send)[:1 - k]
    hit = np.flatnonzero((first_wait >= HOST_STALL_S * 1e9) & (win_recv <= FREEZE_COMPRESSION * win_send))
    if not len(hit):
        return None
    i = int(hit[np.argmax(first_wait[hit])])
    wait = recv - send
    usual = 2 * np.median(wait)
    j = i + 1
    while j < len(r) and wait[j] > usual:                         # held: waited more than twice the usual
        j += 1
    return Freeze(float(first_wait[i]) / 1e9, float(send[i] - send[0]) / 1e9, j - i,
                  float(recv[i:j].max() - recv[i:j].min()) / 1e9)


def why_remeasure(analysis: Analysis, samples: SampleSet) -> str | None:
    """The note for a failing run worth measuring again, or None (see the module doc)."""
    stall = host_stall(analysis)
    if stall is not None:
        return f"the measuring host stalled (sender timer error max {format_duration(stall)})"
    freeze = path_freeze(samples)
    if freeze is not None:
        return (f"the path froze: {freeze.held} requests sent from {freeze.at:.2f} s into the run were held "
                f"(the first for {format_duration(freeze.wait)}) and answered within "
                f"{format_duration(freeze.answered_within)} of each other")
    return None
