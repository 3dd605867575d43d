"""Gate power of the regression check, measured on real runs of an unchanged system.

    python benchmarks/gate_power.py RUNS_DIR [--factors 1.25,1.5,2,3,5] [--block 50] ...

RUNS_DIR holds one results directory per run (or use ``--synthetic N``: N runs of i.i.d. lognormal
RTTs, median 100 µs, 1000 requests each: the statistical floor without host noise), (each with results.json + samples/), all of the same
unchanged system, e.g. made with ``pytest -m cni --netslo-results RUNS_DIR/run01`` repeated.
Prints (numbers, no pass/fail):
  * false alarms: consecutive run pairs (run i = baseline, run i+1 = current) reporting any regression,
    and how many single comparisons were flagged; the same for a naive Mann-Whitney U test at 5 %;
  * power: the same pairs with a synthetic P99 shift injected into the current run (the slowest 2 %
    of its requests get slower so that its RTT P99 is ``factor`` x the baseline's), the fraction of
    (pair, test) cases whose rtt.p99 is flagged, per factor; the smallest factor detected in >= 80 %.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netslo.report import regression as reg  # noqa: E402
from netslo.report.series import received, rtt_by_seq  # noqa: E402
from netslo.samples import SampleSet, empty  # noqa: E402


def runs_in(directory: Path) -> list[reg.Run]:
    dirs = sorted(p.parent for p in directory.glob("*/results.json"))
    return [reg.load(d) for d in dirs]


def with_tail_shift(s: SampleSet, target_p99: float) -> SampleSet:
    """A copy whose RTT P99 becomes ``target_p99`` (s): requests at or above the current P98 get
    slower by (target - current P99); the rest, and the order of everything, is unchanged."""
    rtt = rtt_by_seq(s)
    got = received(s)
    p98 = reg.nearest_rank(rtt[got], 98.0)
    shift = target_p99 - reg.nearest_rank(rtt[got], 99.0)
    rows = s.rows.copy()
    tail = got & (rtt >= p98)
    rows["recv_ns"][tail] += int(round(max(shift, 0.0) * 1e9))
    return SampleSet(rows, copy.deepcopy(s.meta))


def with_scale(s: SampleSet, factor: float) -> SampleSet:
    """A copy in which every RTT is ``factor`` x longer (a slower path for every request)."""
    rows = s.rows.copy()
    got = received(s)
    rtt = rows["recv_ns"][got] - rows["send_ns"][got]
    rows["recv_ns"][got] = rows["send_ns"][got] + np.round(rtt * factor).astype(np.int64)
    return SampleSet(rows, copy.deepcopy(s.meta))


def with_spread_tail(s: SampleSet, target_p99: float, seed: int = 0) -> SampleSet:
    """A copy in which 2 % of the received requests, chosen at random over the run, take
    0.98-1.02 x ``target_p99`` (if they were faster): an i.i.d. heavier tail whose P99 is the target
    (within 2 %, as long as fewer than 1 % of the original requests were slower than the target)."""
    rows = s.rows.copy()
    idx = np.flatnonzero(received(s))
    pick = np.random.default_rng(seed).choice(idx, size=max(1, int(np.ceil(0.02 * len(idx)))), replace=False)
    want = (target_p99 * np.random.default_rng(seed + 1).uniform(0.98, 1.02, len(pick)) * 1e9).astype(np.int64)
    rtt = rows["recv_ns"][pick] - rows["send_ns"][pick]
    rows["recv_ns"][pick] = rows["send_ns"][pick] + np.maximum(rtt, want)
    return SampleSet(rows, copy.deepcopy(s.meta))


def pooled(runs: list[reg.Run]) -> reg.Run:
    out = reg.Run()
    for r in runs:
        out.environment += r.environment
        out.sources += r.sources
        for t, parts in r.samples.items():
            for s in parts:
                out.add(t, s)
    return out


def synthetic_runs(count: int, n: int = 1000) -> list[reg.Run]:
    """``count`` runs of two tests with i.i.d. lognormal RTTs (median 100 µs, sigma 0.5)."""
    out = []
    for i in range(count):
        run = reg.Run(environment=[{"run_id": f"synthetic{i}"}], sources=[f"synthetic{i}"])
        for t, scale in (("same-node", 1.0), ("cross-node", 1.5)):
            rng = np.random.default_rng(1000 + 7 * i + int(scale * 10))
            rows = empty(n)
            rows["sched_ns"] = np.arange(n, dtype=np.int64) * 2_000_000
            rows["send_ns"] = rows["sched_ns"] + 30_000
            rows["recv_ns"] = rows["send_ns"] + (scale * 1e5 * rng.lognormal(0, 0.5, n)).astype(np.int64)
            rows["arrival"] = np.arange(n)
            run.add(f"synthetic[{t}]", SampleSet(rows, {"protocol": "udp"}))
        out.append(run)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=Path, nargs="?")
    ap.add_argument("--synthetic", type=int, default=0, help="use N synthetic i.i.d. runs instead of RUNS_DIR")
    ap.add_argument("--factors", default="1.5,2,3,5")
    ap.add_argument("--block", default=None)
    ap.add_argument("--min-effect", default=None)
    ap.add_argument("--min-abs", default=None)
    ap.add_argument("--resamples", default="2000")
    ap.add_argument("--shift", choices=("spread", "tail", "scale"), default="spread",
                    help="spread: 2%% of requests at random get slower so that P99 = factor x baseline P99; "
                         "tail: the slowest 2%% get slower (same P99 target); scale: every RTT x factor")
    ap.add_argument("--baseline-runs", type=int, default=1, help="pool this many previous runs as the baseline")
    ap.add_argument("--no-noise-guard", action="store_true")
    a = ap.parse_args(argv)
    policy = reg.policy_from_text(None, a.min_effect, a.min_abs, None, None, a.block, a.resamples)
    if a.no_noise_guard:
        policy = reg.Policy(**{**reg.asdict(policy), "noise_guard": False})
    runs = synthetic_runs(a.synthetic) if a.synthetic else runs_in(a.runs)
    if len(runs) < 2:
        print(f"need at least 2 runs under {a.runs}, found {len(runs)}")
        return 2
    k = a.baseline_runs
    pairs = [(pooled(runs[i - k:i]), runs[i]) for i in range(k, len(runs))]
    print(f"policy: metrics={','.join(policy.metrics)} min_effect={policy.min_effect_rel:.0%} "
          f"min_abs={policy.min_effect_abs * 1e6:.0f}us block={policy.block_s * 1e3:g}ms alpha={policy.alpha:.0%} "
          f"resamples={policy.n_boot} noise_guard={policy.noise_guard} baseline_runs={k} shift={a.shift}")
    alarms, flagged, total, mw_flagged, noise = 0, 0, 0, 0, 0
    for base, cur in pairs:
        rep = reg.compare(base, cur, policy)
        fam = [c for c in rep.comparisons if c.verdict != reg.INSUFFICIENT]
        total += len(fam)
        flagged += len(rep.regressions)
        noise += sum(1 for c in rep.comparisons if c.verdict == reg.HOST_NOISE)
        mw_flagged += sum(1 for c in fam if c.p_mw is not None and c.p_mw < 0.05)
        if rep.failed:
            alarms += 1
            print("  false alarm:", ", ".join(f"{c.test.split('[')[-1][:-1]} {c.metric} "
                                               f"{c.baseline * 1e3:.3g}->{c.current * 1e3:.3g}ms p={c.p_adj:.2g}"
                                               for c in rep.regressions))
    print(f"A/A: {alarms} of {len(pairs)} unchanged run pairs reported a regression; "
          f"{flagged} of {total} single comparisons flagged; {noise} set aside as host noise")
    mw_total = sum(1 for b, c in pairs for t in c.samples if t in b.samples for m in policy.metrics if m != "loss")
    print(f"naive Mann-Whitney U (i.i.d., p<5%, no correction): {mw_flagged} of {mw_total} delay comparisons flagged")

    only_p99 = reg.Policy(**{**reg.asdict(policy), "metrics": ("rtt.p99",)})
    smallest = None
    for factor in [float(f) for f in a.factors.split(",")]:
        hit, cases, set_aside = 0, 0, 0
        for base, cur in pairs:
            shifted = reg.Run(environment=cur.environment, sources=cur.sources)
            for test, parts in cur.samples.items():
                if test not in base.samples:
                    continue
                b_p99 = reg.nearest_rank(np.concatenate([rtt_by_seq(s)[received(s)] for s in base.samples[test]]), 99.0)
                for s in parts:
                    shifted.add(test, {"spread": lambda: with_spread_tail(s, factor * b_p99),
                                       "tail": lambda: with_tail_shift(s, factor * b_p99),
                                       "scale": lambda: with_scale(s, factor)}[a.shift]())
            rep = reg.compare(base, shifted, only_p99)
            for c in rep.comparisons:
                if c.verdict == reg.INSUFFICIENT:
                    continue
                cases += 1
                hit += c.verdict == reg.REGRESSED
                set_aside += c.verdict == reg.HOST_NOISE
        rate = hit / cases if cases else 0.0
        print(f"P99 shifted to {factor:g}x baseline P99: detected in {hit} of {cases} cases ({rate:.0%}); "
              f"{set_aside} set aside as host noise")
        if smallest is None and rate >= 0.8:
            smallest = factor
    print(f"smallest {a.shift} P99 shift detected in >= 80% of cases: "
          f"{f'{smallest:g}x the baseline P99' if smallest else 'none of the factors tried'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
