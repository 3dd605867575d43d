"""Run one scenario to a verdict: probe -> samples -> statistics -> SLO checks, with bounded
extra sampling while any check is inconclusive (see ``slo`` for the policy)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace

from netslo.core import progress
from netslo.core.errors import InfrastructureError, NotEnoughSamples, SpecError, Unsupported
from netslo.core.phase_times import timed_call
from netslo.core.units import format_duration
from netslo.providers.base import Cluster, Pod
from netslo.slo import spec as slo_mod
from netslo.slo.idle_guard import IdleGuard, guarded
from netslo.slo.measurable import missing_reason, why_unmeasurable
from netslo.slo.scenario import RESPONDER_OF, Scenario
from netslo.slo.stalls import (
    HOST_STALL_S,
    QUIET_LIMIT_S,
    host_stall,
    stall_level,
    untouched,
    wait_for_quiet_host,
    why_remeasure,
)
from netslo.stats.analysis import Analysis, analyze
from netslo.stats.delays import ChunkDelays
from netslo.stats.samples import SampleSet
from netslo.traffic.probes import ProbeSpec

# The sender "could not keep pace" when its median timer error exceeds this many send periods (or
# 1 ms, whichever is larger): the schedule was not open-loop any more, so the run is not trusted.
PACE_LIMIT_PERIODS = 1.0
PACE_FLOOR_S = 0.001
# A failing run over a host stall or a path freeze (netslo.slo.stalls) is taken again, three times at most
# (a kind + Calico CI run of 2026-11-28 had stalls of 30-52 ms in three measurements of 4 s in a row,
# each started after one quiet check run, right after the cluster came up).
REMEASURE_AFTER_STALL = 3
TIME_CHECK_REQUESTS = 100   # client_keeps_time: requests of one short run of the scenario's probe
QUIET_RUNS = 3              # ... and how many in a row must keep time before a measurement is taken again
TIME_CHECK_WAIT_S = 0.2     # ... and how long it waits for their answers
TIME_CHECK_INTERVAL_S = 0.003   # ... and its send period at most: a sweep point at 1 s made each check run 100 s


class SloBreach(AssertionError):
    """Raised by ``Outcome.assert_met``: the measured statistics break the SLO."""


class OffPace(InfrastructureError):
    """The open-loop sender fell behind its schedule (``check_pace``): the run is not trusted."""


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
    slo_source: str = ""     # the SLO file that judged it (results.json: ``slo``)

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.verdict == slo_mod.FAIL]

    @property
    def insufficient(self) -> list:
        return [c for c in self.checks if c.verdict == slo_mod.INSUFFICIENT]

    @property
    def verdict(self) -> str:
        """fail (a breach, or no data), insufficient (too few samples to bound a check), or pass."""
        if self.failed:
            return slo_mod.FAIL
        return slo_mod.INSUFFICIENT if self.insufficient else slo_mod.PASS

    def message(self) -> str:
        head = {slo_mod.FAIL: "SLO breach", slo_mod.INSUFFICIENT: "SLO not judged (not enough samples)",
                slo_mod.PASS: "SLO met"}[self.verdict] + f": {self.scenario.id}"
        shown = (self.failed + self.insufficient) or self.checks
        lines = [c.line() for c in shown] + list(self.notes)
        timer = self.analysis.metrics["timer_error.p99"].value
        lines.append(f"context: sender timer error p99 = {format_duration(timer)} (host scheduling noise), "
                     f"{len(self.samples)} requests in {self.batches} batch(es), provider "
                     f"{self.environment.get('provider', '?')}")
        return head + "\n  " + "\n  ".join(lines)

    def summary_line(self) -> str:
        """'<scenario> <verdict> rtt p50 … p99 … loss … n=…' for progress and logs."""
        m = self.analysis.metrics
        worst = (self.failed + self.insufficient)[:1]
        why = f" — {worst[0].line()}" if worst else ""
        return (f"{self.scenario.id}: {self.verdict} rtt p50 {format_duration(m['rtt.p50'].value)} "
                f"p99 {format_duration(m['rtt.p99'].value)} loss {m['loss'].value:.2%} "
                f"n={len(self.samples)} in {self.batches} batch(es){why}")

    def assert_met(self) -> None:
        """Raise SloBreach with every broken threshold (value, CI, threshold) when the SLO is broken,
        NotEnoughSamples when a check could not be bounded (the test errors, it does not pass)."""
        if self.failed:
            raise SloBreach(self.message())
        if self.insufficient:
            raise NotEnoughSamples(self.message())


def target(scenario: Scenario, server: Pod) -> str:
    """The server's address of the scenario's family. A scenario that reaches the runner was asked
    for (a run that asked for IPv4 only never selects IPv6 ones), so a missing address is an
    InfrastructureError naming it, not a skip."""
    try:
        return server.address(scenario.family)
    except Unsupported as e:
        raise InfrastructureError(f"{scenario.id}: {e}") from None


def probe_spec(scenario: Scenario, server: Pod, ports: dict, sampling: slo_mod.Sampling, count: int) -> ProbeSpec:
    req, resp = scenario.sizes
    fields = {"host": target(scenario, server), "port": ports.get(RESPONDER_OF[scenario.protocol]),
              **scenario.probe_fields()}
    return ProbeSpec(protocol=scenario.protocol, count=count, interval=scenario.interval or sampling.interval,
                     req_bytes=req, resp_bytes=resp, tos=scenario.tos, wait=sampling.wait,
                     sender=sampling.udp_sender if scenario.protocol == "udp" else "python", **fields)


def not_gated(spec: slo_mod.SloSpec, what: str, datapath: str) -> None:
    """Unsupported (category 'not_gated') for a scenario no objective selects when the SLO file
    says ``gate: selected-only``; nothing otherwise (the caller's configuration error follows)."""
    if spec.gate == slo_mod.GATE_SELECTED_ONLY:
        raise Unsupported(f"{what}: no objective of {spec.source} selects it on datapath {datapath} "
                          f"(gate: {slo_mod.GATE_SELECTED_ONLY})", "not_gated")


def check_pace(analysis: Analysis, interval: float) -> None:
    """OffPace (an InfrastructureError) when the open-loop sender fell behind its schedule."""
    median_lag = analysis.metrics["timer_error.p50"].value
    limit = max(PACE_FLOOR_S, PACE_LIMIT_PERIODS * interval)
    if median_lag > limit:
        raise OffPace(
            f"probe could not keep its schedule: median send-timer error {median_lag * 1e3:.3f} ms "
            f"> {limit * 1e3:.3f} ms; the host is overloaded or the interval is too short")


def require_measurable(thresholds: list, scenario: Scenario, cluster: Cluster) -> None:
    """Unsupported (category 'capability') when a threshold's metric cannot be measured for this
    protocol on this provider at all; known before anything is sent."""
    why = sorted({w for t in thresholds
                  if (w := why_unmeasurable(t.metric, scenario.protocol, getattr(cluster, "shared_clock", False))) is not None})
    if why:
        raise Unsupported(f"{scenario.id} on provider {cluster.provider}: " + "; ".join(why), "capability")


@timed_call("analysis")
def judge_all(analysis: Analysis, thresholds: list, confidence: float, final: bool = True) -> list:
    """Every threshold judged: a metric without data fails with the reason; with ``final`` an
    inconclusive check is decided (point estimate if the CI is bounded, else insufficient)."""
    out = []
    for t in thresholds:
        est = analysis.metrics.get(t.metric)
        if est is None or est.n == 0:
            out.append(slo_mod.missing(t, missing_reason(t.metric, analysis.counts)))
        elif final:
            out.append(slo_mod.decide(est, t, confidence))
        else:
            out.append(slo_mod.Check(t, est, slo_mod.judge(est, t)))
    return out


def run(cluster: Cluster, client: Pod, server: Pod, ports: dict, scenario: Scenario,
        spec: slo_mod.SloSpec, expect_breach: bool = False) -> Outcome:
    """Measure ``scenario`` and judge it; a failing run taken over a host stall or a path freeze
    (``netslo.slo.stalls``) is measured afresh (``REMEASURE_AFTER_STALL`` times at most, after a host
    stall once the client keeps time again) and the message says so; ``settle_stalls`` decides.
    A run whose sender could not keep its schedule (``OffPace``) is taken again the same way, and
    stays an InfrastructureError when the last one could not either. ``expect_breach``: a control
    that must break the SLO (``settle_stalls``)."""
    t0 = time.monotonic()
    notes = []
    attempt = 0

    def until_quiet(level: float) -> str:
        return client_keeps_time(cluster, client, server, ports, scenario, spec, level)

    while True:
        try:
            out = _measure(cluster, client, server, ports, scenario, spec)
        except OffPace as e:
            if attempt >= REMEASURE_AFTER_STALL:
                raise OffPace(f"{scenario.id}: {e} (measurement {attempt + 1}). Before: " + "; ".join(notes)) from None
            notes.append(f"re-measured: the previous run's {e}; {until_quiet(HOST_STALL_S)}")
            attempt += 1
            continue
        if not settle_stalls(out, attempt, notes, spec.sampling.confidence, until_quiet, expect_breach):
            break
        attempt += 1
    out.notes = notes
    out.seconds = time.monotonic() - t0
    out.slo_source = spec.source
    return out


def client_keeps_time(cluster: Cluster, client: Pod, server: Pod, ports: dict, scenario: Scenario,
                      spec: slo_mod.SloSpec, level: float = HOST_STALL_S) -> str:
    """Short runs of the scenario's own probe (``TIME_CHECK_REQUESTS``, answers not judged) until
    ``QUIET_RUNS`` in a row send every request within ``level`` s of its schedule, at most
    ``QUIET_LIMIT_S``: the readiness signal of the client that stalled, wherever it runs. What it
    saw, for the notes."""
    full = probe_spec(scenario, server, ports, spec.sampling, TIME_CHECK_REQUESTS)
    check = replace(full, wait=min(spec.sampling.wait, TIME_CHECK_WAIT_S),
                    interval=min(full.interval, TIME_CHECK_INTERVAL_S))
    t0, runs, quiet = time.monotonic(), 0, 0
    while True:
        with _guard(full.interval):   # the condition the measurement runs in: no CPU idles long
            ran = cluster.probe(client, check)
        runs += 1
        worst = max((float(ChunkDelays(c).series("timer_error").max(initial=0)) for c in ran.chunks()),
                    default=0.0) / 1e9
        quiet = quiet + 1 if worst <= level else 0
        if quiet >= QUIET_RUNS or time.monotonic() - t0 >= QUIET_LIMIT_S:
            kept = (f"kept time in {quiet} check runs in a row ({runs} in all)" if quiet >= QUIET_RUNS
                    else f"still did not keep time in {runs} check run(s)")
            return (f"the client {kept} of {TIME_CHECK_REQUESTS} requests "
                    f"({time.monotonic() - t0:.1f} s; last timer error max {format_duration(worst)})")


def this_host_keeps_time(level: float = HOST_STALL_S) -> str:
    """``stalls.wait_for_quiet_host`` for the notes: this process's timers stand for the client's."""
    return f"{wait_for_quiet_host(level=level):.1f} s waited for this host's timers to keep time"


def settle_stalls(out: Outcome, attempt: int, notes: list, confidence: float,
                  until_quiet=this_host_keeps_time, expect_breach: bool = False) -> bool:
    """After measurement ``attempt`` (0 = the first): True when it is to be measured afresh — it
    failed over a stall and attempts are left; the reason goes to ``notes`` and, after a host stall,
    ``until_quiet(level)`` first waits until the client keeps time within the stall level
    (``stalls.stall_level`` of the broken thresholds) and says what it saw. The last one, failed over
    a host stall whose lateness alone made the breach (``host_made_breach``): InfrastructureError,
    not an SLO verdict.

    ``expect_breach`` (a control whose failure is the expected result, e.g. a congested link without
    priority): re-measuring keeps a stall from failing a path that meets its SLO; a control's
    failure is what it must show, so its run is kept as soon as the breach is the path's (a threshold
    fails also on the requests no host stall touched; a held or frozen path is part of what a
    congested link does), and measured afresh only when the client's own lateness made the breach
    (on kind + Calico the priority control was measured four times, ~20 s, for a breach of 3-4x
    its threshold that each of them showed)."""
    if not out.failed:
        return False
    level = stall_level([c.threshold for c in out.failed])
    if expect_breach:
        why = host_made_breach(out, confidence, level)
    else:
        why = why_remeasure(out.analysis, out.samples, level)
    if why is None:
        return False
    if attempt < REMEASURE_AFTER_STALL:
        if host_stall(out.analysis, level) is not None:
            why += f"; {until_quiet(level)}"
        notes.append(f"re-measured: the previous run failed while {why}")
        return True
    starved = why if expect_breach else host_made_breach(out, confidence, level)   # (the same question)
    if starved is not None:
        raise InfrastructureError(f"{out.scenario.id}: not an SLO verdict: "
                                  + "; ".join(c.line() for c in out.failed)
                                  + f" in measurement {attempt + 1}, but {starved}. Before: " + "; ".join(notes))
    return False


def host_made_breach(out: Outcome, confidence: float, level: float = HOST_STALL_S) -> str | None:
    """Why a failing measurement over a host stall (client later than ``level`` s) is the client's
    lateness, not the path's: no threshold fails on the requests no stall touched
    (``stalls.untouched``), or the stalls touched every request. None if the host did not stall or
    a threshold fails on the untouched requests too (the path broke it), by its CI or, where too few
    are left to bound it, by the point estimate."""
    worst = host_stall(out.analysis, level)
    if worst is None:
        return None
    keep = untouched(out.samples, level)
    timer = (f"sender timer error max {format_duration(worst)}, "
             f"p99 {format_duration(out.analysis.metrics['timer_error.p99'].value)}, stall level {format_duration(level)}")
    if not keep.any():
        return (f"the measuring client itself was descheduled ({timer}) around every one of the "
                f"{len(keep)} requests: none is left that its stalls did not touch")
    rest = out.samples.select(keep)
    checks = judge_all(analyze(rest, confidence), [c.threshold for c in out.checks], confidence)
    if any(c.verdict == slo_mod.FAIL or (c.verdict == slo_mod.INSUFFICIENT and c.estimate.value > c.threshold.limit)
           for c in checks):
        return None   # broken there too: by its CI, or (too few left to bound it) by the point estimate
    return (f"the measuring client itself was descheduled ({timer}), and on the "
            f"{int(keep.sum())} of {len(keep)} requests its stalls did not touch no threshold fails ("
            + "; ".join(c.line() for c in checks) + ")")


def _guard(period_s: float):
    """An ``IdleGuard`` for a probe sending every ``period_s`` s when ``idle_guard.guarded``, else nothing."""
    return IdleGuard() if guarded(period_s) else contextlib.nullcontext()


def _measure(cluster: Cluster, client: Pod, server: Pod, ports: dict, scenario: Scenario,
             spec: slo_mod.SloSpec) -> Outcome:
    """One measurement with bounded extra sampling while any check is inconclusive."""
    t0 = time.monotonic()
    sampling = spec.sampling
    thresholds = spec.thresholds_for({**scenario.labels(), "datapath": cluster.datapath})
    if not thresholds:  # a scenario nobody set an objective for must not pass silently
        not_gated(spec, scenario.id, cluster.datapath)
        raise SpecError(f"{spec.source}: objectives", scenario.id,
                        "an objective whose select matches this scenario (protocol/placement/profile/datapath/family)"
                        + spec.not_selected_hint())
    require_measurable(thresholds, scenario, cluster)
    batches: list[SampleSet] = []
    total = 0
    most = sampling.most_batches
    period = scenario.interval or sampling.interval       # s between sends (probe_spec's interval)
    while True:
        count = min(sampling.samples, sampling.max_samples - total)
        progress.note(f"{scenario.id}: batch {len(batches) + 1}/{most} ({count} requests, "
                      f"{format_duration(count * period)} of sending)")
        with _guard(period):
            batch = cluster.probe(client, probe_spec(scenario, server, ports, sampling, count))
        batches.append(batch)
        total += len(batch)
        merged = batches[0] if len(batches) == 1 else SampleSet.concat(batches)
        analysis = analyze(merged, sampling.confidence)
        check_pace(analysis, period)
        verdicts = [c.verdict for c in judge_all(analysis, thresholds, sampling.confidence, final=False)]
        if slo_mod.INCONCLUSIVE not in verdicts or total >= sampling.max_samples:
            break
    checks = judge_all(analysis, thresholds, sampling.confidence)
    merged.meta.update(scenario=scenario.id, server_pod=server.name, server_node=server.node, family=scenario.family)
    env = cluster.environment()
    if guarded(period):
        env = {**env, "idle_guard": IdleGuard().describe()}
    out = Outcome(scenario, merged, analysis, checks, env, len(batches), time.monotonic() - t0)
    progress.note(out.summary_line())
    return out

