"""Speed and memory of the statistics and report code on large sample sets (pytest-benchmark;
numbers printed, nothing asserted about time or memory).

    python -m pytest benchmarks/bench_stats.py -s

What a user waits for after the probes finish: ``analyze`` (every statistic with its CI) on 1 M and
10 M requests, the regression comparison (block bootstrap, 4000 resamples, 3 metrics) at the
gate's default size (1000 requests) and at 1 M, and the Allure plots at 1000 and 1 M. Each prints
requests per second.

Cost growth: ``test_analyze_cost_growth`` analyses 10^4 .. 10^7 synthetic requests, each size in
its own interpreter (``python -m benchmarks.measure analyze FILE``) that loads the raw-samples
file and runs ``analyze``; it prints the time and the peak RSS above that interpreter's baseline
after imports (``ru_maxrss``), and time / (n log2 n) so the growth can be read off.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.synthetic_samples import synthetic
from netslo.report import plots
from netslo.report import regression as reg
from netslo.report.series import series
from netslo.stats.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
COST_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)


def in_subprocess(*args: str) -> dict:
    """Run ``python -m benchmarks.measure ARGS`` (an interpreter of its own) and return its JSON."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.measure", *args], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sample_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    files = {}
    for n in COST_SIZES:
        files[n] = str(d / f"synthetic-{n}.npz")
        synthetic(n).save(files[n])
    return files


@pytest.mark.parametrize("n", COST_SIZES)
def test_analyze_cost_growth(benchmark, sample_files, n):
    r = benchmark.pedantic(in_subprocess, args=("analyze", sample_files[n]), rounds=1, iterations=1)
    assert r["n"] == n and r["counts"]["sent"] == n
    benchmark.extra_info.update({k: v for k, v in r.items() if k not in ("metrics", "counts")})
    print(f"\nanalyze {n:>12,} requests: {r['analyze_s']:7.3f} s, peak RSS {r['peak_mb']:6.1f} MB above baseline "
          f"({r['baseline_mb']:.0f} MB), samples {r['after_load_mb']:.1f} MB loaded "
          f"({r['memory_bytes_per_request']:.2f} B/request in memory, {r['file_bytes_per_request']:.2f} on disk), "
          f"load {r['load_s']:.2f} s, time/(n log2 n) = {r['analyze_s'] / (n * math.log2(n)) * 1e9:.2f} ns")


@pytest.fixture(scope="module")
def sets():
    return {n: synthetic(n) for n in (1_000, 1_000_000, 10_000_000)}


def report(benchmark, n: int, what: str) -> None:
    seconds = benchmark.stats.stats.median
    benchmark.extra_info["requests_per_second"] = n / seconds
    print(f"\n{what}: {n:,} requests in {seconds:.3f} s = {n / seconds:,.0f} requests/s")


@pytest.mark.parametrize("n", [1_000_000, 10_000_000])
def test_analyze_speed(benchmark, sets, n):
    a = benchmark.pedantic(analyze, args=(sets[n],), rounds=5, iterations=1)   # the median of 5 is reported
    assert a.counts["sent"] == n
    report(benchmark, n, "analyze (all statistics + CIs)")


@pytest.mark.parametrize("n", [1_000, 1_000_000])
def test_regression_compare_speed(benchmark, sets, n):
    base = reg.Run(samples={"t": [sets[n]]})
    cur = reg.Run(samples={"t": [synthetic(n, seed=1, scale=1.01)]})
    rep = benchmark.pedantic(reg.compare, args=(base, cur, reg.Policy()), rounds=1 if n > 1000 else 5, iterations=1)
    assert len(rep.comparisons) == 3
    report(benchmark, 2 * n, "regression compare (3 metrics, block bootstrap x4000)")


@pytest.mark.parametrize("n", [1_000, 1_000_000])
def test_plot_speed(benchmark, sets, n):
    rtt = series(sets[n], "rtt")
    t = np.arange(len(rtt)) * 1e-4

    def draw():
        return (plots.ecdf_png(rtt, title="e"), plots.distribution_png(rtt, title="d"),
                plots.timeseries_png(t, rtt, title="t"))

    pngs = benchmark.pedantic(draw, rounds=1 if n > 1000 else 3, iterations=1)
    assert all(p[:4] == b"\x89PNG" for p in pngs)
    report(benchmark, n, "ECDF + histogram/box + time series PNGs")
