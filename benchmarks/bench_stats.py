"""Speed of the statistics and report code on large sample sets (pytest-benchmark; numbers only).

    python -m pytest benchmarks/bench_stats.py -s

What a user waits for after the probes finish: ``analyze`` (every statistic with its CI) on 1 M and
10 M requests, the regression comparison (block bootstrap, 4000 resamples, 3 metrics) at the
gate's default size (1000 requests) and at 1 M, and the Allure plots at 1000 and 1 M. Each prints
requests per second; nothing is asserted about time.
"""

from __future__ import annotations

import numpy as np
import pytest

from netslo.report import plots
from netslo.report import regression as reg
from netslo.report.series import series
from netslo.samples import SampleSet, empty
from netslo.stats import analyze


def synthetic(n: int, seed: int = 0, scale: float = 1.0) -> SampleSet:
    """n requests every 100 µs, lognormal RTT (median 100 µs), 0.1 % loss, server timestamps."""
    rng = np.random.default_rng(seed)
    rows = empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * 100_000
    rows["send_ns"] = rows["sched_ns"] + rng.integers(5_000, 60_000, n)
    rtt = (scale * 1e5 * rng.lognormal(0, 0.5, n)).astype(np.int64)
    rows["srv_rx_ns"] = rows["send_ns"] + rtt // 2
    rows["srv_tx_ns"] = rows["srv_rx_ns"] + 5_000
    rows["recv_ns"] = rows["send_ns"] + rtt + 5_000
    rows["srv_seen"] = 1
    rows["arrival"] = np.arange(n)
    lost = rng.random(n) < 0.001
    rows["recv_ns"][lost] = -1
    rows["arrival"][lost] = -1
    return SampleSet(rows, {"protocol": "udp", "shared_clock": True})


@pytest.fixture(scope="module")
def sets():
    return {n: synthetic(n) for n in (1_000, 1_000_000, 10_000_000)}


def report(benchmark, n: int, what: str) -> None:
    seconds = benchmark.stats.stats.median
    benchmark.extra_info["requests_per_second"] = n / seconds
    print(f"\n{what}: {n:,} requests in {seconds:.3f} s = {n / seconds:,.0f} requests/s")


@pytest.mark.parametrize("n", [1_000_000, 10_000_000])
def test_analyze_speed(benchmark, sets, n):
    a = benchmark.pedantic(analyze, args=(sets[n],), rounds=1 if n > 1_000_000 else 3, iterations=1)
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
