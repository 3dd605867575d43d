"""Does a measurement change when something else runs beside it? An A/A comparison of RTT
distributions (numbers printed, no pass/fail).

    python benchmarks/concurrency_aa.py ALONE_RUNS_DIR BESIDE_RUNS_DIR

Each directory holds results directories of the same tests (e.g. ``netslo/gate/test_latency.py``):
ALONE runs made with nothing else on the machine (at least two), BESIDE runs made while other work
ran at the same time (e.g. the user-mode-linux impairment module). Per test and statistic (RTT P50
and P99) it prints the value of every run, the spread between the ALONE runs (what repetition
alone moves) and how far each BESIDE run lies from the ALONE mean, plus two-sample
Kolmogorov-Smirnov p-values: ALONE vs ALONE (the A/A false-alarm baseline) and ALONE vs BESIDE.
Running the two side by side is acceptable only when BESIDE differs from ALONE no more than ALONE
differs from itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netslo.report import regression as reg  # noqa: E402
from netslo.report.series import series  # noqa: E402

KS_ALPHA = 0.01


def rtts_per_run(directory: Path) -> dict[str, list[np.ndarray]]:
    """test id -> RTT series (s) of each run under ``directory``."""
    out: dict[str, list[np.ndarray]] = {}
    for f in reg.results_files(directory):
        run = reg.load(f)
        for test, sets in run.samples.items():
            out.setdefault(test, []).extend(series(s, "rtt") for s in sets)
    return out


def quantile(x: np.ndarray, q: float) -> float:
    """Nearest-rank quantile (as netslo's statistics define it), s."""
    xs = np.sort(x)
    return float(xs[max(0, int(np.ceil(q * len(xs))) - 1)])


def compare(alone: dict, beside: dict) -> list[dict]:
    rows = []
    for test in sorted(set(alone) & set(beside)):
        a, b = alone[test], beside[test]
        if len(a) < 2 or not b:
            continue
        row = {"test": test.split("::")[-1]}
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            va = [quantile(x, q) for x in a]
            vb = [quantile(x, q) for x in b]
            mean = float(np.mean(va))
            row[f"{name}_alone_us"] = [round(v * 1e6, 1) for v in va]
            row[f"{name}_beside_us"] = [round(v * 1e6, 1) for v in vb]
            row[f"{name}_alone_spread"] = (max(va) - min(va)) / mean
            row[f"{name}_beside_shift"] = max(abs(v - mean) for v in vb) / mean
        row["ks_aa_p"] = float(sps.ks_2samp(a[0], a[1]).pvalue)
        row["ks_ab_p"] = min(float(sps.ks_2samp(a[0], x).pvalue) for x in b)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    rows = compare(rtts_per_run(Path(argv[0])), rtts_per_run(Path(argv[1])))
    print(f"{'test':44} {'P50 alone/beside (µs)':34} {'P99 alone/beside (µs)':36} KS p A/A  A/B")
    for r in rows:
        p50 = f"{r['p50_alone_us']} / {r['p50_beside_us']}"
        p99 = f"{r['p99_alone_us']} / {r['p99_beside_us']}"
        print(f"{r['test'][:44]:44} {p50:34} {p99:36} {r['ks_aa_p']:8.2g} {r['ks_ab_p']:8.2g}")
    if rows:
        for name in ("p50", "p99"):
            spread = np.median([r[f"{name}_alone_spread"] for r in rows])
            shift = np.median([r[f"{name}_beside_shift"] for r in rows])
            print(f"{name.upper()}: median spread between alone runs {spread:.1%}, median shift of a beside run "
                  f"from the alone mean {shift:.1%}")
        aa = sum(r["ks_aa_p"] < KS_ALPHA for r in rows)
        ab = sum(r["ks_ab_p"] < KS_ALPHA for r in rows)
        print(f"KS p < {KS_ALPHA:g}: {aa}/{len(rows)} tests alone vs alone, {ab}/{len(rows)} alone vs beside")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
