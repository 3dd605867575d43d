"""Regression report: the block bootstrap, Holm, the verdicts and what regression.md/json name,
on synthetic sample sets with known shifts (no cluster needed)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from netslo.core.errors import SpecError
from netslo.report import regression as reg
from netslo.report.series import series
from netslo.stats.analysis import analyze
from netslo.stats.samples import SampleSet, empty

INTERVAL_NS = 2_000_000
TEST_A = "netslo/gate/test_latency.py::test_latency_slo[same-node-udp-1k]"
TEST_B = "netslo/gate/test_latency.py::test_latency_slo[cross-node-udp-1k]"


def make_samples(rtt_s: np.ndarray, *, lost: np.ndarray | None = None, timer_s: np.ndarray | None = None,
                 run_id: str = "r") -> SampleSet:
    """A SampleSet on a 2 ms schedule with the given RTTs (s), lost mask and send-timer errors (s)."""
    n = len(rtt_s)
    rows = empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * INTERVAL_NS
    timer = np.full(n, 30e-6) if timer_s is None else timer_s
    rows["send_ns"] = rows["sched_ns"] + (timer * 1e9).astype(np.int64)
    rows["recv_ns"] = rows["send_ns"] + (np.asarray(rtt_s) * 1e9).astype(np.int64)
    rows["arrival"] = np.arange(n)
    if lost is not None:
        rows["recv_ns"][lost] = -1
        rows["arrival"][lost] = -1
    rows["req_bytes"] = rows["resp_bytes"] = 1000
    return SampleSet(rows, {"protocol": "udp", "shared_clock": False, "run": run_id})


def lognormal(seed: int, n: int = 1000, median: float = 100e-6, sigma: float = 0.5) -> np.ndarray:
    return median * np.random.default_rng(seed).lognormal(0.0, sigma, n)


def run_of(**tests) -> reg.Run:
    r = reg.Run(environment=[{"provider": "netns (emulated pod network)", "run_id": "x"}], sources=["mem"])
    for test, s in tests.items():
        r.add(test, s)
    return r


FAST = reg.Policy(n_boot=1000)


# ---- the bootstrap machinery --------------------------------------------------------------------

@pytest.mark.parametrize("n,block", [(150, 1), (1000, 50), (1000, 1)])
def test_block_quantiles_equal_brute_force_resamples(n, block):
    x = lognormal(1, n)
    side = reg.BlockSide([x], block)
    rng = np.random.default_rng(2)
    counts = side.counts(rng, 200)
    fast = side.quantiles(counts, 99.0)
    brute = [reg.nearest_rank(np.repeat(x, c.astype(int)[side.block_of]), 99.0) for c in counts]
    assert np.array_equal(fast, np.array(brute))
    means = side.means(counts)
    brute_means = [np.repeat(x, c.astype(int)[side.block_of]).mean() for c in counts]
    assert np.allclose(means, brute_means)


def test_large_sides_are_grouped_and_stay_close_to_exact():
    x = lognormal(3, 60_000)
    side = reg.BlockSide([x], 50)
    assert side.n_blocks <= reg.MAX_BLOCKS and len(side.group_start) == reg.GROUPS
    counts = side.counts(np.random.default_rng(4), 50)
    fast = side.quantiles(counts, 99.0)
    brute = np.array([reg.nearest_rank(np.repeat(x, c.astype(int)[side.block_of]), 99.0) for c in counts])
    assert np.max(np.abs(fast - brute) / brute) < 0.02   # within one rank group of 30 samples


def test_blocks_never_span_two_runs():
    side = reg.BlockSide([np.ones(130), np.ones(70)], 50)
    assert side.n_blocks == 3 + 2
    assert set(side.block_of[:130]) == {0, 1, 2} and set(side.block_of[130:]) == {3, 4}


def test_holm_adjustment():
    assert reg.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert reg.holm([]) == []


def test_series_match_analyze_percentiles():
    s = make_samples(lognormal(5), lost=np.isin(np.arange(1000), [3, 500, 501]))
    a = analyze(s)
    for name in ("rtt", "ipdv", "pdv", "timer_error"):
        assert reg.nearest_rank(series(s, name), 99.0) == pytest.approx(a.metrics[f"{name}.p99"].value)
    assert series(s, "loss").mean() == pytest.approx(a.metrics["loss"].value)


# ---- verdicts on known shifts -------------------------------------------------------------------

def test_unchanged_distribution_is_no_regression():
    rep = reg.compare(run_of(**{TEST_A: make_samples(lognormal(10))}),
                      run_of(**{TEST_A: make_samples(lognormal(11))}), FAST)
    assert not rep.failed
    assert {c.metric for c in rep.comparisons} == {"rtt.p50", "rtt.p99", "loss"}
    assert all(c.verdict == reg.UNCHANGED for c in rep.comparisons)


def test_fivefold_slower_test_is_named_exactly():
    base = run_of(**{TEST_A: make_samples(lognormal(10)), TEST_B: make_samples(lognormal(12))})
    cur = run_of(**{TEST_A: make_samples(lognormal(11)), TEST_B: make_samples(5.0 * lognormal(13))})
    rep = reg.compare(base, cur, FAST)
    assert {(c.test, c.metric) for c in rep.regressions} == {(TEST_B, "rtt.p50"), (TEST_B, "rtt.p99")}
    r = next(c for c in rep.regressions if c.metric == "rtt.p50")
    assert r.rel == pytest.approx(4.0, abs=0.4) and r.delta_lo > r.allowed
    assert r.p_adj < 0.05 and r.p_mw < 1e-6 and r.a12 > 0.9


def test_shift_below_the_practical_effect_is_not_a_regression():
    """+40 %: clearly significant with 1000 samples, but below the default allowed effect (x2)."""
    rep = reg.compare(run_of(**{TEST_A: make_samples(lognormal(10))}),
                      run_of(**{TEST_A: make_samples(1.4 * lognormal(11))}), FAST)
    p50 = next(c for c in rep.comparisons if c.metric == "rtt.p50")
    assert p50.delta_lo > 0 and p50.p_mw < 1e-6          # the shift is real ...
    assert not rep.failed                                  # ... and smaller than what matters
    strict = reg.compare(run_of(**{TEST_A: make_samples(lognormal(10))}),
                         run_of(**{TEST_A: make_samples(1.4 * lognormal(11))}),
                         reg.Policy(n_boot=1000, min_effect_rel=0.1, min_effect_abs=1e-6))
    assert {c.metric for c in strict.regressions} >= {"rtt.p50"}


def test_improvement_is_reported_not_failed():
    """1 ms -> 0.2 ms: beyond the allowed drop (half the baseline, the mirror of doubling)."""
    rep = reg.compare(run_of(**{TEST_A: make_samples(lognormal(10, median=1e-3))}),
                      run_of(**{TEST_A: make_samples(0.2 * lognormal(11, median=1e-3))}), FAST)
    assert not rep.failed
    assert next(c for c in rep.comparisons if c.metric == "rtt.p50").verdict == reg.IMPROVED


def test_loss_regression_uses_its_own_floor():
    n = 2000
    few = np.zeros(n, bool)
    few[::500] = True                      # 0.2 % loss: below the 0.5 pp floor
    many = np.zeros(n, bool)
    many[::20] = True                      # 5 % loss
    rtt = lognormal(10, n)
    rep_few = reg.compare(run_of(**{TEST_A: make_samples(rtt)}), run_of(**{TEST_A: make_samples(rtt, lost=few)}), FAST)
    rep_many = reg.compare(run_of(**{TEST_A: make_samples(rtt)}), run_of(**{TEST_A: make_samples(rtt, lost=many)}), FAST)
    assert not rep_few.failed
    assert [(c.metric, c.unit) for c in rep_many.regressions] == [("loss", "1")]


def test_too_few_samples_for_p99_is_insufficient_and_outside_the_family():
    rep = reg.compare(run_of(**{TEST_A: make_samples(lognormal(10, 300))}),
                      run_of(**{TEST_A: make_samples(10 * lognormal(11, 300))}), FAST)
    v = {c.metric: c.verdict for c in rep.comparisons}
    assert v["rtt.p99"] == reg.INSUFFICIENT and v["rtt.p50"] == reg.REGRESSED


def bursty(seed: int, n: int = 1000) -> np.ndarray:
    """A quiet path plus host stalls: a few 40-120 ms bursts during which every request is slow."""
    rng = np.random.default_rng(seed)
    x = lognormal(seed, n, 80e-6, 0.3)
    for _ in range(rng.poisson(3)):
        start = rng.integers(0, n - 60)
        x[start:start + rng.integers(20, 60)] += rng.uniform(1e-3, 5e-3)
    return x


def test_blocks_keep_false_alarms_down_on_bursty_data_where_iid_fails():
    """20 A/A pairs of the same bursty process: an i.i.d. bootstrap (block of one request) calls
    many of them regressions; blocks of 0.2 s do not (or rarely)."""
    iid = reg.Policy(n_boot=1000, block_s=0.001, min_effect_rel=0.0, min_effect_abs=1e-6, noise_guard=False)
    blocks = reg.Policy(n_boot=1000, min_effect_rel=0.0, min_effect_abs=1e-6, noise_guard=False)
    alarms = {"iid": 0, "blocks": 0}
    for i in range(20):
        base = run_of(**{TEST_A: make_samples(bursty(100 + 2 * i))})
        cur = run_of(**{TEST_A: make_samples(bursty(101 + 2 * i))})
        alarms["iid"] += reg.compare(base, cur, iid).failed
        alarms["blocks"] += reg.compare(base, cur, blocks).failed
    assert alarms["iid"] >= 5, alarms
    assert alarms["blocks"] <= 2, alarms


def test_busier_host_sets_a_tail_regression_aside_but_not_a_large_one():
    quiet = make_samples(lognormal(10), timer_s=np.full(1000, 30e-6))
    stalls = np.full(1000, 30e-6)
    stalls[::40] = 3e-3                                  # the sender itself was 3 ms late, 2.5 % of the time
    noisy_tail = lognormal(11)
    noisy_tail[::40] += 2.5e-3                           # ... and so were those requests' RTTs
    rep = reg.compare(run_of(**{TEST_A: quiet}), run_of(**{TEST_A: make_samples(noisy_tail, timer_s=stalls)}), FAST)
    p99 = next(c for c in rep.comparisons if c.metric == "rtt.p99")
    assert p99.verdict == reg.HOST_NOISE and not rep.failed
    assert p99.timer_p99[1] > 2 * p99.timer_p99[0]
    # the same busier host cannot explain a 50x slower path: still a regression
    rep2 = reg.compare(run_of(**{TEST_A: quiet}), run_of(**{TEST_A: make_samples(50 * lognormal(11), timer_s=stalls)}), FAST)
    assert {c.metric for c in rep2.regressions} == {"rtt.p50", "rtt.p99"}
    off = reg.compare(run_of(**{TEST_A: quiet}), run_of(**{TEST_A: make_samples(noisy_tail, timer_s=stalls)}),
                      reg.Policy(n_boot=1000, noise_guard=False))
    assert [c.metric for c in off.regressions] == ["rtt.p99"]


# ---- files, markdown, options --------------------------------------------------------------------

def write_results(directory, tests: dict, run_id: str = "abc") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "samples").mkdir(exist_ok=True)
    records = []
    for i, (test, s) in enumerate(tests.items()):
        name = f"samples/t{i}.npz"
        s.save(directory / name)
        records.append({"test": test, "scenario": test.split("[")[-1][:-1], "samples_file": name})
    (directory / "results.json").write_text(json.dumps({"schema": 1, "environment": {"run_id": run_id, "datapath": "bridge"},
                                                        "results": records}))


def test_load_file_dir_and_dir_of_runs(tmp_path):
    write_results(tmp_path / "runs" / "a", {TEST_A: make_samples(lognormal(1))}, "a")
    write_results(tmp_path / "runs" / "b", {TEST_A: make_samples(lognormal(2)), TEST_B: make_samples(lognormal(3))}, "b")
    one = reg.load(tmp_path / "runs" / "a" / "results.json")
    assert one.sessions == 1 and len(one.samples[TEST_A]) == 1
    both = reg.load(tmp_path / "runs")
    assert both.sessions == 2 and len(both.samples[TEST_A]) == 2 and len(both.samples[TEST_B]) == 1
    with pytest.raises(FileNotFoundError, match="--netslo-baseline: value .*nowhere.* expected a results.json"):
        reg.load(tmp_path / "nowhere")


def test_markdown_and_json_name_exactly_the_regressions(tmp_path):
    base = run_of(**{TEST_A: make_samples(lognormal(10)), TEST_B: make_samples(lognormal(12))})
    cur = run_of(**{TEST_A: make_samples(lognormal(11)), TEST_B: make_samples(5.0 * lognormal(13))})
    rep = reg.compare(base, cur, FAST, "baseline-dir")
    j, m = rep.write(tmp_path)
    doc = json.loads(j.read_text())
    assert doc["verdict"] == "regression"
    assert sorted((r["test"], r["metric"]) for r in doc["regressions"]) == [(TEST_B, "rtt.p50"), (TEST_B, "rtt.p99")]
    md = m.read_text()
    head, _, details = md.partition("<details>")
    assert "❌ 2 regressions in 1 test" in head
    regression_rows = [line for line in head.splitlines() if line.startswith("| `")]
    assert len(regression_rows) == 2 and all(TEST_B in line for line in regression_rows)
    assert TEST_A not in head
    for line in regression_rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[5].startswith("+") and cells[5].endswith("%")          # relative effect
        assert float(cells[7]) < 0.05                                       # Holm-adjusted p
    assert details.count("| `") == 6 and "unchanged" in details


def test_no_regression_markdown(tmp_path):
    rep = reg.compare(run_of(**{TEST_A: make_samples(lognormal(10))}),
                      run_of(**{TEST_A: make_samples(lognormal(11))}), FAST)
    assert "✅ no regression" in rep.to_markdown()
    assert json.loads(json.dumps(rep.to_json()))["regressions"] == []


def test_cli_exit_codes(tmp_path, capsys):
    write_results(tmp_path / "base", {TEST_A: make_samples(lognormal(10))})
    write_results(tmp_path / "same", {TEST_A: make_samples(lognormal(11))})
    write_results(tmp_path / "slow", {TEST_A: make_samples(5 * lognormal(11))})
    assert reg.main(["--baseline", str(tmp_path / "base"), "--current", str(tmp_path / "same"), "--quiet",
                     "--resamples", "500"]) == 0
    assert reg.main(["--baseline", str(tmp_path / "base"), "--current", str(tmp_path / "slow"), "--quiet",
                     "--resamples", "500"]) == 1
    assert (tmp_path / "slow" / "regression.md").exists()
    assert reg.main(["--baseline", str(tmp_path / "nope"), "--current", str(tmp_path / "slow")]) == 2
    assert "expected a results.json" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs,field", [
    ({"metrics": "rtt.p50,latency"}, "--netslo-regression-metrics"),
    ({"metrics": "loss.p99"}, "--netslo-regression-metrics"),
    ({"metrics": "rtt.p100"}, "--netslo-regression-metrics"),
    ({"min_effect": "20"}, "--netslo-regression-min-effect"),
    ({"min_abs": "5"}, "--netslo-regression-min-abs"),
    ({"alpha": "60%"}, "--netslo-regression-alpha"),
    ({"block": "0ms"}, "--netslo-regression-block"),
    ({"n_boot": "10"}, "--netslo-regression-resamples"),
])
def test_bad_policy_options_name_the_option(kwargs, field):
    with pytest.raises(SpecError, match=field):
        reg.policy_from_text(**kwargs)


def test_policy_options_parse():
    p = reg.policy_from_text("rtt.p90,ipdv.p99,loss", "50%", "100us", "1%", "1%", "100ms", "500")
    assert p.metrics == ("rtt.p90", "ipdv.p99", "loss")
    assert (p.min_effect_rel, p.min_effect_abs, p.min_loss_abs, p.alpha, p.block_s, p.n_boot) == \
        pytest.approx((0.5, 100e-6, 0.01, 0.01, 0.1, 500))
    assert p.allowed("rtt.p99", 1e-3) == pytest.approx(0.5e-3)
    assert p.allowed("rtt.p50", 10e-6) == pytest.approx(100e-6)
    assert p.allowed("loss", 0.0) == pytest.approx(0.01)
    assert math.isclose(reg.Policy().min_effect_rel, 1.0)


def test_a_baseline_test_that_stopped_measuring_fails_unless_left_out_on_purpose():
    base = run_of(**{TEST_A: make_samples(lognormal(10)), TEST_B: make_samples(lognormal(12))})
    rep = reg.compare(base, run_of(**{TEST_A: make_samples(lognormal(11))}), FAST)
    assert not rep.regressions and rep.missing == [TEST_B] and rep.failed
    md = rep.to_markdown()
    assert "not measured" in md.splitlines()[0] and f"`{TEST_B}`" in md
    rep.excused = {TEST_B: "deselected"}
    assert rep.missing == [] and not rep.failed
    assert rep.to_json()["excused"] == {TEST_B: "deselected"}


def test_offline_cli_help_works():
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "netslo.report.regression", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "--min-effect" in run.stdout and "100%" in run.stdout, run.stderr


# ---- baselines recorded at other clock points (issue 30) -----------------------------------------

def kernel_samples(app_rtt_s: np.ndarray, kernel_share: float = 0.4) -> SampleSet:
    """``make_samples`` with kernel stamps: the user-space RTT is ``app_rtt_s``, the kernel's
    ``kernel_share`` of it (the rest split between the client's send and receive paths)."""
    s = make_samples(app_rtt_s)
    r = s.rows
    app = (np.asarray(app_rtt_s) * 1e9).astype(np.int64)
    stack = app - (app * kernel_share).astype(np.int64)
    r["send_app_ns"], r["recv_app_ns"] = r["send_ns"], r["recv_ns"]
    r["send_ns"] = r["send_app_ns"] + stack * 3 // 10
    r["recv_ns"] = r["recv_app_ns"] - (stack - stack * 3 // 10)
    s.meta["timestamps"] = "kernel"
    return s


@pytest.mark.parametrize("kernel_side", ["current", "baseline"])
def test_a_baseline_of_the_other_definition_is_converted_and_said(tmp_path, kernel_side):
    """User-space baseline vs kernel current (or the reverse): rtt is compared as rtt_app, which
    both keep, so the same application times are neither an improvement nor a regression (compared
    silently, the kernel's 0.4x of 1 ms would be one of 0.6 ms); one-way delays are refused; both
    reports say so."""
    user, kernel = make_samples(lognormal(10, median=1e-3)), kernel_samples(lognormal(11, median=1e-3))
    base, cur = (user, kernel) if kernel_side == "current" else (kernel, user)
    policy = reg.Policy(n_boot=1000, metrics=("rtt.p50", "rtt.p99", "owd_up.p99", "loss"))
    rep = reg.compare(run_of(**{TEST_A: base}), run_of(**{TEST_A: cur}), policy)
    assert all(c.verdict == reg.UNCHANGED for c in rep.comparisons) and not rep.failed
    assert {c.metric for c in rep.comparisons} == {"rtt.p50", "rtt.p99", "loss"}
    p50 = next(c for c in rep.comparisons if c.metric == "rtt.p50")
    app = lognormal(11 if kernel_side == "current" else 10, median=1e-3)
    assert p50.current == pytest.approx(float(np.quantile(app, 0.5)), rel=0.02)
    note = rep.definitions[TEST_A]
    assert note["converted"] == ["rtt.p50", "rtt.p99"] and note["refused"] == ["owd_up.p99"]
    assert note["baseline" if kernel_side == "baseline" else "current"] == ["kernel"]
    j, m = rep.write(tmp_path)
    assert json.loads(j.read_text())["timestamps_differ"][TEST_A]["refused"] == ["owd_up.p99"]
    assert "other clock points" in m.read_text() and "refused owd_up.p99" in m.read_text()


def test_same_definition_on_both_sides_compares_rtt_itself():
    rep = reg.compare(run_of(**{TEST_A: kernel_samples(lognormal(10))}),
                      run_of(**{TEST_A: kernel_samples(10 * lognormal(11))}), FAST)
    assert not rep.definitions
    p50 = next(c for c in rep.comparisons if c.metric == "rtt.p50")
    assert p50.verdict == reg.REGRESSED
    assert p50.current == pytest.approx(0.4 * 10 * float(np.quantile(lognormal(11), 0.5)), rel=0.02)   # kernel rtt
