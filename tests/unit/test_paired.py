"""The paired block bootstrap of two interleaved sides and its non-inferiority verdict, on samples
drawn here with a known truth: identical sides, B slower by a known factor, B losing more, and a
host whose speed drifts from pair to pair (which the pairing must cancel)."""

import numpy as np

from netslo.stats import paired


def _pairs(factor=1.0, loss_b=0.0, drift=0.0, m=16, k=200, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        host = np.exp(rng.normal(0, drift))          # the host's speed during this pair: both sides alike
        a = host * 1e-4 * rng.lognormal(0, 0.4, k)
        b = factor * host * 1e-4 * rng.lognormal(0, 0.4, k)
        lost_b = int(rng.binomial(k, loss_b))
        out.append(paired.Pair(a, b[lost_b:], k, 0, k, lost_b, bool(i % 2)))
    return out


def _verdict(r, confidence=0.95):
    return r.verdict(r.p_worse, confidence)


def test_identical_sides_pass_within_the_margin_and_the_ci_covers_one():
    """40 A/A comparisons: every one passes a 10 % margin; the 95 % CI holds the true ratio 1 in at
    least 34 (P(fewer) < 2 % for a CI of 95 % coverage)."""
    rs = [paired.percentile_ratio(_pairs(seed=seed), 50, 0.10, n_boot=500) for seed in range(40)]
    assert all(_verdict(r) == paired.PASS for r in rs)
    assert sum(r.lo <= 1.0 <= r.hi for r in rs) >= 34, [(r.lo, r.hi) for r in rs]


def test_b_slower_by_20_percent_fails_a_5_percent_margin():
    r = paired.percentile_ratio(_pairs(factor=1.2, seed=3), 50, 0.05)
    assert 1.12 < r.value < 1.28 and r.lo > 1.05 and _verdict(r) == paired.FAIL, r
    r99 = paired.percentile_ratio(_pairs(factor=1.2, seed=3), 99, 0.05)
    assert r99.value > 1.05, r99


def test_a_change_inside_the_margin_passes_and_one_near_it_is_inconclusive():
    assert _verdict(paired.percentile_ratio(_pairs(factor=1.02, seed=4), 50, 0.10)) == paired.PASS
    near = paired.percentile_ratio(_pairs(factor=1.10, m=4, k=50, seed=5), 50, 0.10)
    assert _verdict(near) == paired.INCONCLUSIVE, near


def test_pairing_cancels_a_drifting_host():
    """The host's speed varies ×e^N(0, 0.5) from pair to pair, far more than the 20 % change: paired,
    the ratio is still found; the same blocks with the pairing broken cannot see it."""
    drifting = _pairs(factor=1.2, drift=0.5, seed=6)
    r = paired.percentile_ratio(drifting, 50, 0.05)
    assert r.lo > 1.05 and _verdict(r) == paired.FAIL, r
    rng = np.random.default_rng(1)
    broken = [paired.Pair(p.a, q.b, 200, 0, 200, 0) for p, q in zip(drifting, rng.permutation(drifting))]
    assert paired.percentile_ratio(broken, 50, 0.05).hi - paired.percentile_ratio(broken, 50, 0.05).lo > r.hi - r.lo


def test_loss_difference_and_holm_over_several_checks():
    same = paired.loss_difference(_pairs(seed=7), 0.005)
    assert same.value == 0.0 and _verdict(same) == paired.PASS
    lossy = paired.loss_difference(_pairs(loss_b=0.03, seed=7), 0.005)
    assert 0.02 < lossy.value < 0.04 and _verdict(lossy) == paired.FAIL, lossy
    assert paired.holm([0.01, 0.04, 0.03, 0.5]) == [0.04, 0.09, 0.09, 0.5]


def test_the_bootstrap_quantiles_are_those_of_the_resampled_blocks_concatenated():
    """The vectorised replicates (sorted once, bisection on counts) equal P_q of the drawn blocks
    joined, replicate by replicate, ties and all."""
    rng = np.random.default_rng(5)
    parts = [np.round(rng.lognormal(-10, 0.5, n), 7) for n in (200, 199, 3, 200, 57)]   # rounded: ties
    counts = paired._resample_counts(np.random.default_rng(9), len(parts), 300)
    for q in (1, 50, 90, 99, 100):
        got = paired._boot_quantiles(parts, q, counts)
        want = [paired._quantile([p for p, c in zip(parts, row) for _ in range(c)], q) for row in counts]
        assert np.array_equal(got, np.array(want)), q
