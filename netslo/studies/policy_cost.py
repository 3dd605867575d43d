"""Data-path cost of NetworkPolicy at scale: RTT with 0, 100, 1000 policies on the server pod.

The server pod is isolated with one policy admitting the client; ``counts`` decoy policies
(``Policies.decoys``: they select the server, admit no real pod) are added per alternative. A tcp-crr
probe (a new connection per request: a stateful CNI evaluates policy on a flow's first packet, so a
long flow would not meet the policies at all) measures RTT for each count in interleaved rounds
(``netslo.studies.interleave``: slow host drift
hits every count alike). Per step (each count against the previous one, and the largest against
none) the report gives the P50 and P99 shift with a percentile-bootstrap CI
(``stats.bootstrap_quantile_diff``). SLO metrics ``policy_cost.p50`` / ``policy_cost.p99``: the shift
from none to the largest count (seconds; upper bounds like every threshold).

Settling: a CNI's agent reprograms the node after policy objects change (kind + Calico on 2 cores:
seconds for 1000), and a measurement taken meanwhile shows its CPU load and the connections it has not
admitted yet, not the per-connection cost. After each change the study probes in short bursts of new
connections until the path is steady (``settle``: ``Policies.settle_bursts`` consecutive bursts, each answering
every connection with a P50 within ``SETTLE_TOL`` of the run's first, or each answering none: a blocked
path), and reports how long that took per count; a path that does not settle within ``SETTLE_LIMIT_S``
is an infrastructure error naming its last bursts. Two steady bursts were not enough on kind + Calico
(2026-11-27): after them the admitted client still lost 7.6 % (no decoys) and 21.5 % (1000) of its
connections (the CNI agent still applying the changes, we infer); with ten it lost none.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from netslo.core.errors import InfrastructureError
from netslo.core.units import format_duration, format_percent
from netslo.providers.policy import Policies
from netslo.slo import spec as slo_mod
from netslo.stats.analysis import Estimate, bootstrap_quantile_diff
from netslo.studies.enforcement import probe_spec
from netslo.studies.interleave import interleaved, rtt

COUNTS = (0, 100, 1000)
QUANTILES = (50.0, 99.0)
MAX_LOSS = 0.01   # an admitted client losing more is not a cost to measure: the policy blocks it
SETTLE_BURST = 100           # new connections per settling burst, SETTLE_INTERVAL_S apart
SETTLE_INTERVAL_S = 0.002
SETTLE_TOL = 0.25            # consecutive bursts' P50s within 25 % (and SETTLE_FLOOR_S) count as steady
SETTLE_STEADY = Policies.settle_bursts   # ... this many in a row (a CNI's; ~3 s of bursts on kind)
SETTLE_FLOOR_S = 100e-6
SETTLE_LIMIT_S = 180.0       # s after a change before "did not settle" (an infrastructure error)


@dataclass
class Cost:
    counts: tuple
    samples: dict                                  # count -> SampleSet
    shifts: dict = field(default_factory=dict)     # (from, to, q) -> Estimate (s)
    checks: list = field(default_factory=list)
    settled: dict = field(default_factory=dict)    # count -> [s until steady after each change to it]

    def loss(self, n: int) -> float:
        r = self.samples[n].rows
        return float((r["recv_ns"] < 0).mean()) if len(r) else 1.0

    def judge(self, thresholds: list, confidence: float) -> list:
        """Checks of ``policy_cost.*`` thresholds on the shift none -> largest count; a count whose
        admitted client lost more than MAX_LOSS fails every check, saying so."""
        lossy = [f"{n} policies: loss {format_percent(self.loss(n))}" for n in self.counts if self.loss(n) > MAX_LOSS]
        out = []
        for t in thresholds:
            if t.metric not in slo_mod.SHIFT_METRICS:
                continue
            if lossy:
                out.append(slo_mod.missing(t, "the admitted client lost requests (" + ", ".join(lossy) + ")"))
                continue
            q = float(t.metric.partition(".p")[2])
            est = self.shifts[(self.counts[0], self.counts[-1], q)]
            out.append(slo_mod.decide(est, t, confidence))
        self.checks = out
        return out

    def numbers(self) -> dict:
        """What studies.json keeps: shifts as [value, lo, hi, n] (s), loss and settling times per count."""
        return {"shifts": {f"{a}->{b} p{q:g}": [e.value, e.lo, e.hi, e.n] for (a, b, q), e in self.shifts.items()},
                "loss": {str(n): self.loss(n) for n in self.counts},
                "settled_s": {str(n): v for n, v in self.settled.items()}}

    def summary(self) -> list[str]:
        lines = [f"{n} policies: steady {max(v):.1f} s after the change at most ({len(v)} changes)"
                 for n, v in self.settled.items() if v]
        for (a, b, q), e in self.shifts.items():
            lines.append(f"P{q:g} shift {a} -> {b} policies: {format_duration(e.value)} "
                         f"(CI {format_duration(e.lo)} – {format_duration(e.hi)}, n={e.n})")
        return lines + [c.line() for c in self.checks]


def steps(counts: tuple) -> list[tuple[int, int]]:
    """Each count against the previous one, then the largest against the first (when they differ)."""
    out = list(zip(counts, counts[1:]))
    return out + ([(counts[0], counts[-1])] if len(counts) > 2 else [])


def measure(cluster, client, server, port: int, policies, counts: tuple = COUNTS, rounds: int = 3,
            count: int = 400, interval: float = 0.001, confidence: float = 0.95) -> Cost:
    """RTT per decoy count in interleaved rounds and the shift per step (see the module docstring)."""
    if list(counts) != sorted(set(counts)) or len(counts) < 2 or counts[0] < 0:
        raise ValueError(f"counts: value {counts!r} — expected at least two ascending counts >= 0")
    policies.allow(client, server, port)
    specs = {str(n): probe_spec(server.ip, port, count, interval) for n in counts}
    settled: dict = {n: [] for n in counts}

    def before(name: str) -> None:
        policies.decoys(server, port, int(name))
        settled[int(name)].append(settle(cluster, client, server.ip, port, steady=policies.settle_bursts))

    sets = interleaved(cluster, client, specs, rounds, before=before)
    cost = Cost(tuple(counts), {n: sets[str(n)] for n in counts}, settled=settled)
    for a, b in steps(tuple(counts)):
        ra, rb = rtt(cost.samples[a]), rtt(cost.samples[b])
        for q in QUANTILES:
            cost.shifts[(a, b, q)] = (bootstrap_quantile_diff(ra, rb, q, confidence) if len(ra) and len(rb)
                                      else Estimate(float("nan"), float("-inf"), float("inf"), 0))
    return cost


def settle(cluster, client, host: str, port: int, limit_s: float = SETTLE_LIMIT_S, steady: int = SETTLE_STEADY) -> float:
    """Seconds until ``client`` -> host:port answers steadily after a change: bursts of SETTLE_BURST new
    connections until ``steady`` in a row answer every one with P50s within SETTLE_TOL (or
    SETTLE_FLOOR_S) of the first of them (or answer none). InfrastructureError with the last bursts when
    that takes longer than ``limit_s``."""
    spec = probe_spec(host, port, SETTLE_BURST, SETTLE_INTERVAL_S)
    t0 = time.monotonic()
    seen: list[tuple[float, float]] = []    # (loss, P50 s) per burst
    run = 0                                 # the steady run's first burst is seen[-run]
    while True:
        s = cluster.probe(client, spec)
        r = rtt(s)
        seen.append((1.0 - len(r) / max(len(s.rows), 1), float(np.median(r)) if len(r) else math.inf))
        run = run + 1 if run and _steady(seen[-run - 1], seen[-1]) else (1 if _steady(seen[-1], seen[-1]) else 0)
        if run >= steady:
            return time.monotonic() - t0
        if time.monotonic() - t0 > limit_s:
            last = "; ".join(f"loss {format_percent(lo)}, P50 {format_duration(p)}" for lo, p in seen[-3:])
            raise InfrastructureError(f"the path to {host}:{port} did not settle within {limit_s:.0f} s of a policy "
                                      f"change (last bursts of {SETTLE_BURST} connections: {last})")


def _steady(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two bursts (loss, P50 s) that answered everything and agree within SETTLE_TOL / SETTLE_FLOOR_S, or
    that both answered nothing (a path the policies block is steady too: ``Cost.judge`` fails it)."""
    (la, pa), (lb, pb) = a, b
    if la == 1.0 and lb == 1.0:
        return True
    return la == 0 and lb == 0 and abs(pa - pb) <= max(SETTLE_TOL * min(pa, pb), SETTLE_FLOOR_S)
