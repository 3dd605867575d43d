"""Run one scenario to a verdict: probe -> samples -> statistics -> SLO checks, with bounded
extra sampling while any check is inconclusive (see ``slo`` for the policy)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import slo as slo_mod
from .errors import InfrastructureError, SpecError, Unsupported
from .probes import ProbeSpec
from .providers.base import Cluster, Pod
from .samples import SampleSet
from .scenario import RESPONDER_OF, Scenario
from .stats import Analysis, analyze
from .units import format_duration

# The sender "could not keep pace" when its median timer error exceeds this many send periods (or
# 1 ms, whichever is larger): the schedule was not open-loop any more, so the run is not trusted.
PACE_LIMIT_PERIODS = 1.0
PACE_FLOOR_S = 0.001
# Sender timer error above this means the measuring host itself was descheduled (a "host stall").
HOST_STALL_S = 0.010
REMEASURE_AFTER_STALL = 1


class SloBreach(AssertionError):
    """Raised by ``Outcome.assert_met``: the measured statistics break the SLO."""


@dataclass
class Outcome:
    """Everything one scenario produced: raw samples, statistics, checks and the verdict."""

    scenario: Scenario
    samples: SampleSet
    analysis: Analysis
    checks: list
    environment: dict
    batches: int = 1
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.verdict == slo_mod.FAIL]

    @property
    def verdict(self) -> str:
        return slo_mod.FAIL if self.failed else slo_mod.PASS

    def message(self) -> str:
        head = f"SLO breach: {self.scenario.id}" if self.failed else f"SLO met: {self.scenario.id}"
        lines = [c.line() for c in (self.failed or self.checks)] + list(self.notes)
        timer = self.analysis.metrics["timer_error.p99"].value
        lines.append(f"context: sender timer error p99 = {format_duration(timer)} (host scheduling noise), "
                     f"{len(self.samples)} requests in {self.batches} batch(es), provider "
                     f"{self.environment.get('provider', '?')}")
        return head + "\n  " + "\n  ".join(lines)

    def assert_met(self) -> None:
        """Raise SloBreach with every broken threshold (value, CI, threshold) when the SLO is broken."""
        if self.failed:
            raise SloBreach(self.message())


def probe_spec(scenario: Scenario, server: Pod, ports: dict, sampling: slo_mod.Sampling, count: int) -> ProbeSpec:
    req, resp = scenario.sizes
    return ProbeSpec(protocol=scenario.protocol, host=server.ip, port=ports[RESPONDER_OF[scenario.protocol]],
                     count=count, interval=scenario.interval or sampling.interval, req_bytes=req,
                     resp_bytes=resp, tos=scenario.tos, wait=sampling.wait)


def check_pace(analysis: Analysis, interval: float) -> None:
    """InfrastructureError when the open-loop sender fell behind its schedule."""
    median_lag = analysis.metrics["timer_error.p50"].value
    limit = max(PACE_FLOOR_S, PACE_LIMIT_PERIODS * interval)
    if median_lag > limit:
        raise InfrastructureError(
            f"probe could not keep its schedule: median send-timer error {median_lag * 1e3:.3f} ms "
            f"> {limit * 1e3:.3f} ms; the host is overloaded or the interval is too short")


def host_stall(analysis: Analysis) -> float | None:
    """Worst sender timer error (s) if the measuring host itself stalled during the run, else None.

    A stalled sender is independent of the network under test (a slow network does not delay the
    client's own timer), so it marks samples taken while the host was descheduled."""
    worst = analysis.metrics["timer_error.max"].value
    return worst if worst > HOST_STALL_S else None


def run(cluster: Cluster, client: Pod, server: Pod, ports: dict, scenario: Scenario,
        spec: slo_mod.SloSpec) -> Outcome:
    """Measure ``scenario`` and judge it; a failing run taken during a host stall is measured afresh
    once (``REMEASURE_AFTER_STALL``) and the message says so."""
    t0 = time.monotonic()
    notes = []
    for attempt in range(1 + REMEASURE_AFTER_STALL):
        out = _measure(cluster, client, server, ports, scenario, spec)
        stall = host_stall(out.analysis)
        if not out.failed or stall is None or attempt == REMEASURE_AFTER_STALL:
            break
        notes.append(f"re-measured: the previous run failed while the measuring host stalled "
                     f"(sender timer error max {format_duration(stall)})")
    out.notes = notes
    out.seconds = time.monotonic() - t0
    return out


def _measure(cluster: Cluster, client: Pod, server: Pod, ports: dict, scenario: Scenario,
             spec: slo_mod.SloSpec) -> Outcome:
    """One measurement with bounded extra sampling while any check is inconclusive."""
    t0 = time.monotonic()
    sampling = spec.sampling
    thresholds = spec.thresholds_for({**scenario.labels(), "datapath": cluster.datapath})
    if not thresholds:  # a scenario nobody set an objective for must not pass silently
        raise SpecError(f"{spec.source}: objectives", scenario.id,
                        "an objective whose select matches this scenario (protocol/placement/profile/datapath)")
    batches: list[SampleSet] = []
    total = 0
    while True:
        count = min(sampling.samples, sampling.max_samples - total)
        batch = cluster.probe(client, probe_spec(scenario, server, ports, sampling, count))
        batches.append(batch)
        total += len(batch)
        merged = batches[0] if len(batches) == 1 else SampleSet.concat(batches)
        analysis = analyze(merged, sampling.confidence)
        check_pace(analysis, scenario.interval or sampling.interval)
        unmeasurable = [t.metric for t in thresholds if t.metric not in analysis.metrics]
        if unmeasurable:
            raise Unsupported(f"{', '.join(sorted(set(unmeasurable)))} cannot be measured for {scenario.id} "
                              f"on provider {cluster.provider} (e.g. one-way delay needs a shared clock)")
        verdicts = [slo_mod.judge(analysis.metrics[t.metric], t) for t in thresholds]
        if slo_mod.INCONCLUSIVE not in verdicts or total >= sampling.max_samples:
            break
    checks = [slo_mod.decide(analysis.metrics[t.metric], t) for t in thresholds]
    merged.meta.update(scenario=scenario.id, server_pod=server.name, server_node=server.node)
    return Outcome(scenario, merged, analysis, checks, cluster.environment(), len(batches),
                   time.monotonic() - t0)

