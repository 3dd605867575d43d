"""Is B worse than A? Two clusters up at once, each scenario measured on both in interleaved,
randomized pairs of short blocks, and a non-inferiority verdict per scenario and metric.

Measuring A and then B confounds the change with whatever the host did in between: on this
project's 2-core VM a test's P50 moves 25–45 % from run to run, its P99 60–400 %, in regimes that
last tens of seconds. Here every pair is one block of A and one block of B right after each other,
in random order (``Pair.b_first``), so drift and regime switches hit both sides alike (randomized
multiple interleaved trials, Abedi & Brecht, ICPE 2017). The sides never probe at the same moment.

Per scenario and per ``compare:`` margin of the SLO file (``netslo.stats.paired``): B/A of an RTT
percentile, or loss(B) − loss(A), with a paired block bootstrap CI; Holm over every margin of the
run; **fail** when B is worse than the margin with confidence, **pass** when it is within it. An
inconclusive comparison gets more pairs (doubling, at least ``more_pairs``; ``max_pairs`` in all); one still
inconclusive then is **undecided**: never a pass. Once a check has failed, the run is a fail whatever
the others show: the scenarios still inconclusive are not measured on (``Comparison.stopped``). A
scenario no objective's ``compare:`` selects is a configuration error, unless the SLO file says
``gate: selected-only``: then it is left out and listed as not gated (``Comparison.not_gated``). The
CIs and the Holm correction use a family-wise ``FAMILY_ALPHA`` of 1 % (the regression check's); B's
absolute thresholds are judged too, on all of B's blocks together, at the SLO file's confidence.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numpy as np

from netslo.core import progress
from netslo.core.errors import InfrastructureError, SpecError
from netslo.impair import capability
from netslo.impair import spec as impair_spec
from netslo.impair.netem import NetemController
from netslo.providers import clusterspec
from netslo.providers.base import Pod
from netslo.providers.clusterspec import ClusterSpec
from netslo.slo import runner
from netslo.slo import spec as slo_mod
from netslo.slo.scenario import Scenario
from netslo.stats import paired
from netslo.stats.analysis import analyze
from netslo.stats.delays import series_seconds
from netslo.stats.samples import SampleSet

# 1 kB requests each way on both placements, and cross-node 1460 B ones: one 1500-byte frame, two at a
# 1450-byte MTU (VXLAN's), so a change of MTU or encapsulation that 1 kB fits either way is still seen.
SCENARIOS = ([Scenario(p, proto, "1k") for proto in ("udp", "tcp-rr", "tcp-crr") for p in ("same-node", "cross-node")]
             + [Scenario("cross-node", proto, "1460b") for proto in ("udp", "tcp-rr")])
# Blocks and pairs from the noise measured on this project's 2-core VM (2026-12-06, benchmarks/
# compare_power.py, cross-node UDP and TCP-RR): a block's own P50 moves 13-15 % (log sd) from block to
# block, A's and B's blocks of a pair correlate only 0.3-0.5, and pieces of a block 100 ms apart not at
# all: what narrows B/A is the number of blocks. At the same 3200 requests per side, 64 pairs of
# 50-request blocks gave log(B/A) of the P50 an sd of 0.029 against 0.040-0.043 for 16 pairs of 200
# (20 and 100 A/A comparisons; P99 0.05-0.09 against 0.09-0.11), for 29 % more wall time (a probe per block).
BLOCK = 50           # requests per block (0.1 s at the gate's 2 ms)
PAIRS = 64           # pairs measured first
MORE_PAIRS = 64      # ... and added to an inconclusive comparison (at least as many as it has: 64, 128, 256, 512), up to
# MAX_PAIRS (25 600 requests per side). With 50-request blocks (100 A/A comparisons, 2026-12-07) none failed at
# 16-64 pairs; the shipped margins passed 57 of 100 at 64 pairs and 65 of 65 by this procedure, and +10 % of
# every RTT against a 5 % P50 margin failed 18 of 18, 10 of them only at 512 pairs (docs/reports.md).
MAX_PAIRS = 512
UNDECIDED = "undecided"
FAMILY_ALPHA = 0.01  # family-wise false-alarm rate of a comparison run (Holm over all its checks)
N_BOOT = 4000        # bootstrap replicates: the smallest p is 1/4001, so 40 checks can still fail at 1 %


@dataclass
class Side:
    """One side: its spec, cluster, server pod with its responders, and a client per placement."""

    name: str
    spec: ClusterSpec
    cluster: object
    server: Pod
    ports: dict
    clients: dict


def impairment_of(spec: ClusterSpec) -> impair_spec.Impairment | None:
    """The spec's ``netem`` as a checked impairment (a SpecError naming the spec and ``netem.<key>``), or None."""
    try:
        return impair_spec.parse(dict(spec.netem), where="netem") if spec.netem else None
    except SpecError as e:
        raise e.located(spec.source) if spec.source else e from None


def check(spec: ClusterSpec) -> None:
    """What a side's spec can be refused for before anything is brought up (SpecError)."""
    spec.check()
    if impairment_of(spec) is not None and spec.kernel == "host" and not (caps := capability.detect()).netem:
        raise SpecError("netem", " ".join(f"{k} {v}" for k, v in spec.netem),
                        f"a kernel with sch_netem: this one ({caps.kernel}) has none "
                        f"({caps.reasons.get('netem', 'not available')}); kernel: uml runs the side in one that has it",
                        spec.source)


def bring_up(stack: contextlib.ExitStack, name: str, spec: ClusterSpec) -> Side:
    """Side ``name`` of ``spec``; everything it makes is closed by ``stack`` (also on error)."""
    impairment = impairment_of(spec)
    progress.note(f"compare: side {name}: {spec.describe()} ...")
    cluster = stack.enter_context(spec.up())
    first, second = spec.measured_nodes(cluster)[:2]
    server, same, cross = cluster.add_pods([{"name": "server", "node": first},
                                            {"name": "client-same", "node": first},
                                            {"name": "client-cross", "node": second}])
    clients = {"same-node": same, "cross-node": cross}
    for pod in (server, same, cross):       # as a pod's securityContext.sysctls: its own namespace's
        for key, value in spec.sysctls:
            try:
                cluster.exec_in(pod, ["sysctl", "-q", "-w", f"{key}={value}"], timeout=30)
            except InfrastructureError as e:
                raise InfrastructureError(f"side {name}: sysctl {key}={value} in pod {pod.name}: {e}") from None
    ports = cluster.start_responders(server, ("udp", "tcp"))
    if spec.rules:
        cluster.policies().path_rules(server, ports["tcp"], spec.rules)
    if impairment is not None:       # the guest's (kernel: uml) or this kernel's netem, if it has one
        impairer = getattr(cluster, "impairer", None) or NetemController(cluster)
        impairer.apply(server, impairment)
    return Side(name, spec, cluster, server, ports, clients)


@dataclass
class Check:
    """One margin of one scenario: B relative to A, its Holm-adjusted p, and the verdict."""

    margin: slo_mod.Margin
    relative: paired.Relative
    p_adjusted: float = 1.0
    verdict: str = paired.INCONCLUSIVE

    def line(self) -> str:
        r = self.relative
        if r.kind == "ratio":
            what = (f"B/A {r.value:.3f} (CI {r.lo:.3f}–{r.hi:.3f}), allowed ≤ {r.margin:.3f}")
        else:
            what = f"B−A {r.value:+.3%} (CI {r.lo:+.3%}–{r.hi:+.3%}), allowed ≤ {r.margin:+.3%}"
        return (f"{r.metric}: {what} [{self.margin.text} of objective {self.margin.objective}], "
                f"p(worse than allowed) {self.p_adjusted:.3g} Holm, {r.pairs} pairs: {self.verdict}")


@dataclass
class ScenarioComparison:
    scenario: Scenario
    pairs: list = field(default_factory=list)          # of paired.Pair
    b_samples: list = field(default_factory=list)      # B's blocks (SampleSet), for its absolute thresholds
    checks: list = field(default_factory=list)         # of Check
    absolute: list = field(default_factory=list)       # slo Checks of B's thresholds
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        verdicts = {c.verdict for c in self.checks} | {
            {slo_mod.FAIL: paired.FAIL, slo_mod.PASS: paired.PASS}.get(c.verdict, paired.INCONCLUSIVE) for c in self.absolute}
        if paired.FAIL in verdicts:
            return paired.FAIL
        return UNDECIDED if paired.INCONCLUSIVE in verdicts else paired.PASS


@dataclass
class Comparison:
    a: ClusterSpec
    b: ClusterSpec
    seed: int
    scenarios: list = field(default_factory=list)      # of ScenarioComparison
    confidence: float = 0.95
    not_gated: list = field(default_factory=list)      # scenario ids no objective selects (gate: selected-only)
    stopped: list = field(default_factory=list)        # ids left undecided: not measured on once the run had failed

    @property
    def verdict(self) -> str:
        v = {s.verdict for s in self.scenarios}
        return paired.FAIL if paired.FAIL in v else (UNDECIDED if UNDECIDED in v else paired.PASS)


def measure_block(side: Side, scenario: Scenario, sampling: slo_mod.Sampling, count: int) -> SampleSet:
    """One block: ``count`` requests of ``scenario`` on ``side`` (one probe, at the sampling's send period)."""
    spec = runner.probe_spec(scenario, side.server, side.ports, sampling, count)
    return side.cluster.probe(side.clients[scenario.placement], spec)


def measure_pairs(a: Side, b: Side, sc: ScenarioComparison, sampling: slo_mod.Sampling, pairs: int,
                  block: int, rng: np.random.Generator) -> None:
    """``pairs`` more interleaved pairs of ``sc.scenario``, each in random order."""
    for _ in range(pairs):
        b_first = bool(rng.random() < 0.5)
        got = {}
        for side in ((b, a) if b_first else (a, b)):
            got[side.name] = measure_block(side, sc.scenario, sampling, block)
        sa, sb = got[a.name], got[b.name]
        sc.b_samples.append(sb)
        lost_a = int(np.count_nonzero(sa.column("recv_ns") < 0))
        lost_b = int(np.count_nonzero(sb.column("recv_ns") < 0))
        sc.pairs.append(paired.Pair(series_seconds(sa, "rtt"), series_seconds(sb, "rtt"), len(sa), lost_a,
                                    len(sb), lost_b, b_first))


def _relatives(sc: ScenarioComparison, margins: list, confidence: float, seed: int) -> list[Check]:
    out = []
    for mg in margins:
        if mg.metric == "loss":
            r = paired.loss_difference(sc.pairs, mg.limit, confidence, N_BOOT, seed=seed)
        else:
            r = paired.percentile_ratio(sc.pairs, float(mg.metric.partition(".p")[2]), mg.limit, confidence, N_BOOT,
                                        seed=seed)
        out.append(Check(mg, r))
    return out


def decide(result: Comparison) -> None:
    """Holm over every check of the run, then each check's verdict."""
    checks = [c for s in result.scenarios for c in s.checks]
    for c, p in zip(checks, paired.holm([c.relative.p_worse for c in checks])):
        c.p_adjusted = p
        c.verdict = c.relative.verdict(p, result.confidence)


def more_pairs_now(have: int, more_pairs: int) -> int:
    """Pairs to add to a scenario still inconclusive after ``have``: at least ``more_pairs``, and as many as
    it has (the CI narrows by sqrt(2) per round, and the looks at the data stay few)."""
    return max(more_pairs, have)


def gated(spec: slo_mod.SloSpec, scenarios, datapath: str) -> tuple[dict, list]:
    """scenario id -> its ``compare:`` margins, and the ids left out (``gate: selected-only``); a
    SpecError for a scenario no margin selects (otherwise), or when none is selected at all."""
    margins, not_gated = {}, []
    for scenario in scenarios:
        found = spec.margins_for({**scenario.labels(), "datapath": datapath})
        if found:
            margins[scenario.id] = found
        elif spec.gate == slo_mod.GATE_SELECTED_ONLY:
            not_gated.append(scenario.id)
        else:
            raise SpecError(f"{spec.source}: objectives", scenario.id,
                            "an objective with 'compare:' margins whose select matches this scenario "
                            "(or 'gate: selected-only' to leave the others out)")
    if not margins:
        raise SpecError(f"{spec.source}: objectives", "no compare: margins for any scenario",
                        f"an objective with 'compare:' margins selecting one of {', '.join(s.id for s in scenarios)}")
    return margins, not_gated


def compare(a: Side, b: Side, spec: slo_mod.SloSpec, scenarios=SCENARIOS, *, block: int = BLOCK, pairs: int = PAIRS,
            more_pairs: int = MORE_PAIRS, max_pairs: int = MAX_PAIRS, seed: int | None = None) -> Comparison:
    """Every scenario measured on both sides, interleaved, and judged (see the module doc)."""
    seed = int(time.time_ns() % 2**31) if seed is None else seed
    rng = np.random.default_rng(seed)
    result = Comparison(a.spec, b.spec, seed, confidence=1.0 - FAMILY_ALPHA)
    margins, result.not_gated = gated(spec, scenarios, b.spec.datapath)
    for scenario in (s for s in scenarios if s.id in margins):
        sc = ScenarioComparison(scenario)
        t0 = time.monotonic()
        progress.note(f"compare {scenario.id}: {pairs} pairs of {block} requests (A and B in random order)")
        measure_pairs(a, b, sc, spec.sampling, pairs, block, rng)
        sc.seconds = time.monotonic() - t0
        result.scenarios.append(sc)
    while True:
        for sc in result.scenarios:
            sc.checks = _relatives(sc, margins[sc.scenario.id], result.confidence, seed)
        decide(result)
        open_ = [sc for sc in result.scenarios
                 if any(c.verdict == paired.INCONCLUSIVE for c in sc.checks) and len(sc.pairs) < max_pairs]
        if not open_:
            break
        if result.verdict == paired.FAIL:   # (B's absolute thresholds are judged after this loop)
            result.stopped = [sc.scenario.id for sc in open_]     # the run's verdict is fail whatever they show
            progress.note(f"compare: failed; not measuring {', '.join(result.stopped)} further")
            break
        for sc in open_:
            n = min(more_pairs_now(len(sc.pairs), more_pairs), max_pairs - len(sc.pairs))
            progress.note(f"compare {sc.scenario.id}: not decided after {len(sc.pairs)} pairs: {n} more")
            t0 = time.monotonic()
            measure_pairs(a, b, sc, spec.sampling, n, block, rng)
            sc.seconds += time.monotonic() - t0
    conf = spec.sampling.confidence
    for sc in result.scenarios:   # B's absolute thresholds, on all its blocks, at the SLO file's confidence
        thresholds = spec.thresholds_for({**sc.scenario.labels(), "datapath": b.cluster.datapath})
        merged = SampleSet.concat(sc.b_samples)
        sc.absolute = runner.judge_all(analyze(merged, conf), thresholds, conf)
    return result


def run(a: ClusterSpec, b: ClusterSpec, spec: slo_mod.SloSpec, **kwargs) -> Comparison:
    """Bring both sides up, compare them, and take both down again (also on error and Ctrl-C). The SLO
    file is checked against the scenarios first: a configuration error brings nothing up."""
    a, b = clusterspec.check_pair(a, b)
    gated(spec, kwargs.get("scenarios", SCENARIOS), b.datapath)
    check(a)
    check(b)
    with contextlib.ExitStack() as stack:
        side_a = bring_up(stack, "A", a)
        side_b = bring_up(stack, "B", b)
        return compare(side_a, side_b, spec, **kwargs)
