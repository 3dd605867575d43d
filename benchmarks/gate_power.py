"""Gate power of the regression check, measured on real runs of an unchanged system.

    python benchmarks/gate_power.py RUNS_DIR [--factors 1.25,1.5,2,3,5] [--block 50] ...

RUNS_DIR holds one results directory per run (each with results.json + samples/), all of the same
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
from netslo.samples import SampleSet  # noqa: E402


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--factors", default="1.25,1.5,2,3,5,10")
    ap.add_argument("--block", default=None)
    ap.add_argument("--min-effect", default=None)
    ap.add_argument("--min-abs", default=None)
    ap.add_argument("--resamples", default="2000")
    a = ap.parse_args(argv)
    policy = reg.policy_from_text(None, a.min_effect, a.min_abs, None, None, a.block, a.resamples)
    runs = runs_in(a.runs)
    if len(runs) < 2:
        print(f"need at least 2 runs under {a.runs}, found {len(runs)}")
        return 2
    pairs = list(zip(runs[:-1], runs[1:]))
    print(f"policy: metrics={','.join(policy.metrics)} min_effect={policy.min_effect_rel:.0%} "
          f"min_abs={policy.min_effect_abs * 1e6:.0f}us block={policy.block} alpha={policy.alpha:.0%} "
          f"resamples={policy.n_boot}")
    alarms, flagged, total, mw_flagged = 0, 0, 0, 0
    for base, cur in pairs:
        rep = reg.compare(base, cur, policy)
        fam = [c for c in rep.comparisons if c.verdict != reg.INSUFFICIENT]
        total += len(fam)
        flagged += len(rep.regressions)
        mw_flagged += sum(1 for c in fam if c.p_mw is not None and c.p_mw < 0.05)
        if rep.failed:
            alarms += 1
            print("  false alarm:", ", ".join(f"{c.test.split('[')[-1][:-1]} {c.metric} "
                                               f"{c.baseline * 1e3:.3g}->{c.current * 1e3:.3g}ms p={c.p_adj:.2g}"
                                               for c in rep.regressions))
    print(f"A/A: {alarms} of {len(pairs)} unchanged run pairs reported a regression; "
          f"{flagged} of {total} single comparisons flagged")
    mw_total = sum(1 for b, c in pairs for t in c.samples if t in b.samples for m in policy.metrics if m != "loss")
    print(f"naive Mann-Whitney U (i.i.d., p<5%, no correction): {mw_flagged} of {mw_total} delay comparisons flagged")

    only_p99 = reg.Policy(**{**reg.asdict(policy), "metrics": ("rtt.p99",)})
    smallest = None
    for factor in [float(f) for f in a.factors.split(",")]:
        hit, cases = 0, 0
        for base, cur in pairs:
            shifted = reg.Run(environment=cur.environment, sources=cur.sources)
            for test, parts in cur.samples.items():
                if test not in base.samples:
                    continue
                b_p99 = reg.nearest_rank(np.concatenate([rtt_by_seq(s)[received(s)] for s in base.samples[test]]), 99.0)
                for s in parts:
                    shifted.add(test, with_tail_shift(s, factor * b_p99))
            rep = reg.compare(base, shifted, only_p99)
            for c in rep.comparisons:
                if c.verdict == reg.INSUFFICIENT:
                    continue
                cases += 1
                hit += c.verdict == reg.REGRESSED
        rate = hit / cases if cases else 0.0
        print(f"P99 shifted to {factor:g}x baseline P99: detected in {hit} of {cases} cases ({rate:.0%})")
        if smallest is None and rate >= 0.8:
            smallest = factor
    print(f"smallest P99 shift detected in >= 80% of cases: "
          f"{f'{smallest:g}x the baseline P99' if smallest else 'none of the factors tried'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
