"""Workload parametrization data from the source studies: send intervals and message-size profiles.

``SEND_INTERVALS`` (s): 10, 25, 50, 100, 200, 400, 1000 ms open-loop send periods; intervals above
the minimum RTO (200 ms) let a persistent TCP connection go idle long enough for
``tcp_slow_start_after_idle`` to reset its congestion window, which large messages then pay for.
``SIZE_PROFILES``: keys of ``scenario.PROFILES`` (command & control 1k/1k, telemetry 10k/1k,
image 100k/1k). ``sweep()`` turns them into scenarios; ``count_for()`` keeps each point's duration
bounded so long intervals get few samples (a P99 then has no finite CI upper bound: the sweep
leaves it unjudged and says so; it never decides on one sample).
"""

from __future__ import annotations

import itertools
import math

from netslo.slo.scenario import Scenario

SEND_INTERVALS = (0.010, 0.025, 0.050, 0.100, 0.200, 0.400, 1.000)
SIZE_PROFILES = ("1k", "10k", "100k")


def count_for(interval: float, budget_s: float = 2.0, lo: int = 8, hi: int = 200) -> int:
    """Requests for one sweep point: about ``budget_s`` seconds of sending, clamped to [lo, hi]."""
    if interval <= 0:
        raise ValueError(f"interval: value {interval!r} — expected a duration > 0 s")
    return max(lo, min(hi, math.floor(budget_s / interval)))


def sweep(placement: str, protocol: str, profiles=SIZE_PROFILES, intervals=SEND_INTERVALS) -> list[Scenario]:
    """profile x interval scenarios of one protocol, ids like 'cross-node-ws-100k@200ms'."""
    return [Scenario(placement, protocol, pf, interval=iv) for pf, iv in itertools.product(profiles, intervals)]


def label(scenario: Scenario) -> str:
    """Test id with the interval when one is set: 'cross-node-ws-1k@10ms'."""
    if scenario.interval is None:
        return scenario.id
    return f"{scenario.id}@{scenario.interval * 1e3:g}ms"
