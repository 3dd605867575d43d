"""The verdict policy without a network: samples needed per percentile, insufficient checks, missing
data, capability, skip categories and the session tally."""

import math

import numpy as np
import pytest

from netslo.core.errors import SpecError
from netslo.report import tally as tally_mod
from netslo.slo import measurable, skips
from netslo.slo import spec as slo_mod
from netslo.stats.analysis import Estimate, percentile_ci_ranks, percentile_estimate


@pytest.mark.parametrize("metric,need", [("rtt.p50", 6), ("rtt.p90", 36), ("rtt.p99", 368), ("rtt.p99.9", 3688),
                                         ("loss", 1), ("rtt.max", 1)])
def test_samples_needed_is_the_first_n_with_both_bounds(metric, need):
    assert slo_mod.samples_needed(metric, 0.95) == need
    q = slo_mod.percentile_of(metric)
    if q is not None:   # need is the first n with both ranks inside 1..n, and need-1 is not
        lo, hi = percentile_ci_ranks(need, q, 0.95)
        assert 1 <= lo and hi <= need
        lo, hi = percentile_ci_ranks(need - 1, q, 0.95)
        assert lo < 1 or hi > need - 1


def _threshold(metric="rtt.p99", limit=1.0):
    return slo_mod.Threshold(metric, limit, f"{limit}s", "o")


def test_an_unbounded_inconclusive_check_is_insufficient_never_a_point_pass():
    est = percentile_estimate(np.sort(np.full(20, 0.001)), 99.0)
    assert math.isinf(est.hi)
    c = slo_mod.decide(est, _threshold(), 0.95)
    assert c.verdict == slo_mod.INSUFFICIENT
    assert "n=20" in c.line() and "needs at least 368" in c.line()


def test_a_bounded_inconclusive_check_is_still_decided_on_the_point_estimate():
    c = slo_mod.decide(Estimate(0.9, 0.8, 1.1, 1000), _threshold(), 0.95)
    assert c.verdict == slo_mod.PASS and c.by_point


def test_a_lower_bound_above_the_threshold_fails_even_with_few_samples():
    c = slo_mod.decide(Estimate(3.0, 2.0, math.inf, 20), _threshold(), 0.95)
    assert c.verdict == slo_mod.FAIL


def test_missing_data_fails_with_the_reason():
    c = slo_mod.missing(_threshold("owd_up.p50"), measurable.missing_reason("owd_up.p50", {"sent": 10, "received": 0}))
    assert c.verdict == slo_mod.FAIL and "no answered requests (loss 100%)" in c.line()


@pytest.mark.parametrize("metric,protocol,shared,why", [
    ("owd_up.p50", "udp", False, "one clock"), ("owd_up.p50", "mqtt-qos1", True, "no responder timestamps"),
    ("loss_up", "tcp-rr", True, "only udp"), ("loss_up", "udp", False, None), ("rtt.p99", "mqtt-qos0", False, None)])
def test_capability_is_known_before_measuring(metric, protocol, shared, why):
    got = measurable.why_unmeasurable(metric, protocol, shared)
    assert (got is None) if why is None else (why in got)


def test_skip_categories_round_trip_and_bad_names_are_one_line_errors():
    assert skips.category_of(skips.reason("tool", "x")) == "tool"
    assert skips.category_of("Skipped: netslo[needs_netem]: y") == "needs_netem"
    assert skips.category_of("some other skip") is None
    assert skips.parse_allowed(["tool,nodes", "needs_netem"], "f") == {"tool", "nodes", "needs_netem"}
    with pytest.raises(SpecError, match="f: value 'netem' — expected one of"):
        skips.parse_allowed(["netem"], "f")


def test_tally_green_only_when_everything_was_measured_and_met():
    t = tally_mod.Tally(frozenset({"limitation", "tool"}))
    t.record("a", tally_mod.PASSED)
    t.skip("b", skips.reason("tool", "no iperf3"))
    assert t.green and t.counts()["skipped-expected"] == 1
    t.skip("c", "a skip nobody declared")
    assert not t.green and "1 skipped-unexpected" in t.headline()
    t2 = tally_mod.Tally()
    t2.record("a", tally_mod.PASSED)
    t2.record("a", tally_mod.ERRORED, "teardown: qdisc still there")   # a teardown error beats the pass
    assert not t2.green and t2.entries["a"].status == tally_mod.ERRORED
    assert not tally_mod.Tally().green     # nothing ran is not green


def test_not_gated_tests_are_listed_apart_and_never_make_a_gate_green():
    t = tally_mod.Tally(frozenset({"limitation", "not_gated"}))
    t.not_gated["m.py::test_http"] = "not gated: no objective of slo.yaml selects them (gate: selected-only)"
    t.skip("m.py::test_policy", skips.reason("not_gated", "study policy: no objective of slo.yaml selects it"))
    assert not t.green                                    # nothing judged
    t.record("m.py::test_udp", tally_mod.PASSED)
    assert t.green and t.headline() == "✅ gate green: 1 passed, 1 skipped-expected, 1 not gated"
    md = t.markdown()
    assert "Skipped, declared expected" not in md
    listed = md.split("Not gated (the SLO file gates only what it selects):")[1]
    assert "`m.py::test_http`" in listed and "`m.py::test_policy`" in listed
    assert set(t.to_json()["not_gated"]) == {"m.py::test_http", "m.py::test_policy"}


def test_slo_file_declares_skips():
    spec = slo_mod.parse({"version": 1, "allow_skips": ["needs_netem"],
                          "objectives": [{"name": "o", "thresholds": {"loss": "1%"}}]})
    assert spec.allow_skips == {"needs_netem"}
    with pytest.raises(SpecError, match="allow_skips"):
        slo_mod.parse({"version": 1, "allow_skips": ["everything"],
                       "objectives": [{"name": "o", "thresholds": {"loss": "1%"}}]})


def test_validate_warns_when_max_samples_cannot_bound_a_threshold():
    spec = slo_mod.parse({"version": 1, "defaults": {"samples": 100, "max_samples": 300},
                          "objectives": [{"name": "o", "thresholds": {"rtt.p99": "1ms", "rtt.p50": "1ms"}}]})
    (w,) = slo_mod.sample_warnings(spec)
    assert "rtt.p99 needs at least 368" in w and "max_samples is 300" in w
