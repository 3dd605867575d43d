"""False alarms and power of ``netslo compare`` (interleaved A/B), side by side with the baseline method.

    python benchmarks/compare_power.py measure OUT --runs 100 [--b rules=0] [--pairs 16] [--seed 1] [--duet] [--up-order BA]
    python benchmarks/compare_power.py analyze OUT... [--lengths 8,16,32] [--margins NAME:rtt.p50=5%,...] [-K 10] [--disjoint]
    python benchmarks/compare_power.py verify --b datapath=bridge,rules=160 [--rounds 30] [--profile 1460b]

``measure`` (root; the embedded provider) brings up cluster A and cluster B once, then makes ``--runs``
comparisons, each ``--pairs`` interleaved pairs of ``--block``-request blocks (A and B in random order, as
``netslo.studies.compare``) of cross-node UDP and cross-node TCP-RR (1 kB each way; ``--profile 1460b``:
1460 B, a full 1500-byte frame), and keeps every block's RTTs and
loss counts in ``OUT/runNNN.npz``. ``--duet`` measures A's and B's block of a pair at the same time
instead (duet benchmarking); ``--up-order BA`` brings B up first (does the order of bring-up matter?).

``analyze`` judges the stored runs as ``netslo compare`` judges a run: per scenario and margin a paired
block bootstrap (``netslo.stats.paired``, 4000 replicates, one per metric serving every margin set),
Holm over every check of the run at 1 %, **fail** / **pass** / **undecided** (neither). Each margin set
(``--margins``, repeatable; default ``tight`` 5 %/5 %/0.25 and ``shipped`` 10 %/25 %/0.5 pp) is judged
at fixed job lengths (the first k pairs of a window of consecutive runs; windows past one run are
disjoint) and by ``compare()``'s own procedure (16 pairs, 16 more for a scenario still inconclusive, up
to 48: ``16→48``), as measured (A/A when A and B are one spec: a failure is a false alarm) and with a
known change put into B's blocks:

  scale10   every RTT of B x 1.10                                 (+10 % at every percentile)
  tail10    2 % of B's requests at random slowed to 1.10 x B's P99 (+10 % P99, P50 unchanged)
  loss05    0.5 % of B's answered requests at random become lost    (+0.5 percentage points)

``analyze --disjoint`` counts only cases that share no measurement: every run judged alone at its own
length, and ``compare()``'s procedure over consecutive runs, each comparison starting at the first run
the one before it did not use (so N runs give fewer comparisons than N when some need more pairs than
a run holds); the rates' intervals then hold as stated.

``verify`` sizes a real change on B with independent references: rounds of ``ping`` (ICMP echo, the
kernel answers), of sockperf's TCP ping-pong (its own client and server, its P50) and of netslo's UDP
and TCP-RR probes, cross-node, on A and on B in random order; it prints B − A of each (µs, per-round
trimmed means, bootstrap 95 % CI over rounds) and netslo's B/A of P50. The decoy rules sit on the
server pod's INPUT chain, which every packet to the pod walks: ping's, sockperf's and netslo's alike.

Detection = the run fails. Beside it, the same B blocks (with the same change) judged by the baseline
method (``netslo.report.regression``, the shipped policy): B of run i as the current run, A of the K
runs before it as the baseline, as a pull request is judged against stored runs. Here those stored runs
are this machine's own, minutes old: the most favourable case for that method. Prints numbers (rates
with 95 % Clopper-Pearson intervals), no pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gate_power import answered, pooled, rate  # noqa: E402
from netslo.core.errors import SpecError  # noqa: E402
from netslo.core.resources import shipped_slo  # noqa: E402
from netslo.providers import clusterspec  # noqa: E402
from netslo.report import regression as reg  # noqa: E402
from netslo.slo import spec as slo_mod  # noqa: E402
from netslo.slo.scenario import Scenario  # noqa: E402
from netslo.stats import paired  # noqa: E402
from netslo.stats.delays import series_seconds  # noqa: E402
from netslo.studies import compare  # noqa: E402

PROFILES = ("1k", "1460b")   # --profile: 1460b fills a 1500-byte frame and takes two at MTU 1450


def scenarios_of(profile: str = "1k") -> list[Scenario]:
    """The study's scenarios: cross-node UDP and TCP-RR of ``profile``."""
    return [Scenario("cross-node", "udp", profile), Scenario("cross-node", "tcp-rr", profile)]


BY_ID = {s.id: s for pf in PROFILES for s in scenarios_of(pf)}
SHIFTS = ("none", "scale10", "tail10", "loss05")
MARGIN_SETS = {"tight": "rtt.p50=5%,rtt.p99=5%,loss=0.25%", "shipped": "rtt.p50=10%,rtt.p99=25%,loss=0.5%"}


# ---- measure ---------------------------------------------------------------------------------------
def duet_pairs(a, b, sc: compare.ScenarioComparison, sampling, pairs: int, block: int) -> None:
    """``pairs`` more pairs of ``sc.scenario`` with A's and B's blocks measured at the same time (duet
    benchmarking: both sides in the same host regime), instead of one after the other."""
    with ThreadPoolExecutor(2) as pool:
        for _ in range(pairs):
            fa, fb = (pool.submit(compare.measure_block, side, sc.scenario, sampling, block) for side in (a, b))
            sa, sb = fa.result(), fb.result()
            lost_a = int(np.count_nonzero(sa.column("recv_ns") < 0))
            lost_b = int(np.count_nonzero(sb.column("recv_ns") < 0))
            sc.pairs.append(paired.Pair(series_seconds(sa, "rtt"), series_seconds(sb, "rtt"), len(sa), lost_a,
                                        len(sb), lost_b, False))


def measure(out: Path, runs: int, a: str, b: str, pairs: int, seed: int, duet: bool = False,
            up_order: str = "AB", fresh: int = 1, block: int = compare.BLOCK, profile: str = "1k") -> None:
    """``runs`` comparisons; A and B are brought up anew every ``fresh`` runs (1: every comparison has
    its own two clusters, as every CI job has; 0: one pair of clusters for all runs)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = slo_mod.load(shipped_slo("slo.yaml"))
    rng = np.random.default_rng(seed)
    specs = dict(zip("AB", clusterspec.check_pair(clusterspec.load(a, "--a"), clusterspec.load(b, "--b"), "--b", b)))
    stack = contextlib.ExitStack()
    try:
        for i in range(runs):
            t0 = time.monotonic()
            if i == 0 or (fresh and i % fresh == 0):
                stack.close()
                stack = contextlib.ExitStack()
                order = up_order if up_order != "random" else ("AB" if rng.random() < 0.5 else "BA")
                sides = {name: compare.bring_up(stack, name, specs[name]) for name in order}
                side_a, side_b, instance = sides["A"], sides["B"], i
            up = time.monotonic() - t0
            arrays = {"instance": np.array([instance, order == "BA"])}
            for sc_def in scenarios_of(profile):
                sc = compare.ScenarioComparison(sc_def)
                if duet:
                    duet_pairs(side_a, side_b, sc, spec.sampling, pairs, block)
                else:
                    compare.measure_pairs(side_a, side_b, sc, spec.sampling, pairs, block, rng)
                for j, p in enumerate(sc.pairs):
                    key = f"{sc_def.id}|{j}"
                    arrays[f"{key}|a"], arrays[f"{key}|b"] = p.a, p.b
                    arrays[f"{key}|n"] = np.array([p.sent_a, p.lost_a, p.sent_b, p.lost_b, p.b_first])
            np.savez_compressed(out / f"run{i:03d}.npz", **arrays)
            print(f"run {i + 1}/{runs}: {time.monotonic() - t0:.1f} s (bring-up {up:.1f} s, order {order})", flush=True)
    finally:
        stack.close()
    (out / "spec.txt").write_text(f"a={a}\nb={b}\npairs={pairs}\nseed={seed}\nduet={duet}\nup_order={up_order}\n"
                                  f"fresh={fresh}\nblock={block}\nprofile={profile}\n"
                                  f"measured={time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")


# ---- verify ----------------------------------------------------------------------------------------
PING_TIME = re.compile(rb"time=([0-9.]+) ms")


def _trimmed_us(values_s: np.ndarray) -> float:
    lo, hi = np.quantile(values_s, [0.1, 0.9])
    return float(np.mean(values_s[(values_s >= lo) & (values_s <= hi)]) * 1e6)


def _ping_s(side, count: int, size: int = 56) -> np.ndarray:
    """``count`` cross-node echo RTTs (s) of ``size``-byte ICMP payloads."""
    out = side.cluster.exec_in(side.clients["cross-node"], ["ping", "-n", "-c", str(count), "-i", "0.002", "-W", "1",
                                                            "-s", str(size), side.server.ip], timeout=60)
    return np.array([float(m) for m in PING_TIME.findall(out)]) / 1e3


def _boot_ci(d: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    means = rng.choice(d, (4000, len(d))).mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


SOCKPERF_PORT = 11111
SOCKPERF_P50 = re.compile(r"percentile\s+50\.0*\s*=\s*([\d.]+)")


@contextlib.contextmanager
def sockperf_server(side):
    """sockperf's TCP server in ``side``'s server pod (an embedded cluster's namespace), for its life."""
    ns = side.cluster.netns_of(side.server)
    proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "sockperf", "server", "--tcp", "-i",
                             side.server.ip, "-p", str(SOCKPERF_PORT)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _sockperf_p50_s(side, count: int, size: int = 1000) -> float:
    """The P50 of one sockperf TCP ping-pong run (``count`` requests of ``size`` B at 500/s, full RTT), s."""
    out = side.cluster.exec_in(side.clients["cross-node"], [
        "sockperf", "ping-pong", "--tcp", "-i", side.server.ip, "-p", str(SOCKPERF_PORT), "-m", str(size),
        "--mps", "500", "-t", str(max(1, round(count / 500))), "--full-rtt"], timeout=60).decode()
    got = SOCKPERF_P50.search(out)
    if not got:
        raise RuntimeError(f"sockperf printed no P50: {out[-300:]}")
    return float(got.group(1)) * 1e-6


def verify(a: str, b: str, rounds: int, seed: int, profile: str = "1k") -> None:
    """Rounds of ping, sockperf TCP ping-pong and netslo's UDP and TCP-RR blocks on A and B (module doc)."""
    spec = slo_mod.load(shipped_slo("slo.yaml"))
    rng = np.random.default_rng(seed)
    scenarios = scenarios_of(profile)
    size = scenarios[0].sizes[0]
    what = ("ping", "udp", "tcp-rr", "sockperf-tcp")
    got = {name: {w: [] for w in what} for name in ("A", "B")}
    p50 = {name: {"udp": [], "tcp-rr": []} for name in ("A", "B")}
    with contextlib.ExitStack() as stack:
        spec_a, spec_b = clusterspec.check_pair(clusterspec.load(a, "--a"), clusterspec.load(b, "--b"), "--b", b)
        sides = [compare.bring_up(stack, "A", spec_a), compare.bring_up(stack, "B", spec_b)]
        have_sockperf = shutil.which("sockperf") is not None
        if have_sockperf:
            for side in sides:
                stack.enter_context(sockperf_server(side))
        for _ in range(rounds):
            for side in (sides if rng.random() < 0.5 else sides[::-1]):
                got[side.name]["ping"].append(_trimmed_us(_ping_s(side, compare.BLOCK * 4, size)))
                for sc_def in scenarios:
                    rtt = series_seconds(compare.measure_block(side, sc_def, spec.sampling, compare.BLOCK * 4), "rtt")
                    rtt = rtt[np.isfinite(rtt)]
                    got[side.name][sc_def.protocol].append(_trimmed_us(rtt))
                    p50[side.name][sc_def.protocol].append(float(np.median(rtt)))
                if have_sockperf:
                    got[side.name]["sockperf-tcp"].append(_sockperf_p50_s(side, compare.BLOCK * 10, size) * 1e6)
    print(f"A {a}; B {b}; {rounds} rounds, per side: {compare.BLOCK * 4} pings, {compare.BLOCK * 4} requests of "
          f"netslo UDP and TCP-RR (trimmed means), sockperf TCP ping-pong 1 s at 500/s (its P50), {size} B "
          f"payloads; µs")
    for w in what:
        da, db = np.array(got["A"][w]), np.array(got["B"][w])
        if not len(da):
            print(f"{w:12s}  not measured (not installed)")
            continue
        lo, hi = _boot_ci(db - da, rng)
        print(f"{w:12s}  A {np.median(da):6.2f}  B {np.median(db):6.2f}  B−A {np.mean(db - da):+.2f} "
              f"(95 % CI {lo:+.2f}..{hi:+.2f})  B/A {np.median(db) / np.median(da):.3f}")
    for probe in ("udp", "tcp-rr"):
        r = np.array(p50["B"][probe]) / np.array(p50["A"][probe])
        print(f"netslo {probe} P50 B/A per round: median {np.median(r):.3f}, P10–P90 {np.quantile(r, 0.1):.3f}–"
              f"{np.quantile(r, 0.9):.3f}")


# ---- analyze ---------------------------------------------------------------------------------------
def load_run(path: Path) -> dict[str, list[paired.Pair]]:
    """{scenario id: its pairs, in measured order}."""
    z = np.load(path)
    got: dict[str, dict[int, paired.Pair]] = {}
    for key in (k for k in z.files if k.count("|") == 2):   # (and "instance": which clusters, bring-up order)
        sid, j, part = key.split("|")
        if part != "n":
            continue
        n = z[key]
        got.setdefault(sid, {})[int(j)] = paired.Pair(z[f"{sid}|{j}|a"], z[f"{sid}|{j}|b"], int(n[0]), int(n[1]),
                                                       int(n[2]), int(n[3]), bool(n[4]))
    return {sid: [d[j] for j in sorted(d)] for sid, d in got.items()}


def shifted(pairs: list[paired.Pair], kind: str, rng: np.random.Generator) -> list[paired.Pair]:
    """``pairs`` with the change ``kind`` (module doc) put into B's blocks."""
    if kind == "none":
        return pairs
    if kind == "scale10":
        return [paired.Pair(p.a, p.b * 1.10, p.sent_a, p.lost_a, p.sent_b, p.lost_b, p.b_first) for p in pairs]
    if kind == "tail10":
        slow = 1.10 * np.quantile(np.concatenate([p.b for p in pairs]), 0.99)
        out = []
        for p in pairs:
            b = p.b.copy()
            hit = rng.random(len(b)) < 0.02
            b[hit] = np.maximum(b[hit], slow)
            out.append(paired.Pair(p.a, b, p.sent_a, p.lost_a, p.sent_b, p.lost_b, p.b_first))
        return out
    if kind == "loss05":
        out = []
        for p in pairs:
            keep = rng.random(len(p.b)) >= 0.005
            out.append(paired.Pair(p.a, p.b[keep], p.sent_a, p.lost_a, p.sent_b,
                                   p.lost_b + int(np.count_nonzero(~keep)), p.b_first))
        return out
    raise ValueError(kind)


def margins_of(text: str) -> list[slo_mod.Margin]:
    """``rtt.p50=5%,loss=0.25%`` read as an SLO file's ``compare:`` margins (checked as there)."""
    compare_ = {metric: f"+{value}" for metric, _, value in (part.partition("=") for part in text.split(","))}
    doc = {"version": 1, "objectives": [{"name": "power-study", "compare": compare_}]}
    return slo_mod.parse(doc, "--margins").margins_for({})


def replicates(pairs: list[paired.Pair], metrics: set[str], seed: int) -> dict[str, paired.Replicates]:
    """{metric: its paired bootstrap} for one scenario's pairs (one bootstrap serves every margin set)."""
    out = {}
    for metric in sorted(metrics):
        if metric == "loss":
            out[metric] = paired.loss_replicates(pairs, compare.N_BOOT, seed)
        else:
            out[metric] = paired.percentile_replicates(pairs, float(metric.partition(".p")[2]), compare.N_BOOT, seed)
    return out


def judge_replicates(reps: dict[str, dict[str, paired.Replicates]], margins: list[slo_mod.Margin]) -> compare.Comparison:
    """The scenarios' replicates judged as ``netslo compare`` judges a run: one check per margin, Holm
    over all of them at ``FAMILY_ALPHA``."""
    result = compare.Comparison(None, None, 0, confidence=1.0 - compare.FAMILY_ALPHA)
    for sid in reps:
        sc = compare.ScenarioComparison(BY_ID[sid])
        sc.checks = [compare.Check(mg, reps[sid][mg.metric].against(
            1.0 + mg.limit if mg.metric != "loss" else mg.limit, result.confidence)) for mg in margins]
        result.scenarios.append(sc)
    compare.decide(result)
    return result


def sequential(window: dict[str, list[paired.Pair]], sets: dict[str, list], seed: int,
               scale: float = 1.0) -> dict[str, tuple[str, int]]:
    """Per margin set: the verdict of ``compare()``'s procedure on ``window`` (PAIRS first, MORE_PAIRS
    more (compare.more_pairs_now) for each scenario with an inconclusive check, up to MAX_PAIRS; each times ``scale`` for blocks
    of compare.BLOCK / ``scale`` requests: the same requests) and the most pairs a scenario took."""
    metrics = {mg.metric for ms in sets.values() for mg in ms}
    cache: dict[tuple[str, int], dict] = {}

    def reps_at(sid: str, n: int) -> dict:
        if (sid, n) not in cache:
            cache[sid, n] = replicates(window[sid][:n], metrics, seed)
        return cache[sid, n]
    out = {}
    for name, margins in sets.items():
        first, most, more = (round(n * scale) for n in (compare.PAIRS, compare.MAX_PAIRS, compare.MORE_PAIRS))
        length = {sid: first for sid in window}
        while True:
            result = judge_replicates({sid: reps_at(sid, n) for sid, n in length.items()}, margins)
            open_ = [sc.scenario.id for sc in result.scenarios
                     if any(c.verdict == paired.INCONCLUSIVE for c in sc.checks)
                     and length[sc.scenario.id] < most]
            if not open_:
                break
            for sid in open_:
                length[sid] = min(most, length[sid] + compare.more_pairs_now(length[sid], more))
        out[name] = (result.verdict, max(length.values()))
    return out


def side_run(run: dict[str, list[paired.Pair]], side: str, name: str) -> reg.Run:
    """One side's blocks of a run as a stored gate run: a test per scenario, its answered RTTs."""
    out = reg.Run(environment=[{"run_id": name}], sources=[name])
    for sid, pairs in run.items():
        out.add(f"test_latency_slo[{sid}]", answered(np.concatenate([getattr(p, side) for p in pairs])))
    return out


def joined(runs: list[dict], i: int, span: int) -> dict[str, list[paired.Pair]]:
    """Runs i..i+span-1 as one window: each scenario's pairs in measured order."""
    return {sid: [p for r in runs[i:i + span] for p in r[sid]] for sid in runs[i]}


def _window_tallies(args) -> dict:
    """The tallies of window ``i`` (runs i..i+span-1): every change, fixed length and margin set, and
    compare()'s sequential procedure (a worker's share of ``analyze``)."""
    runs, i, per_run, lengths, sets, scale, seq, seed = args      # runs: the window's own
    span = len(runs)
    rng = np.random.default_rng(seed + 1000 * i)
    metrics = {mg.metric for ms in sets.values() for mg in ms}
    tallies: dict[tuple, dict] = {}

    def count(key, verdict):
        tallies.setdefault(key, {paired.FAIL: 0, paired.PASS: 0, compare.UNDECIDED: 0})[verdict] += 1
    for kind in SHIFTS:
        window = {sid: shifted(pairs, kind, rng) for sid, pairs in joined(runs, 0, span).items()}
        for length in lengths:
            if length <= per_run or i % (-(-length // per_run)) == 0:   # disjoint windows past one run
                reps = {sid: replicates(pairs[:length], metrics, seed + i) for sid, pairs in window.items()}
                for name, margins in sets.items():
                    count(("interleaved", f"{length}", kind, name), judge_replicates(reps, margins).verdict)
        for name, (verdict, took) in sequential(window, sets, seed + i, scale).items():
            count(("interleaved", seq, kind, name), verdict)
            tallies.setdefault(("pairs taken", seq, kind, name), {}).setdefault(took, 0)
            tallies[("pairs taken", seq, kind, name)][took] += 1
    return tallies


def _stored(dirs: list[Path], sets: dict[str, list], what: str = "") -> tuple[list[dict], int, float, str]:
    """The runs of ``dirs`` (printing what they are), the pairs per run, the scale of ``compare()``'s
    procedure in the same requests (compare.BLOCK / the runs' block) and the procedure's label."""
    runs = [load_run(p) for d in dirs for p in sorted(d.glob("run*.npz"))]
    per_run = min(len(pairs) for r in runs for pairs in r.values())
    block = next(iter(runs[0].values()))[0].sent_a
    scale = compare.BLOCK / block
    print(f"{len(runs)} runs of {per_run} pairs of {block}-request blocks{what}; margin sets: " + "; ".join(
        f"{name} = {', '.join(m.metric + ' ' + m.text for m in ms)}" for name, ms in sets.items()), flush=True)
    return runs, per_run, scale, f"{round(compare.PAIRS * scale)}→{round(compare.MAX_PAIRS * scale)}"


def _cells(t: dict) -> str:
    """'fail | pass | undecided' table cells of a tally {verdict: count}."""
    n = sum(t.values())
    return f"{rate(t.get(paired.FAIL, 0), n)} | {t.get(paired.PASS, 0)}/{n} | {t.get(compare.UNDECIDED, 0)}/{n}"


def _disjoint_walk(args) -> tuple[str, str, list[tuple[str, int]]]:
    """Consecutive comparisons that share no run, each by ``compare()``'s procedure: comparison j starts
    at the first run comparison j-1 did not use and takes as many runs as its pairs need. Returns
    (change, margin set, [(verdict, most pairs a scenario took)]); a last comparison that would need
    more runs than are left is dropped."""
    runs, kind, name, margins, scale, seed = args
    per_run = min(len(pairs) for r in runs for pairs in r.values())
    span = -(-round(compare.MAX_PAIRS * scale) // per_run)
    rng = np.random.default_rng(seed)
    out, i = [], 0
    while i < len(runs):
        have = min(span, len(runs) - i)
        window = {sid: shifted(pairs, kind, rng) for sid, pairs in joined(runs, i, have).items()}
        verdict, took = sequential(window, {name: margins}, seed + i, scale)[name]
        if took > have * per_run:
            break
        out.append((verdict, took))
        i += -(-took // per_run)
    return kind, name, out


def baseline_rows(runs: list[dict], k: int, per_run: int, rng: np.random.Generator) -> list[str]:
    """The baseline method on the same blocks: B of run i (with each change) against A of runs
    i-K..i-1 (one run's pairs each), the shipped regression policy; one table row per change."""
    policy = reg.Policy()
    fails = {kind: 0 for kind in SHIFTS}
    for i in range(k, len(runs)):
        base = pooled([side_run(runs[j], "a", f"run{j}") for j in range(i - k, i)])
        for kind in SHIFTS:
            cur_pairs = {sid: shifted(pairs, kind, rng) for sid, pairs in runs[i].items()}
            fails[kind] += reg.compare(base, side_run(cur_pairs, "b", f"run{i}"), policy).failed
    n = max(0, len(runs) - k)
    return [f"| {kind} | baseline method K={k}, shipped policy | {per_run} | {n} | "
            f"{_cells({paired.FAIL: fails[kind], paired.PASS: n - fails[kind]})} | |" for kind in SHIFTS]


def analyze_disjoint(dirs: list[Path], lengths: list[int], sets: dict[str, list], k: int, seed: int,
                     jobs: int = 1) -> None:
    """Comparisons that share no measurement, so their rates' CIs hold: at each fixed length (the first
    ``length`` pairs of each run, or of disjoint windows of consecutive runs past one run) and by
    ``compare()``'s procedure (``_disjoint_walk``); beside them the baseline method (``baseline_rows``)."""
    runs, per_run, scale, seq = _stored(dirs, sets, " (disjoint cases)")
    rows = ["| change on B | margins | pairs per scenario | comparisons | fail (detection; a false alarm when none) "
            "| pass | undecided | most pairs a scenario took |", "|---|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(seed)
    metrics = {mg.metric for ms in sets.values() for mg in ms}
    for kind in SHIFTS:
        for length in lengths:
            span = -(-length // per_run)        # runs per case: one, or disjoint windows of consecutive runs
            tally = {name: {paired.FAIL: 0, paired.PASS: 0, compare.UNDECIDED: 0} for name in sets}
            for i in range(0, len(runs) - span + 1, span):
                window = {sid: shifted(pairs, kind, rng)[:length] for sid, pairs in joined(runs, i, span).items()}
                reps = {sid: replicates(pairs, metrics, seed + i) for sid, pairs in window.items()}
                for name, margins in sets.items():
                    tally[name][judge_replicates(reps, margins).verdict] += 1
            for name, t in tally.items():
                rows.append(f"| {kind} | {name} | {length} | {sum(t.values())} | {_cells(t)} | {length} |")
        print(f"  {kind}: fixed lengths done", flush=True)
    work = [(runs, kind, name, margins, scale, seed + 7919 * n)
            for n, (kind, (name, margins)) in enumerate((kd, st) for kd in SHIFTS for st in sets.items())]
    with ProcessPoolExecutor(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        for kind, name, cases in (pool.map(_disjoint_walk, work) if pool is not None else map(_disjoint_walk, work)):
            took = Counter(most for _, most in cases)
            rows.append(f"| {kind} | {name} | {seq} | {len(cases)} | {_cells(Counter(v for v, _ in cases))} | "
                        + ", ".join(f"{m} ({c})" for m, c in sorted(took.items())) + " |")
            print(f"  {kind} {name}: {len(cases)} disjoint comparisons", flush=True)
    rows += baseline_rows(runs, k, per_run, rng)
    print("\n" + "\n".join(rows))


def analyze(dirs: list[Path], lengths: list[int], sets: dict[str, list], k: int, seed: int, jobs: int = 1) -> None:
    runs, per_run, scale, seq = _stored(dirs, sets)
    rng = np.random.default_rng(seed)
    rows = []
    tallies: dict[tuple, dict] = {}   # (method, length, shift, set) -> tally
    span = -(-max(max(lengths), round(compare.MAX_PAIRS * scale)) // per_run)     # runs per window
    t0 = time.monotonic()
    work = [(runs[i:i + span], i, per_run, lengths, sets, scale, seq, seed)    # a window's own runs each
            for i in range(len(runs) - span + 1)]
    with ProcessPoolExecutor(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        results = pool.map(_window_tallies, work) if pool is not None else map(_window_tallies, work)
        for n, part in enumerate(results, 1):
            for key, t in part.items():
                into = tallies.setdefault(key, {} if key[0] == "pairs taken" else
                                          {paired.FAIL: 0, paired.PASS: 0, compare.UNDECIDED: 0})
                for v, c in t.items():
                    into[v] = into.get(v, 0) + c
            print(f"  window {n}/{len(work)} ({time.monotonic() - t0:.0f} s)", flush=True)
    print("\n| method | pairs per scenario | change on B | margins | fail (detection; a false alarm when none) "
          "| pass | undecided |\n|---|---|---|---|---|---|---|")
    order = {kind: n for n, kind in enumerate(SHIFTS)}
    for key, t in sorted(tallies.items(), key=lambda kv: (kv[0][0], order[kv[0][2]], kv[0][3], kv[0][1])):
        if key[0] == "pairs taken":
            continue
        rows.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {_cells(t)} |")
    print("\n".join(rows))
    print("\n| change on B | method | pairs per scenario | comparisons | fail | pass | undecided | |\n"
          "|---|---|---|---|---|---|---|---|\n" + "\n".join(baseline_rows(runs, k, per_run, rng)))
    for key, took in tallies.items():
        if key[0] == "pairs taken":
            print(f"pairs taken (most of any scenario), {key[2]}, {key[3]}: "
                  + ", ".join(f"{n}: {c}" for n, c in sorted(took.items())))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out", type=Path)
    m.add_argument("--runs", type=int, default=100)
    m.add_argument("--a", default="datapath=bridge")
    m.add_argument("--b", default="datapath=bridge")
    m.add_argument("--pairs", type=int, default=16)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--duet", action="store_true", help="A's and B's blocks at the same time, not interleaved")
    m.add_argument("--up-order", choices=("AB", "BA", "random"), default="AB", help="which cluster is brought up first")
    m.add_argument("--block", type=int, default=compare.BLOCK, help="requests per block (default compare.BLOCK)")
    m.add_argument("--profile", choices=PROFILES, default="1k", help="message sizes of the two scenarios")
    m.add_argument("--fresh", type=int, default=1, help="bring A and B up anew every N runs (default 1: every "
                                                        "comparison its own clusters; 0: once)")
    v = sub.add_parser("verify")
    v.add_argument("--a", default="datapath=bridge")
    v.add_argument("--b", default="datapath=bridge,rules=1000")
    v.add_argument("--rounds", type=int, default=30)
    v.add_argument("--seed", type=int, default=3)
    v.add_argument("--profile", choices=PROFILES, default="1k", help="message sizes (ping's and sockperf's too)")
    an = sub.add_parser("analyze")
    an.add_argument("dirs", type=Path, nargs="+")
    an.add_argument("--lengths", default="8,16,32")
    an.add_argument("--margins", action="append", metavar="NAME:rtt.p50=5%,...",
                    help=f"a named margin set (repeatable); default {', '.join(MARGIN_SETS)}")
    an.add_argument("-K", type=int, default=10, help="baseline runs of the baseline method")
    an.add_argument("--seed", type=int, default=7)
    an.add_argument("--jobs", type=int, default=1, help="worker processes over the windows")
    an.add_argument("--disjoint", action="store_true", help="only cases that share no run: each run alone, and "
                                                             "compare()'s procedure over consecutive unused runs")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "measure":
            measure(args.out, args.runs, args.a, args.b, args.pairs, args.seed, args.duet, args.up_order, args.fresh, args.block,
                    args.profile)
        elif args.cmd == "verify":
            verify(args.a, args.b, args.rounds, args.seed, args.profile)
        else:
            given = dict(m.partition(":")[::2] for m in args.margins) if args.margins else MARGIN_SETS
            sets = {name: margins_of(text) for name, text in given.items()}
            lengths = [int(x) for x in args.lengths.split(",")]
            (analyze_disjoint if args.disjoint else analyze)(args.dirs, lengths, sets, args.K, args.seed, args.jobs)
    except SpecError as e:
        print(f"compare_power: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
