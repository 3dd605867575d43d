"""False alarms and power of ``netslo compare`` (interleaved A/B), side by side with the baseline method.

    python benchmarks/compare_power.py measure OUT --runs 100 [--b rules=0] [--pairs 16] [--seed 1]
    python benchmarks/compare_power.py analyze OUT [--lengths 4,8,16] [--margins rtt.p50=5%,...] [-K 10]

``measure`` (root; the embedded provider) brings up cluster A and cluster B once, then makes ``--runs``
comparisons, each ``--pairs`` interleaved pairs of 200-request blocks (A and B in random order, as
``netslo.studies.compare``) of cross-node UDP and cross-node TCP-RR, and keeps every block's RTTs and
loss counts in ``OUT/runNNN.npz``.

``analyze`` judges the stored runs as ``netslo compare`` judges a run: per scenario and margin a paired
block bootstrap (``netslo.stats.paired``, 4000 replicates), Holm over every check of the run at 1 %,
**fail** / **pass** / **undecided** (neither). Each run is judged at each job length (its first k pairs)
as measured (A/A when A and B are one spec: a failure is a false alarm) and with a known change put
into B's blocks:

  scale10   every RTT of B x 1.10                                 (+10 % at every percentile)
  tail10    2 % of B's requests at random slowed to 1.10 x B's P99 (+10 % P99, P50 unchanged)
  loss05    0.5 % of B's answered requests at random become lost    (+0.5 percentage points)

Detection = the run fails. Beside it, the same B blocks (with the same change) judged by the baseline
method (``netslo.report.regression``, the shipped policy): B of run i as the current run, A of the K
runs before it as the baseline, as a pull request is judged against stored runs. Here those stored runs
are this machine's own, minutes old: the most favourable case for that method. Prints numbers (rates
with 95 % Clopper-Pearson intervals), no pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
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
from netslo.studies import compare  # noqa: E402

SCENARIOS = [Scenario("cross-node", "udp", "1k"), Scenario("cross-node", "tcp-rr", "1k")]
SHIFTS = ("none", "scale10", "tail10", "loss05")
MARGINS = "rtt.p50=5%,rtt.p99=5%,loss=0.25%"


# ---- measure ---------------------------------------------------------------------------------------
def measure(out: Path, runs: int, a: str, b: str, pairs: int, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    spec = slo_mod.load(shipped_slo("slo.yaml"))
    rng = np.random.default_rng(seed)
    with contextlib.ExitStack() as stack:
        side_a = compare.bring_up(stack, "A", clusterspec.load(a, "--a"))
        side_b = compare.bring_up(stack, "B", clusterspec.load(b, "--b"))
        for i in range(runs):
            t0 = time.monotonic()
            arrays = {}
            for sc_def in SCENARIOS:
                sc = compare.ScenarioComparison(sc_def)
                compare.measure_pairs(side_a, side_b, sc, spec.sampling, pairs, compare.BLOCK, rng)
                for j, p in enumerate(sc.pairs):
                    key = f"{sc_def.id}|{j}"
                    arrays[f"{key}|a"], arrays[f"{key}|b"] = p.a, p.b
                    arrays[f"{key}|n"] = np.array([p.sent_a, p.lost_a, p.sent_b, p.lost_b, p.b_first])
            np.savez_compressed(out / f"run{i:03d}.npz", **arrays)
            print(f"run {i + 1}/{runs}: {time.monotonic() - t0:.1f} s", flush=True)
    (out / "spec.txt").write_text(f"a={a}\nb={b}\npairs={pairs}\nseed={seed}\n"
                                  f"measured={time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")


# ---- analyze ---------------------------------------------------------------------------------------
def load_run(path: Path) -> dict[str, list[paired.Pair]]:
    """{scenario id: its pairs, in measured order}."""
    z = np.load(path)
    got: dict[str, dict[int, paired.Pair]] = {}
    for key in z.files:
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


def paired_verdict(run: dict[str, list[paired.Pair]], margins: list[slo_mod.Margin], seed: int) -> str:
    """The run judged as ``netslo compare`` judges one: its checks, Holm, fail / pass / undecided."""
    result = compare.Comparison(None, None, seed, confidence=1.0 - compare.FAMILY_ALPHA)
    for sc_def in SCENARIOS:
        sc = compare.ScenarioComparison(sc_def, pairs=run[sc_def.id])
        sc.checks = compare._relatives(sc, margins, result.confidence, seed)
        result.scenarios.append(sc)
    compare._decide(result)
    return result.verdict


def side_run(run: dict[str, list[paired.Pair]], side: str, name: str) -> reg.Run:
    """One side's blocks of a run as a stored gate run: a test per scenario, its answered RTTs."""
    out = reg.Run(environment=[{"run_id": name}], sources=[name])
    for sid, pairs in run.items():
        out.add(f"test_latency_slo[{sid}]", answered(np.concatenate([getattr(p, side) for p in pairs])))
    return out


def analyze(dirs: list[Path], lengths: list[int], margins: list[slo_mod.Margin], k: int, seed: int) -> None:
    runs = [load_run(p) for d in dirs for p in sorted(d.glob("run*.npz"))]
    print(f"{len(runs)} runs; margins {', '.join(m.metric + ' ' + m.text for m in margins)}; "
          f"checks per run {len(margins) * len(runs[0])}", flush=True)
    rng = np.random.default_rng(seed)
    for length in lengths:
        for kind in SHIFTS:
            tally = {paired.FAIL: 0, paired.PASS: 0, compare.UNDECIDED: 0}
            t0 = time.monotonic()
            for i, run in enumerate(runs):
                cut = {sid: shifted(pairs[:length], kind, rng) for sid, pairs in run.items()}
                tally[paired_verdict(cut, margins, seed + i)] += 1
            n = len(runs)
            print(f"interleaved  {length:3d} pairs  {kind:8s} fail {rate(tally[paired.FAIL], n)}; pass "
                  f"{tally[paired.PASS]}/{n}; undecided {tally[compare.UNDECIDED]}/{n}  "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    # the baseline method on the same blocks: B of run i against A of runs i-K..i-1 (all 16 pairs each)
    policy = reg.Policy()
    for kind in SHIFTS:
        fails = cases = 0
        for i in range(k, len(runs)):
            base = pooled([side_run(runs[j], "a", f"run{j}") for j in range(i - k, i)])
            cur_pairs = {sid: shifted(pairs, kind, rng) for sid, pairs in runs[i].items()}
            rep = reg.compare(base, side_run(cur_pairs, "b", f"run{i}"), policy)
            cases += 1
            fails += bool(rep.failed)
        print(f"baseline K={k} {kind:8s} fail {rate(fails, cases)}", flush=True)


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
    an = sub.add_parser("analyze")
    an.add_argument("dirs", type=Path, nargs="+")
    an.add_argument("--lengths", default="4,8,16")
    an.add_argument("--margins", default=MARGINS)
    an.add_argument("-K", type=int, default=10, help="baseline runs of the baseline method")
    an.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "measure":
            measure(args.out, args.runs, args.a, args.b, args.pairs, args.seed)
        else:
            analyze(args.dirs, [int(x) for x in args.lengths.split(",")], margins_of(args.margins), args.K, args.seed)
    except SpecError as e:
        print(f"compare_power: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
