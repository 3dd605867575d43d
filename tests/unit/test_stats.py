"""Statistics against distributions with known quantiles and crafted sample rows."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from netslo.stats import analysis as stats
from netslo.stats import samples


def test_nearest_rank_rule_on_small_arrays():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert stats.nearest_rank(x, 50) == 5.0      # ceil(0.5*10) = 5th
    assert stats.nearest_rank(x, 90) == 9.0
    assert stats.nearest_rank(x, 99) == 10.0
    assert stats.nearest_rank(x, 10) == 1.0
    assert stats.nearest_rank(np.array([3.0]), 99.9) == 3.0


@pytest.mark.parametrize("dist", [sps.expon(scale=1e-3), sps.uniform(loc=1e-4, scale=1e-3), sps.lognorm(0.5, scale=2e-4)])
@pytest.mark.parametrize("q", [50.0, 90.0, 99.0])
def test_percentile_ci_covers_true_quantile_at_stated_level(dist, q):
    """Coverage of the order-statistic CI over 400 repetitions must be >= 95 % minus 3 binomial sd."""
    rng = np.random.default_rng(int(q * 10))
    truth = dist.ppf(q / 100)
    reps, n = 400, 1000
    hits = 0
    for _ in range(reps):
        e = stats.percentile_estimate(np.sort(dist.rvs(n, random_state=rng)), q, 0.95)
        hits += e.lo <= truth <= e.hi
    assert hits / reps >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / reps)


def test_percentile_point_estimate_converges():
    rng = np.random.default_rng(3)
    x = np.sort(rng.exponential(1e-3, 200_000))
    for q in (50, 99, 99.9):
        e = stats.percentile_estimate(x, q)
        assert e.lo <= -1e-3 * math.log(1 - q / 100) <= e.hi


def test_ci_is_unbounded_when_too_few_samples():
    e = stats.percentile_estimate(np.sort(np.arange(100.0)), 99.9)
    assert e.hi == math.inf and math.isfinite(e.value)


def test_ipdv_pairs_only_consecutive_received_seqs():
    d = np.array([1.0, 3.0, np.nan, 4.0, 2.0])
    assert list(stats.ipdv(d)) == [2.0, -2.0]


def test_pdv_is_delay_minus_minimum():
    assert list(stats.pdv(np.array([3.0, 1.0, np.nan, 2.0]))) == [2.0, 0.0, 1.0]


def test_rfc3550_jitter_matches_recursive_definition():
    rng = np.random.default_rng(1)
    t = rng.normal(1e-3, 1e-4, 500)
    j = 0.0
    for a, b in zip(t[:-1], t[1:]):
        j += (abs(b - a) - j) / 16
    assert math.isclose(stats.rfc3550_jitter(t), j, rel_tol=1e-9)


def _rows(n):
    r = samples.empty(n)
    r["sched_ns"] = r["seq"] * 1_000_000
    r["send_ns"] = r["sched_ns"] + 1000
    return r


def test_loss_dup_reorder_accounting_on_crafted_sequence():
    r = _rows(10)
    arrival_order = [0, 1, 3, 2, 4, 6, 7, 9]          # 5 and 8 lost; 2 arrives after 3 (reordered)
    for k, s in enumerate(arrival_order):
        r[s]["recv_ns"] = r[s]["send_ns"] + 100_000 + s
        r[s]["arrival"] = k
        r[s]["srv_seen"] = 1
    r[5]["srv_seen"] = 0       # lost on the way to the responder
    r[8]["srv_seen"] = 1       # responder saw it, the answer got lost
    r[4]["dups"] = 2
    a = stats.analyze(samples.SampleSet(r, {"shared_clock": False}))
    c = a.counts
    assert (c["sent"], c["received"], c["lost"], c["lost_up"], c["lost_down"]) == (10, 8, 2, 1, 1)
    assert c["duplicates"] == 2 and c["reordered"] == 1
    assert math.isclose(a.metrics["loss"].value, 0.2)
    assert a.metrics["loss"].lo < 0.2 < a.metrics["loss"].hi
    assert math.isclose(a.metrics["loss_up"].value, 0.1)
    assert math.isclose(a.metrics["loss_down"].value, 1 / 9)


def test_loss_split_unknown_when_responder_did_not_say():
    r = _rows(4)
    r[0]["recv_ns"], r[0]["arrival"] = r[0]["send_ns"] + 5, 0
    a = stats.analyze(samples.SampleSet(r, {}))
    assert a.counts["lost_unknown_direction"] == 3 and "loss_up" not in a.metrics


def test_one_way_delays_only_with_shared_clock():
    r = _rows(3)
    for s in range(3):
        r[s]["srv_rx_ns"] = r[s]["send_ns"] + 40_000
        r[s]["srv_tx_ns"] = r[s]["srv_rx_ns"] + 5_000
        r[s]["recv_ns"] = r[s]["srv_tx_ns"] + 60_000
        r[s]["arrival"] = s
    shared = stats.analyze(samples.SampleSet(r.copy(), {"shared_clock": True}))
    assert math.isclose(shared.metrics["owd_up.p50"].value, 40e-6)
    assert math.isclose(shared.metrics["owd_down.p50"].value, 60e-6)
    assert math.isclose(shared.metrics["rtt.p50"].value, 100e-6)     # the responder's 5 µs left out
    assert math.isclose(shared.metrics["server_time.p50"].value, 5e-6)
    assert "owd_up.p50" not in stats.analyze(samples.SampleSet(r, {"shared_clock": False})).metrics


def test_mann_whitney_and_bootstrap_detect_a_shift_and_not_its_absence():
    rng = np.random.default_rng(7)
    a = rng.exponential(1e-3, 2000)
    same = rng.exponential(1e-3, 2000)
    shifted = rng.exponential(1e-3, 2000) + 0.5e-3
    assert stats.mann_whitney(a, shifted) < 1e-6
    assert stats.mann_whitney(a, same) > 1e-3
    d = stats.bootstrap_quantile_diff(a, shifted, 50, n_boot=500)
    assert d.lo <= 0.5e-3 <= d.hi and d.lo > 0
