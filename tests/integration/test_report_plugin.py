"""The reports plugin inside real pytest sessions: --netslo-baseline fails the session on a regression and
writes regression.md/json and the GitHub step summary; --netslo-benchmark feeds pytest-benchmark so
--benchmark-save/--benchmark-compare-fail work; bad options stop at start-up.

The sessions run a small test file whose ``outcome`` fixture builds a judged Outcome from synthetic
samples (no cluster, no root), with per-scenario slowdowns chosen through the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _report_plugin_args() -> list[str]:
    """``-p netslo.gate.plugin.report`` unless an installed pytest11 entry point already loads it (pytest
    refuses one module registered under two names)."""
    from importlib.metadata import entry_points
    loaded = {ep.value for ep in entry_points(group="pytest11")}
    return [] if "netslo.gate.plugin.report" in loaded else ["-p", "netslo.gate.plugin.report"]

FAKE_TESTS = '''
import os, zlib
import numpy as np
import pytest
from netslo.slo import spec as slo_mod
from netslo.slo.runner import Outcome
from netslo.stats.samples import SampleSet, empty
from netslo.slo.scenario import Scenario
from netslo.stats.analysis import analyze
from netslo.gate.plugin.hooks import OUTCOME
from netslo.gate.plugin.report import record_rerun, suspected_regression

def _scales(name):
    return dict((k, float(v)) for k, v in (p.split("=") for p in os.environ.get(name, "").split(",") if p))


SCALE = _scales("FAKE_SCALE")
RERUN_SCALE = _scales("FAKE_RERUN_SCALE") if "FAKE_RERUN_SCALE" in os.environ else SCALE


def measure(scenario, slo_spec, scale, seed_offset=0):
    n = 1000
    seed = zlib.crc32(scenario.id.encode()) + int(os.environ.get("FAKE_SEED", "0")) + seed_offset
    rng = np.random.default_rng(seed)
    rows = empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * 2_000_000
    rows["send_ns"] = rows["sched_ns"] + 30_000
    rtt = scale.get(scenario.id, 1.0) * 1e5 * rng.lognormal(0, 0.5, n)
    rows["recv_ns"] = rows["send_ns"] + rtt.astype(np.int64)
    rows["arrival"] = np.arange(n)
    s = SampleSet(rows, {"protocol": scenario.protocol})
    a = analyze(s)
    checks = [slo_mod.decide(a.metrics[t.metric], t) for t in slo_spec.thresholds_for(scenario.labels())]
    return Outcome(scenario, s, a, checks, {"provider": "fake", "datapath": "none",
                                            "run_id": os.environ.get("FAKE_SEED", "0")}, 1, 0.1)


@pytest.fixture
def outcome(request, scenario, netslo_slo):
    """Like netslo/gate/plugin/cluster.py's: measure, and measure again when the plugin suspects a regression."""
    o = measure(scenario, netslo_slo, SCALE)
    request.node.stash[OUTCOME] = o
    why = suspected_regression(request.config, request.node.nodeid, o.samples)
    if why:
        record_rerun(request.node, measure(scenario, netslo_slo, RERUN_SCALE, seed_offset=1000), why)
    return o


@pytest.mark.parametrize("scenario", [Scenario("same-node", "udp", "1k"), Scenario("cross-node", "udp", "1k")], ids=str)
def test_fake_slo(outcome):
    outcome.assert_met()


@pytest.mark.parametrize("scenario", [Scenario("same-node", "tcp-rr", "1k")], ids=str)
def test_fake_sweep(request, outcome, netslo_record_outcome):
    """A test that measures twice and reports both: the second one as an extra outcome."""
    netslo_record_outcome(outcome, "first")
    netslo_record_outcome(outcome, "again")
'''

SLO = """version: 1
objectives:
  - name: generous
    select: {protocol: udp}
    thresholds: {rtt.p50: 100ms, rtt.p99: 1s}
"""
SAME = "test_fake.py::test_fake_slo[same-node-udp-1k]"
CROSS = "test_fake.py::test_fake_slo[cross-node-udp-1k]"


@pytest.fixture
def session(tmp_path):
    (tmp_path / "test_fake.py").write_text(FAKE_TESTS)
    (tmp_path / "slo.yaml").write_text(SLO)

    def run(*args, seed: int, scale: str = "", summary: Path | None = None, rerun_scale: str | None = None):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_SEED": str(seed), "FAKE_SCALE": scale}
        if rerun_scale is not None:
            env["FAKE_RERUN_SCALE"] = rerun_scale
        env.pop("GITHUB_STEP_SUMMARY", None)
        if summary is not None:
            env["GITHUB_STEP_SUMMARY"] = str(summary)
        p = subprocess.run([sys.executable, "-m", "pytest", *_report_plugin_args(), "-p", "no:cacheprovider",
                            "--rootdir", str(tmp_path), "--netslo-slo", str(tmp_path / "slo.yaml"), "test_fake.py", "-k", os.environ.get("FAKE_K", "fake_slo"), *args],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout + p.stderr

    return tmp_path, run


def test_baseline_regression_fails_the_session_and_names_the_test(session):
    d, run = session
    code, out = run("--netslo-results", "base", seed=1)
    assert code == 0, out
    summary = d / "step-summary.md"
    code, out = run("--netslo-results", "cur", "--netslo-baseline", "base", seed=2, scale="cross-node-udp-1k=5", summary=summary)
    assert code == 1, out
    assert "2 passed" in out and f"REGRESSION {CROSS} rtt.p50" in out
    doc = json.loads((d / "cur" / "regression.json").read_text())
    assert sorted((r["test"], r["metric"]) for r in doc["regressions"]) == [(CROSS, "rtt.p50"), (CROSS, "rtt.p99")]
    md = (d / "cur" / "regression.md").read_text()
    assert md.startswith("### netslo SLO regression vs baseline: ❌ 2 regressions in 1 test")
    step = summary.read_text()
    assert "### netslo SLO gate: ✅ all 2 SLO tests met their SLOs" in step and "❌ 2 regressions" in step

    assert doc["rerun"] == [CROSS]
    notes = {r["test"]: r["notes"] for r in json.loads((d / "cur" / "results.json").read_text())["results"]}
    assert notes[SAME] == [] and "re-measured for the regression check (suspected: rtt.p50" in notes[CROSS][0]
    code, out = run("--netslo-results", "warn", "--netslo-baseline", "base", "--netslo-regression-warn-only", seed=2,
                    scale="cross-node-udp-1k=5")
    assert code == 0, out
    assert "(warn only)" in out and json.loads((d / "warn" / "regression.json").read_text())["verdict"] == "regression"

    code, out = run("--netslo-results", "same", "--netslo-baseline", "base", seed=3)
    assert code == 0, out
    assert "no regression in 6 comparisons" in out


def test_a_slow_measurement_that_is_normal_when_re_measured_does_not_fail_the_session(session):
    d, run = session
    assert run("--netslo-results", "base", seed=1)[0] == 0
    code, out = run("--netslo-results", "once", "--netslo-baseline", "base", seed=2, scale="cross-node-udp-1k=5",
                    rerun_scale="")
    assert code == 0, out
    assert f"not confirmed (not failed) {CROSS} rtt.p50" in out and "no regression in" in out
    doc = json.loads((d / "once" / "regression.json").read_text())
    assert doc["verdict"] == "no regression" and doc["rerun"] == [CROSS]
    assert "Not confirmed" in (d / "once" / "regression.md").read_text()
    code, out = run("--netslo-results", "off", "--netslo-baseline", "base", "--netslo-regression-confirm", "off", seed=2,
                    scale="cross-node-udp-1k=5", rerun_scale="")
    assert code == 1 and f"REGRESSION {CROSS} rtt.p50" in out, out
    assert json.loads((d / "off" / "regression.json").read_text())["rerun"] == []


def test_baseline_may_be_the_results_dir_the_run_overwrites(session):
    d, run = session
    assert run("--netslo-results", "res", seed=1)[0] == 0
    code, out = run("--netslo-results", "res", "--netslo-baseline", "res", seed=2, scale="same-node-udp-1k=5")
    assert code == 1, out
    assert [r["test"] for r in json.loads((d / "res" / "regression.json").read_text())["regressions"]] == [SAME, SAME]


def test_benchmark_records_latency_for_compare_fail(session):
    d, run = session
    storage = f"file://{d / 'bench'}"
    code, out = run("--netslo-results", "b1", "--netslo-benchmark", "--benchmark-storage", storage,
                    "--benchmark-save", "base", seed=1)
    assert code == 0, out
    saved = json.loads(next((d / "bench").rglob("*base.json")).read_text())
    names = sorted(b["fullname"] for b in saved["benchmarks"])
    assert names == sorted([f"{SAME}::rtt", f"{CROSS}::rtt"])
    same = next(b for b in saved["benchmarks"] if b["fullname"] == f"{SAME}::rtt")
    assert same["stats"]["rounds"] == 1000 and 50e-6 < same["stats"]["median"] < 200e-6   # seconds, raw RTTs
    assert same["group"] == "netslo rtt (s)" and same["extra_info"]["samples"] == 1000

    code, out = run("--netslo-results", "b2", "--netslo-benchmark", "--benchmark-storage", storage,
                    "--benchmark-compare", "0001", "--benchmark-compare-fail", "median:50%", seed=2)
    assert code == 0, out
    code, out = run("--netslo-results", "b3", "--netslo-benchmark", "--benchmark-storage", storage,
                    "--benchmark-compare", "0001", "--benchmark-compare-fail", "median:50%", seed=2,
                    scale="cross-node-udp-1k=3")
    assert code != 0, out
    assert "Performance has regressed" in out and "cross-node-udp-1k" in out


@pytest.mark.parametrize("args,message", [
    (("--netslo-regression-min-effect", "20"), "--netslo-regression-min-effect: value '20'"),
    (("--netslo-baseline", "/nonexistent/runs"), "--netslo-baseline: value '/nonexistent/runs'"),
    (("--netslo-benchmark", "latency"), "--netslo-benchmark: value 'latency'"),
    (("--netslo-allure-severity", "udp=urgent"), "--netslo-allure-severity: value 'udp=urgent'"),
    (("--netslo-regression-confirm", "sometimes"), "--netslo-regression-confirm: value 'sometimes'"),
])
def test_bad_options_stop_at_start_up(session, args, message):
    _, run = session
    code, out = run(*args, seed=1)
    assert code == 4, out
    assert message in out and "passed" not in out


def test_record_outcome_reports_extra_outcomes(session, monkeypatch):
    d, run = session
    monkeypatch.setenv("FAKE_K", "fake_sweep")
    code, out = run("--netslo-results", "r", "--alluredir", "al", seed=1)
    assert code == 0, out
    tests = [r["test"] for r in json.loads((d / "r" / "results.json").read_text())["results"]]
    base = "test_fake.py::test_fake_sweep[same-node-tcp-rr-1k]"
    assert tests == [f"{base}::first", f"{base}::again", base]     # extras during the call, the stashed one after
    result = json.loads(next((d / "al").glob("*-result.json")).read_text())
    steps = {st["name"]: [a["name"] for a in st["attachments"]] for st in result["steps"]}
    assert set(steps) == {"first: pass", "again: pass"}
    assert "first: ECDF of RTT" in steps["first: pass"] and "again: RTT time series" in steps["again: pass"]
    code, out = run("--netslo-results", "r2", "--netslo-baseline", "r", seed=2)
    assert code == 0 and "no regression in 9 comparisons" in out, out
