"""Regression against a baseline of several runs (run-spread mode and the gate index), on synthetic
runs whose run-to-run noise and injected shifts are known (no cluster needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netslo.report import regression as reg
from netslo.report import run_spread
from netslo.stats.samples import SampleSet, empty

TESTS = [f"netslo/gate/test_latency.py::test_latency_slo[t{k:02d}]" for k in range(8)]


def samples(rng, median: float, n: int = 1000, loss: float = 0.0, add: float = 0.0,
            timer: float = 30e-6) -> SampleSet:
    """Lognormal RTTs (sigma 0.5) around ``median`` s on a 2 ms schedule, optionally + ``add`` s and
    with a random ``loss`` fraction lost; the sender is ``timer`` s (x U(0.8, 1.2)) late."""
    rows = empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * 2_000_000
    rows["send_ns"] = rows["sched_ns"] + (timer * rng.uniform(0.8, 1.2, n) * 1e9).astype(np.int64)
    rtt = median * rng.lognormal(0.0, 0.5, n) + add
    rows["recv_ns"] = rows["send_ns"] + (rtt * 1e9).astype(np.int64)
    rows["arrival"] = np.arange(n)
    lost = rng.random(n) < loss
    rows["recv_ns"][lost] = -1
    rows["arrival"][lost] = -1
    return SampleSet(rows, {"protocol": "udp"})


def runs(seed: int, count: int, run_sd: float, factor: float = 1.0, tests=TESTS, **kw) -> reg.Run:
    """``count`` sessions of ``tests``; each test's median moves by exp(N(0, run_sd)) per session."""
    rng = np.random.default_rng(seed)
    out = reg.Run()
    for j in range(count):
        out.sources.append(f"run{j}")
        out.environment.append({"run_id": f"r{seed}-{j}"})
        for k, t in enumerate(tests):
            median = 100e-6 * (1 + 0.2 * k) * math.exp(rng.normal(0.0, run_sd)) * factor
            out.add(t, samples(rng, median, **kw))
    return out


def test_prediction_is_a_student_t_on_the_log_scale():
    p = run_spread.Prediction.of([100e-6, 110e-6, 90e-6, 105e-6, 95e-6])
    logs = np.log([100e-6, 110e-6, 90e-6, 105e-6, 95e-6])
    assert p.runs == 5 and p.center == pytest.approx(math.exp(logs.mean()))
    assert p.spread == pytest.approx(logs.std(ddof=1))
    assert p.p_above(p.center, 0.0) == pytest.approx(0.5)
    lo, hi = p.band(0.95)
    assert lo < 90e-6 and hi > 110e-6                       # a prediction band is wider than the runs
    assert p.p_above(p.flag_above(0.0, 0.01), 0.0) == pytest.approx(0.01, rel=1e-6)
    assert run_spread.Prediction.of([1e-4]) is None
    assert run_spread.Prediction.of([1e-4, 1e-4, 1e-4]).spread == run_spread.MIN_SPREAD


def test_loss_p_is_an_exact_binomial_tail():
    assert run_spread.loss_p(0, 10000, 0, 1000, 0.001) == 1.0
    assert run_spread.loss_p(0, 10000, 5, 1000, 0.001) == pytest.approx(0.00365, abs=2e-4)
    assert run_spread.loss_p(10, 10000, 5, 1000, 0.001) > run_spread.loss_p(0, 10000, 5, 1000, 0.001)


def test_three_or_more_baseline_runs_switch_to_run_spread_and_add_the_gate_index():
    rep = reg.compare(runs(1, 5, 0.05), runs(2, 1, 0.05))
    modes = {c.mode for c in rep.comparisons}
    assert modes == {reg.SPREAD}
    index = [c for c in rep.comparisons if c.test.startswith(run_spread.INDEX_TEST)]
    assert sorted(c.metric for c in index) == ["loss", "rtt.p50", "rtt.p99"]
    assert all(c.runs_baseline == 5 for c in index)
    two = reg.compare(runs(1, 2, 0.05), runs(2, 1, 0.05), reg.Policy(n_boot=500))
    assert {c.mode for c in two.comparisons} == {reg.BOOTSTRAP}
    assert not any(c.test.startswith(run_spread.INDEX_TEST) for c in two.comparisons)


def test_unchanged_runs_of_a_noisy_runner_are_quiet():
    """20 A/A comparisons on a runner whose medians move 20 % between runs: no false alarm
    (expected at most 1 % of comparisons families)."""
    alarms = sum(reg.compare(runs(100 + i, 10, 0.2), runs(500 + i, 1, 0.2)).failed for i in range(20))
    assert alarms <= 1


def test_a_ten_percent_slower_network_is_caught_by_the_gate_index_on_a_quiet_runner():
    """Every test 10 % slower, run-to-run noise 2 %: single tests are rarely sure, the index mostly
    is (benchmarks/gate_power.py measures the rate: 98 % with 16 tests and 10 baseline runs)."""
    hits, by_test = 0, 0
    for i in range(10):
        rep = reg.compare(runs(100 + i, 10, 0.02), runs(500 + i, 1, 0.02, factor=1.10))
        hits += any(c.test.startswith(run_spread.INDEX_TEST) and c.metric == "rtt.p50" for c in rep.regressions)
        by_test += sum(not c.test.startswith(run_spread.INDEX_TEST) for c in rep.regressions)
    assert hits >= 7 and by_test <= 10 * len(TESTS) // 4


def test_a_noisy_runner_cannot_see_ten_percent_and_says_how_much_it_can():
    rep = reg.compare(runs(1, 10, 0.3), runs(2, 1, 0.3, factor=1.10))
    assert not rep.failed
    idx = next(c for c in rep.comparisons if c.test.startswith(run_spread.INDEX_TEST) and c.metric == "rtt.p50")
    assert idx.flag_above / idx.baseline > 1.2                 # the smallest flaggable index shift
    md = rep.to_markdown()
    assert "Smallest increase this baseline can flag" in md and "gate index" in md


def test_one_test_one_millisecond_slower_is_named_exactly():
    base = runs(1, 10, 0.05)
    cur = runs(2, 1, 0.05)
    rng = np.random.default_rng(9)
    cur.samples[TESTS[3]] = [samples(rng, 100e-6 * 1.6, add=1e-3)]
    rep = reg.compare(base, cur)
    flagged = {(c.test, c.metric) for c in rep.regressions}
    assert (TESTS[3], "rtt.p50") in flagged and (TESTS[3], "rtt.p99") in flagged
    assert {t for t, _ in flagged} <= {TESTS[3]} | {c.test for c in rep.comparisons
                                                    if c.test.startswith(run_spread.INDEX_TEST)}


def test_half_a_percent_more_loss_everywhere_fails_the_gate():
    rep = reg.compare(runs(1, 10, 0.05), runs(2, 1, 0.05, loss=0.005))
    assert any(c.metric == "loss" and c.test.startswith(run_spread.INDEX_TEST) for c in rep.regressions)


def test_a_test_missing_from_some_baseline_runs_keeps_sessions_aligned():
    base = runs(1, 6, 0.05)
    # drop TESTS[0] from the first two sessions
    keep = [i for i, j in enumerate(base.session_of[TESTS[0]]) if j >= 2]
    base.samples[TESTS[0]] = [base.samples[TESTS[0]][i] for i in keep]
    base.session_of[TESTS[0]] = [base.session_of[TESTS[0]][i] for i in keep]
    rep = reg.compare(base, runs(2, 1, 0.05))
    idx = next(c for c in rep.comparisons if c.test.startswith(run_spread.INDEX_TEST) and c.metric == "rtt.p50")
    assert idx.runs_baseline == 4                               # only the sessions holding every test
    assert next(c for c in rep.comparisons if c.test == TESTS[0] and c.metric == "rtt.p50").runs_baseline == 4


def test_a_busier_host_sets_aside_growth_within_its_own_timer_growth_but_not_beyond():
    base = runs(1, 10, 0.05)
    rng = np.random.default_rng(4)
    busy = runs(2, 1, 0.05)
    busy.samples[TESTS[2]] = [samples(rng, 100e-6 * 1.4 * 2.5, timer=90e-6)]      # 2.5x slower, sender 3x late
    rep = reg.compare(base, busy)
    v = {c.metric: c.verdict for c in rep.comparisons if c.test == TESTS[2]}
    assert v["rtt.p50"] == reg.HOST_NOISE and not rep.failed
    busy.samples[TESTS[2]] = [samples(rng, 100e-6 * 1.4 * 20, timer=90e-6)]       # 20x: not the host
    rep = reg.compare(base, busy)
    assert {c.metric for c in rep.regressions if c.test == TESTS[2]} >= {"rtt.p50"}


def _one_test_rerun(seed: int, test: str, **kw) -> reg.Run:
    rerun = reg.Run()
    rerun.add(test, samples(np.random.default_rng(seed), 100e-6 * (1 + 0.2 * TESTS.index(test)), **kw))
    return rerun


def test_a_fluke_that_the_re_measurement_does_not_repeat_is_not_confirmed_and_does_not_fail():
    base = runs(1, 10, 0.03)
    cur = runs(2, 1, 0.03)
    slow = TESTS[3]
    cur.samples[slow] = [samples(np.random.default_rng(5), 140e-6, add=1e-3)]   # one slow measurement
    first = reg.compare(base, cur)
    assert first.failed and reg.suspected(first) == [slow]
    rep = reg.confirm(first, _one_test_rerun(6, slow))                      # the repeat is normal again
    assert not rep.failed
    flagged = [c for c in rep.comparisons if c.verdict == reg.NOT_CONFIRMED]
    assert {c.test for c in flagged} >= {slow} and all(c.confirm is not None for c in flagged)
    assert sorted(rep.rerun.samples) == [slow] and "Not confirmed" in rep.to_markdown()
    assert rep.to_json()["rerun"] == [slow]


def test_a_regression_that_the_re_measurement_repeats_still_fails_with_both_values():
    base = runs(1, 10, 0.03)
    cur = runs(2, 1, 0.03)
    slow = TESTS[3]
    cur.samples[slow] = [samples(np.random.default_rng(5), 140e-6, add=1e-3)]
    rep = reg.confirm(reg.compare(base, cur), _one_test_rerun(6, slow, add=1e-3))
    named = [c for c in rep.regressions if not c.test.startswith(run_spread.INDEX_TEST)]
    assert rep.failed and {c.test for c in named} == {slow}
    assert all(c.confirm[0] > 1e-3 for c in named if c.metric.startswith("rtt"))
    assert not any(c.verdict == reg.NOT_CONFIRMED for c in rep.comparisons)


def test_tests_not_re_measured_keep_their_verdict():
    base = runs(1, 10, 0.03)
    cur = runs(2, 1, 0.03)
    cur.samples[TESTS[3]] = [samples(np.random.default_rng(5), 140e-6, add=1e-3)]
    rep = reg.confirm(reg.compare(base, cur), _one_test_rerun(6, TESTS[0]))   # another test re-measured
    assert rep.failed and TESTS[3] in {c.test for c in rep.regressions}
