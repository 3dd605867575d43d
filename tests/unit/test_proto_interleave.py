"""Interleaved measurement order and the P50 shift (no namespaces: a fake cluster)."""

import numpy as np

from netslo.stats import samples
from netslo.studies.interleave import interleaved, p50_shift


class FakeCluster:
    def __init__(self):
        self.calls = []

    def probe(self, client, spec):
        self.calls.append(spec)
        rows = samples.empty(50)
        rows["send_ns"] = 0
        rows["recv_ns"] = np.random.default_rng(len(self.calls)).integers(1000, 2000, 50) + (
            100_000 if spec == "slow" else 0)
        return samples.SampleSet(rows, {})


def test_rounds_rotate_so_no_alternative_is_always_first():
    c = FakeCluster()
    runs = interleaved(c, None, {"a": "a", "b": "b", "c": "c"}, rounds=3)
    assert c.calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {k: len(v) for k, v in runs.items()} == {"a": 150, "b": 150, "c": 150}


def test_shift_ci_excludes_zero_only_for_a_real_difference():
    c = FakeCluster()
    runs = interleaved(c, None, {"fast": "fast", "also": "also", "slow": "slow"}, rounds=2)
    d = p50_shift(runs["fast"], runs["slow"])
    assert d.lo > 90e-6 and d.hi < 110e-6
    same = p50_shift(runs["fast"], runs["also"])
    assert same.lo <= 0 <= same.hi


def _rows(rtt_ns, timer_ns):
    rows = samples.empty(200)
    rows["sched_ns"] = np.arange(200) * 3_000_000
    rows["send_ns"] = rows["sched_ns"] + timer_ns
    rows["recv_ns"] = rows["send_ns"] + rtt_ns
    return samples.SampleSet(rows, {})


def _http_judging():
    """(SLO spec with an HTTP rtt.p99 of 30 ms, a fake cluster, the scenario) for ``interleave.judge``."""
    from netslo.slo import spec as slo
    from netslo.slo.scenario import Scenario
    spec = slo.parse({"version": 1, "objectives": [{"name": "h", "select": {"protocol": "http"},
                                                    "thresholds": {"rtt.p99": "30ms"}}]})
    c = FakeCluster()
    c.datapath, c.provider, c.environment = "bridge", "fake", lambda: {}
    return spec, c, Scenario("cross-node", "http", "1k", interval=0.003)


def test_a_failure_during_a_host_stall_is_judged_again_on_fresh_samples():
    from netslo.studies.interleave import judge
    spec, c, scenario = _http_judging()
    stalled = _rows(50_000_000, np.where(np.arange(200) % 50 == 0, 40_000_000, 10_000))
    assert judge(c, scenario, stalled, spec, 0.003).failed                 # no remeasure given: fails
    out = judge(c, scenario, stalled, spec, 0.003, remeasure=lambda: _rows(500_000, 10_000))
    assert not out.failed and "re-measured" in out.notes[0]
    slow = _rows(50_000_000, 10_000)                                       # slow without a stall: stays failed
    assert judge(c, scenario, slow, spec, 0.003, remeasure=lambda: _rows(500_000, 10_000)).failed


def test_samples_whose_sender_fell_behind_are_taken_again_and_stay_an_error_when_it_never_keeps_pace():
    import pytest

    from netslo.slo import runner
    from netslo.studies.interleave import judge
    spec, c, scenario = _http_judging()
    lagging = _rows(500_000, 10_000_000)                                  # every send 10 ms late: off pace
    with pytest.raises(runner.OffPace, match=r"\(measurement 1\)$"):     # no remeasure given
        judge(c, scenario, lagging, spec, 0.003)
    out = judge(c, scenario, lagging, spec, 0.003, remeasure=lambda: _rows(500_000, 10_000))
    assert not out.failed and out.notes[0].startswith("re-measured: in the previous samples the probe could not keep")
    with pytest.raises(runner.OffPace, match=r"\(measurement 4\)\. Before: re-measured.*; re-measured.*; re-measured"):
        judge(c, scenario, lagging, spec, 0.003, remeasure=lambda: _rows(500_000, 10_000_000))
