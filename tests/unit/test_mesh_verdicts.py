"""A mesh's per-pair verdicts (netslo.stats.mesh): the breach p-value is valid (a pair exactly at its
threshold is called a breach no more often than alpha) and sharp (a pair at twice its P99 is), Holm
keeps a healthy mesh of many pairs quiet, over_pairs is the nearest-rank quantile of the pairs, and
the SLO file's mesh selectors and metrics are read and rejected the way every key is."""

import math

import numpy as np
import pytest

from netslo.core.errors import SpecError
from netslo.slo import spec as slo_mod
from netslo.stats import mesh
from netslo.stats.analysis import Estimate, percentile_estimate, proportion

LIMIT = 0.001                      # 1 ms
SCALE = LIMIT / math.log(100)      # an exponential whose P99 is exactly LIMIT


def _pair(rng, scale, n=600):
    return rng.exponential(scale, n)


def test_a_pair_exactly_at_its_threshold_breaks_it_no_more_often_than_alpha():
    rng = np.random.default_rng(1)
    p = np.array([mesh.pair_pvalue(_pair(rng, SCALE), 600, 0, "rtt.p99", LIMIT) for _ in range(4000)])
    rate = float(np.mean(p < 0.05))
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000), rate
    assert rate > 0.01        # and not trivially (a test that never rejects would pass the line above)


def test_a_pair_at_twice_its_p99_is_a_breach_with_confidence():
    rng = np.random.default_rng(2)
    p = [mesh.pair_pvalue(_pair(rng, 2 * SCALE), 600, 0, "rtt.p99", LIMIT) for _ in range(200)]
    assert max(p) < 1e-4


def test_loss_pvalue_is_the_binomial_tail():
    assert mesh.pair_pvalue(np.empty(0), 1000, 0, "loss", 0.01) == 1.0
    # 25 lost of 1000 at 1 %: P(Bin(1000, 0.01) >= 25), summed term by term here
    tail = sum(math.comb(1000, k) * 0.01 ** k * 0.99 ** (1000 - k) for k in range(25, 1001))
    assert mesh.pair_pvalue(np.empty(0), 1000, 25, "loss", 0.01) == pytest.approx(tail, rel=1e-9)
    assert mesh.pair_pvalue(np.empty(0), 600, 600, "rtt.p99", LIMIT) == 0.0   # nothing answered


def _check(pair, rtts, lost=0, limit=LIMIT, metric="rtt.p99"):
    if metric == "loss":
        est = proportion(lost, len(rtts) + lost)
    else:
        est = percentile_estimate(np.sort(rtts), 99)
    return mesh.PairCheck(pair, metric, limit, "o", est, mesh.pair_pvalue(rtts, len(rtts) + lost, lost, metric, limit))


def test_holm_keeps_a_healthy_mesh_of_2016_pairs_quiet_and_still_finds_the_slow_pair():
    rng = np.random.default_rng(3)
    fails = 0
    for rep in range(20):
        checks = [_check((f"n{i}", "x"), _pair(rng, SCALE * 0.5)) for i in range(2015)]
        checks.append(_check(("slow", "x"), _pair(rng, SCALE * 2)))
        mesh.judge_pairs(checks, 0.01)
        fails += sum(c.verdict == mesh.FAIL for c in checks[:-1])
        assert checks[-1].verdict == mesh.FAIL
    assert fails == 0
    assert sum(c.verdict == mesh.PASS for c in checks) > 1900     # healthy pairs pass, not only "not fail"


def test_verdict_fail_below_alpha_after_holm_pass_when_the_ci_meets_it_else_inconclusive():
    def c(lo, hi, p):
        return mesh.PairCheck(("a", "b"), "rtt.p99", LIMIT, "o", Estimate((lo + hi) / 2, lo, hi, 600), p)
    checks = [c(0.0008, 0.0009, 0.9), c(0.0009, 0.0011, 0.3), c(0.0012, 0.002, 0.001), c(0.0012, 0.002, 0.004)]
    mesh.judge_pairs(checks, 0.01)
    # Holm: 0.001 x 4 = 0.004 < 0.01 fails; 0.004 x 3 = 0.012 does not, though its CI is above the limit
    assert [x.verdict for x in checks] == [mesh.PASS, mesh.INCONCLUSIVE, mesh.FAIL, mesh.INCONCLUSIVE]
    assert [x.p_adjusted for x in checks] == pytest.approx([0.9, 0.6, 0.004, 0.012])


def test_over_pairs_is_the_nearest_rank_quantile_of_the_pairs_and_of_their_bounds():
    ests = [Estimate(v, v - 1, v + 1, 100) for v in range(1, 101)]
    e = mesh.over_pairs(ests, 99)
    assert (e.value, e.lo, e.hi, e.n) == (99, 98, 100, 100)
    assert mesh.over_pairs(ests, 100).value == 100
    assert math.isnan(mesh.over_pairs([], 99).value)


def _spec(objectives: str):
    return slo_mod.parse(__import__("yaml").safe_load("version: 1\nobjectives:\n" + objectives), "slo.yaml")


def test_zone_selectors_match_mesh_pairs_only_and_mesh_metrics_only_the_mesh():
    spec = _spec("  - name: cross\n    select: {zones: cross}\n    thresholds: {rtt.p99: 5ms, mesh.p99.rtt.p99: 3ms, "
                 "mesh.max.loss: 1%}\n")
    pair = {"protocol": "udp", "placement": "cross-node", "profile": "1k", "zones": "cross", "zone": "a~b"}
    assert [t.metric for t in spec.thresholds_for(pair)] == ["rtt.p99"]
    assert [t.metric for t in spec.thresholds_for({**pair, "study": "mesh"})] == ["mesh.p99.rtt.p99", "mesh.max.loss"]
    assert spec.thresholds_for({**pair, "zones": "same"}) == []
    scenario = {"protocol": "udp", "placement": "cross-node", "profile": "1k"}
    assert spec.thresholds_for(scenario) == [] and not spec.selects(scenario)
    assert slo_mod.unit_of("mesh.max.loss") == "1" and slo_mod.unit_of("mesh.p99.rtt.p99") == "s"


@pytest.mark.parametrize("objective, needle", [
    ("    thresholds: {mesh.p99.ipdv.p99: 3ms}\n", "mesh.p99.ipdv.p99"),
    ("    thresholds: {mesh.p99.loss: 3ms}\n", "3ms"),
    ("    select: {zonez: cross}\n    thresholds: {rtt.p99: 3ms}\n", "zonez"),
])
def test_bad_mesh_keys_are_one_line(objective, needle):
    with pytest.raises(SpecError) as e:
        _spec("  - name: x\n" + objective)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_pair_whose_sender_fell_behind_is_off_pace_by_the_runners_limit():
    from netslo.studies.mesh import measure

    def pr(pair, lag):
        return measure.PairResult(pair, {}, np.empty(0), 10, 0, {}, 10, 0, lag)
    result = measure.MeshResult(None, "netns", "bridge")
    result.pairs = {("a", "b"): pr(("a", "b"), 0.0009), ("a", "c"): pr(("a", "c"), 0.0021), ("b", "c"): pr(("b", "c"), 0.0)}
    assert measure.off_pace(result, 0.002) == [("a", "c")]          # limit: one send period, 2 ms
    # every 0.5 ms: a lag of 0.9 ms is past the period but within the 1 ms floor
    assert measure.off_pace(result, 0.0005) == [("a", "c")]
    assert measure.off_pace(result, 0.0002) == [("a", "c")]
    result.pairs[("a", "b")].lag = 0.0011
    assert measure.off_pace(result, 0.0005) == [("a", "b"), ("a", "c")]
