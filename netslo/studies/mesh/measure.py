"""A node-pair mesh measured and judged: one agent pod per selected node, every pair of the design
in rounds of disjoint pairs measured at once, each pair against its objectives, objectives over
groups of pairs, and the nodes that explain the pairs that broke.

Per pair, the client pod on the pair's first node (by name) sends ``requests`` UDP requests of the
1k profile to the responder on the second, every ``interval`` (the SLO file's unless the mesh sets
one), open loop. A pair has the labels of a cross-node UDP 1k scenario plus its ``zone``/``pool``
('a', or 'a~b' across two, sorted) and ``zones``/``pools`` ('same' | 'cross'), so the SLO file's
objectives select pairs the way they select scenarios (``select: {zones: cross}``). Per pair the
RTT percentiles and loss of the objectives that select it are judged (``netslo.stats.mesh``: exact
binomial p-values, Holm over every check of the mesh at ``FAMILY_ALPHA``). A pair left
inconclusive, or whose sender fell behind its schedule, is measured once more with ``AGAIN`` times
the requests; still inconclusive it is **undecided**, still behind it is an infrastructure error
(``OffPace``), never a verdict. ``mesh.*`` metrics judge the pairs an objective selects together
(``over_pairs``). The mesh passes when every check passed; any failure fails it; otherwise it is
undecided, never green.

Wall time is kept per part (``phases``: pods and responders, probing, analysis), for the cost table.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from netslo.core import phase_times, progress
from netslo.core.errors import SpecError
from netslo.core.units import duration
from netslo.providers import POOL_LABEL, ZONE_LABEL
from netslo.slo import runner
from netslo.slo import spec as slo_mod
from netslo.slo.runner import OffPace
from netslo.slo.scenario import Scenario
from netslo.stats import mesh as verdicts
from netslo.stats.analysis import percentile_estimate, proportion
from netslo.stats.delays import series_seconds
from netslo.studies.mesh import schedule

SCENARIO = Scenario("cross-node", "udp", "1k")
REQUESTS = 600        # per pair, when neither a budget nor a count is given (P99 bounded at 95 %: >= 368)
AGAIN = 2             # an inconclusive pair is measured once more with this many times the requests
FAMILY_ALPHA = 0.01   # family-wise false-alarm rate over every pair check of one mesh
ROUND_OVERHEAD_S = 1.0  # a round's start and collection beyond its requests (the budget's estimate)
UNDECIDED = "undecided"


@dataclass(frozen=True)
class MeshSpec:
    """What a mesh measures: nodes whose labels match ``select`` (label -> glob), at most ``limit``;
    every pair (``partners`` None) or a sampled design with that many partners per node; requests
    per pair from ``budget_s`` or ``requests``; zones and pools from those two labels."""

    select: tuple = ()            # ((label, glob), ...)
    limit: int | None = None
    partners: int | None = None
    budget_s: float | None = None
    requests: int | None = None
    interval_s: float | None = None   # send period per pair (None: the SLO file's)
    seed: int = 0
    zone_label: str = ZONE_LABEL
    pool_label: str = POOL_LABEL
    option: str = "--netslo-mesh-"  # the prefix of the options that set this, for error lines


def parse_select(text: str | None, option: str = "--netslo-mesh-select") -> tuple:
    """``label=glob,label=glob`` as ((label, glob), ...); SpecError naming ``option`` when malformed."""
    if not text:
        return ()
    out = []
    for part in text.split(","):
        label, eq, glob = part.partition("=")
        if not eq or not label.strip() or not glob.strip():
            raise SpecError(option, text, "label=value pairs separated by commas, e.g. "
                                          "topology.kubernetes.io/zone=zone-a")
        out.append((label.strip(), glob.strip()))
    return tuple(out)


def parse_interval(text: str | None, option: str = "--netslo-mesh-interval") -> float | None:
    """A send period per pair of 100 µs .. 1 s (s), None for none given; SpecError naming ``option``."""
    if text is None:
        return None
    s = duration(text, option)
    if not 1e-4 <= s <= 1.0:
        raise SpecError(option, text, "a send period of 100us..1s")
    return s


@dataclass
class Plan:
    nodes: list
    labels: dict          # node -> its labels
    groups: dict          # 'zone' / 'pool' -> {node: value} (only labels the nodes carry)
    pairs: list
    rounds: list
    requests: int
    interval: float
    design: str           # 'every pair' | 'k partners per node (seed s)'
    coverage: str


def plan(cluster, spec: MeshSpec, sampling: slo_mod.Sampling) -> Plan:
    """The nodes, pairs, rounds and requests per pair; SpecError (one line) for a selection of fewer
    than 2 nodes, a pool of one node, or a budget too small for the pairs."""
    labels = {n: dict(cluster.node_labels(n)) for n in cluster.nodes}
    nodes = [n for n in cluster.nodes
             if all(fnmatch.fnmatchcase(labels[n].get(k, ""), g) for k, g in spec.select)]
    if spec.limit is not None:
        nodes = nodes[:spec.limit]
    if len(nodes) < 2:
        what = ",".join(f"{k}={g}" for k, g in spec.select) or "(all nodes)"
        raise SpecError(f"{spec.option}select", what,
                        f"labels that select at least 2 of the cluster's {len(cluster.nodes)} nodes "
                        f"(they select {len(nodes)}{': ' + nodes[0] if nodes else ''})")
    groups = {}
    for group, label in (("zone", spec.zone_label), ("pool", spec.pool_label)):
        if any(label in labels[n] for n in nodes):
            groups[group] = {n: labels[n].get(label, "-") for n in nodes}
    members: dict = {}
    for n, value in groups.get("pool", {}).items():
        members.setdefault(value, []).append(n)
    lone = sorted(v for v, ms in members.items() if len(ms) == 1)
    if lone:
        raise SpecError(f"{spec.option}pool-label", f"{spec.pool_label}={lone[0]}",
                        f"pools of at least 2 selected nodes (pool {lone[0]} has only {members[lone[0]][0]}: "
                        "no pair inside it to judge)")
    if spec.partners is None:
        rounds = schedule.round_robin(nodes)
        pairs = [p for r in rounds for p in r]
        design = "every pair (round robin)"
    else:
        pairs = schedule.sampled(nodes, spec.partners, groups, spec.seed)
        rounds = schedule.rounds_of(pairs)
        design = f"{spec.partners} partners per node (seed {spec.seed})"
    interval = spec.interval_s or sampling.interval
    least = slo_mod.samples_needed("rtt.p99", sampling.confidence)
    if spec.budget_s is not None:
        requests = schedule.requests_per_pair(rounds, spec.budget_s, interval, least, ROUND_OVERHEAD_S,
                                              option=f"{spec.option}budget")
    else:
        requests = spec.requests or REQUESTS
        if requests < least:
            raise SpecError(f"{spec.option}requests", requests,
                            f"at least {least} requests per pair (what bounds a P99 at "
                            f"{sampling.confidence:.0%} confidence)")
    cov = schedule.coverage(nodes, pairs, groups).line()
    return Plan(nodes, labels, groups, pairs, rounds, requests, interval, design, cov)


def pair_labels(pair: tuple, groups: dict, datapath: str) -> dict:
    """The labels objectives select a pair by (module doc)."""
    out = {**SCENARIO.labels(), "datapath": datapath}
    for group, value_of in groups.items():
        x, y = sorted((value_of[pair[0]], value_of[pair[1]]))
        out[group] = x if x == y else f"{x}~{y}"
        out[group + "s"] = "same" if x == y else "cross"
    return out


@dataclass
class PairResult:
    pair: tuple
    labels: dict
    rtts: np.ndarray      # answered RTTs, s
    sent: int
    lost: int
    estimates: dict       # metric -> Estimate (rtt.pQ, loss)
    requests: int
    round: int            # its round in the plan (a pair measured again keeps it)
    lag: float = 0.0      # median send-timer error, s (the open-loop sender behind its schedule)


@dataclass
class Aggregate:
    """One mesh.* threshold over the pairs its objective selects."""

    threshold: slo_mod.Threshold
    check: slo_mod.Check
    pairs: int


@dataclass
class MeshResult:
    plan: Plan
    provider: str
    datapath: str
    pairs: dict = field(default_factory=dict)        # pair -> PairResult
    checks: list = field(default_factory=list)       # of verdicts.PairCheck
    aggregates: list = field(default_factory=list)   # of Aggregate
    attribution: verdicts.Attribution | None = None
    not_judged: list = field(default_factory=list)   # metrics of the pairs' objectives a mesh does not judge
    phases: dict = field(default_factory=dict)       # 'pods', 'probing', 'analysis' -> s
    confidence: float = 0.95
    alpha: float = FAMILY_ALPHA

    @property
    def undecided(self) -> list:
        return sorted({c.pair for c in self.checks if c.verdict == verdicts.INCONCLUSIVE})

    @property
    def failed_pairs(self) -> list:
        return sorted({c.pair for c in self.checks if c.verdict == verdicts.FAIL})

    @property
    def verdict(self) -> str:
        if self.failed_pairs or any(a.check.verdict == slo_mod.FAIL for a in self.aggregates):
            return verdicts.FAIL
        if self.undecided or any(a.check.verdict != slo_mod.PASS for a in self.aggregates):
            return UNDECIDED
        return verdicts.PASS


def _estimates(rtts: np.ndarray, sent: int, lost: int, confidence: float) -> dict:
    x = np.sort(rtts)
    out = {f"rtt.p{q:g}": percentile_estimate(x, q, confidence) for q in (50, 90, 99, 99.9)}
    out["loss"] = proportion(lost, sent, confidence)
    return out


def _measure_round(cluster, agents, pairs: list, requests: int, sampling, round_of: dict, labels: dict) -> dict:
    """Every pair of one round at once (threads: each waits on its own agent); pair -> PairResult."""
    def one(pair):
        spec = runner.probe_spec(SCENARIO, agents.pods[pair[1]], {"udp": agents.port}, sampling, requests)
        with phase_times.on_behalf():
            s = cluster.probe(agents.pods[pair[0]], spec)
        rtts = series_seconds(s, "rtt")
        lost = int(np.count_nonzero(s.column("recv_ns") < 0))
        lag = series_seconds(s, "timer_error")
        return PairResult(pair, labels[pair], rtts[np.isfinite(rtts)], len(s), lost, {}, requests, round_of[pair],
                          float(np.median(lag)) if len(lag) else 0.0)
    with phase_times.timed("probing"), ThreadPoolExecutor(max_workers=len(pairs)) as pool:
        phase_times.scheduled(requests * sampling.interval, "probing")
        return {p.pair: p for p in pool.map(one, pairs)}


def _pair_checks(result: MeshResult, spec: slo_mod.SloSpec) -> None:
    result.checks, left = [], set()
    for pr in result.pairs.values():
        for t in spec.thresholds_for(pr.labels):
            if not re.match(slo_mod.MESH_PAIR_METRIC_RE, t.metric):
                left.add(t.metric)
                continue
            e = pr.estimates[t.metric]
            p = verdicts.pair_pvalue(pr.rtts, pr.sent, pr.lost, t.metric, t.limit)
            result.checks.append(verdicts.PairCheck(pr.pair, t.metric, t.limit, t.objective, e, p))
    verdicts.judge_pairs(result.checks, result.alpha)
    result.not_judged = sorted(left)


def _aggregates(result: MeshResult, spec: slo_mod.SloSpec) -> None:
    result.aggregates = []
    by_threshold: dict = {}
    for pr in result.pairs.values():
        for t in spec.thresholds_for({**pr.labels, "study": "mesh"}):
            by_threshold.setdefault(t, []).append(pr)
    for t, prs in by_threshold.items():
        _, stat, per_pair = t.metric.split(".", 2)
        q = 100.0 if stat == "max" else float(stat[1:])
        est = verdicts.over_pairs([pr.estimates[per_pair] for pr in prs], q)
        result.aggregates.append(Aggregate(t, slo_mod.decide(est, t, result.confidence), len(prs)))


def judge(result: MeshResult, spec: slo_mod.SloSpec) -> None:
    """(Re)judge the measured pairs of ``result`` by the objectives of ``spec``, in place."""
    _pair_checks(result, spec)
    _aggregates(result, spec)
    result.attribution = verdicts.culprits(result.failed_pairs, list(result.pairs))


@dataclass(frozen=True)
class Agents:
    """The mesh's pods (node -> Pod), each serving UDP on ``port``."""

    pods: dict
    port: int


def bring_up(cluster, the_plan: Plan) -> Agents:
    """One agent pod per node of the plan, with its UDP responder (they stay for the cluster's close())."""
    made = cluster.add_pods([{"name": f"mesh-{i}", "node": n} for i, n in enumerate(the_plan.nodes)])
    ports = [cluster.start_responders(pod, ("udp",))["udp"] for pod in made]
    return Agents(dict(zip(the_plan.nodes, made)), ports[0])


def run(cluster, spec: MeshSpec, slo: slo_mod.SloSpec, the_plan: Plan | None = None,
        agents: Agents | None = None) -> MeshResult:
    """Measure and judge the mesh of ``spec`` on ``cluster`` (its pods made here unless ``agents``
    are given: a mesh measured again on the same pods)."""
    p = the_plan or plan(cluster, spec, slo.sampling)
    result = MeshResult(p, cluster.provider, cluster.datapath, confidence=slo.sampling.confidence)
    labels = {pair: pair_labels(pair, p.groups, cluster.datapath) for pair in p.pairs}
    if not spec_gates(slo, labels):
        raise SpecError("objectives", slo.source, "an objective that selects the mesh's pairs (a cross-node udp "
                                                  "1k scenario with their zone/pool labels)")
    t0 = time.monotonic()
    agents = agents or bring_up(cluster, p)
    result.phases["pods"] = time.monotonic() - t0
    probing = analysis = 0.0
    todo, requests = p.rounds, p.requests
    sampling = dataclasses.replace(slo.sampling, interval=p.interval)
    round_of = {pair: r for r, pairs in enumerate(p.rounds) for pair in pairs}
    for attempt in range(2):
        for r, pairs in enumerate(todo):
            progress.note(f"mesh: round {r + 1}/{len(todo)}: {len(pairs)} pairs, {requests} requests each")
            t = time.monotonic()
            got = _measure_round(cluster, agents, pairs, requests, sampling, round_of, labels)
            probing += time.monotonic() - t
            t = time.monotonic()
            for pr in got.values():
                pr.estimates = _estimates(pr.rtts, pr.sent, pr.lost, slo.sampling.confidence)
            result.pairs.update(got)
            analysis += time.monotonic() - t
        t = time.monotonic()
        judge(result, slo)
        analysis += time.monotonic() - t
        late = off_pace(result, p.interval)
        if attempt or not (result.undecided or late):
            break
        again = sorted(set(result.undecided) | set(late))
        todo, requests = schedule.rounds_of(again), p.requests * AGAIN
        progress.note(f"mesh: {len(again)} pairs inconclusive or off pace: measured again with {requests} requests")
    result.phases.update(probing=probing, analysis=analysis)
    if late:
        a, b = late[0]
        raise OffPace(f"mesh: {len(late)} of {len(result.pairs)} pairs could not keep their send schedule, measured "
                      f"twice (pair {a} - {b}: median send-timer error {result.pairs[late[0]].lag * 1e3:.2f} ms every "
                      f"{p.interval * 1e3:g} ms); the host is overloaded by {max(len(r) for r in p.rounds)} pairs at "
                      "once: a longer interval (--netslo-mesh-interval, --interval) or fewer nodes")
    return result


def off_pace(result: MeshResult, interval: float) -> list:
    """Pairs whose sender fell behind its schedule (``runner.check_pace``'s limit): not trusted."""
    limit = max(runner.PACE_FLOOR_S, runner.PACE_LIMIT_PERIODS * interval)
    return sorted(pr.pair for pr in result.pairs.values() if pr.lag > limit)


def spec_gates(slo: slo_mod.SloSpec, labels: dict) -> bool:
    """Does any objective judge a pair of the mesh (a pair metric or a mesh.* one)?"""
    return any(slo.thresholds_for(lb) or slo.thresholds_for({**lb, "study": "mesh"}) for lb in labels.values())

