"""``python -m netslo slo suggest`` over runs measured here: the file it writes passes every run it came
from (judged again on their saved samples) and fails those runs with 1 ms added to every round trip.

Ten short gate-like sessions on the embedded provider (real namespaces, real probes, results written
by the gate's own ResultsWriter), two scenarios each: persistent TCP same-node and UDP cross-node.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from netslo.core.units import duration
from netslo.providers.netns.cluster import NetnsCluster
from netslo.report import suggest
from netslo.report.results import ResultsWriter
from netslo.slo import runner
from netslo.slo import spec as slo
from netslo.slo.scenario import Scenario
from netslo.stats.samples import SampleSet

RUNS = 10
SCENARIOS = [Scenario("same-node", "tcp-rr", "1k"), Scenario("cross-node", "udp", "1k")]
SOURCE = "team-slo.yaml"
SPEC = slo.parse({"version": 1, "defaults": {"samples": 400, "max_samples": 400, "interval": "1ms", "wait": "300ms"},
                  "objectives": [{"name": "wide", "thresholds": {"rtt.p50": "100ms", "rtt.p99": "1s", "loss": "50%"}}]},
                 SOURCE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """RUNS results directories, each one session of SCENARIOS."""
    root = tmp_path_factory.mktemp("runs")
    with NetnsCluster(nodes=2) as c:
        srv, same, cross = c.add_pod("server", "node0"), c.add_pod("c-same", "node0"), c.add_pod("c-cross", "node1")
        ports = c.start_responders(srv, ("udp", "tcp"))
        for i in range(RUNS):
            writer = ResultsWriter(root / f"run{i:02d}")
            writer.slo_source = SOURCE
            for sc in SCENARIOS:
                out = runner.run(c, same if sc.placement == "same-node" else cross, srv, ports, sc, SPEC)
                writer.add(f"tests/test_team.py::test_path[{sc.id}]", out)
            writer.write()
    return root


def _plus_1ms(s: SampleSet) -> SampleSet:
    rows = s.rows.copy()
    for name in ("recv_ns", "recv_app_ns"):
        got = rows[name] >= 0
        rows[name][got] += 1_000_000
    return SampleSet(rows, dict(s.meta))


def test_suggested_file_passes_its_runs_and_fails_them_one_ms_slower(runs, tmp_path):
    text = subprocess.run([sys.executable, "-m", "netslo", "slo", "suggest", str(runs), "--margin", "1.2x"],
                          check=True, capture_output=True, text=True).stdout
    path = tmp_path / "slo.yaml"
    path.write_text(text)
    spec = slo.load(path)                            # valid, and it extends the shipped objectives
    assert spec.layers[0].endswith("gate/slo.yaml")
    mine = [o for o in spec.objectives if o.name.startswith("baseline-")]
    assert sorted(o.name for o in mine) == ["baseline-cross-node-udp-1k-ipv4", "baseline-same-node-tcp-rr-1k-ipv4"]
    assert f"over {RUNS} run(s)" in text and "x 1.2" in text
    for o in mine:                                   # from the runs' own bounds: tighter than the shipped file
        assert {t.metric for t in o.thresholds} == {"rtt.p50", "rtt.p99", "loss"}
        assert next(t for t in o.thresholds if t.metric == "rtt.p50").limit < 1e-3
    verdicts = suggest.rejudge(runs, spec)
    assert len(verdicts) == RUNS * len(SCENARIOS) and {v for _, v in verdicts} == {slo.PASS}, verdicts
    slower = suggest.rejudge(runs, spec, shift=_plus_1ms)
    assert {v for _, v in slower} == {slo.FAIL}, slower
    # the check can fail the other way too: a margin below the worst bound would not pass every run
    tight = slo.parse({"version": 1, "objectives": [
        {"name": o.name, "select": {k: list(v) for k, v in o.select.items()},
         "thresholds": {t.metric: f"{t.limit * 1e6 / 2:.3f}us" for t in o.thresholds if t.metric.startswith("rtt")}}
        for o in mine]})
    assert slo.FAIL in {v for _, v in suggest.rejudge(runs, tight)}


def test_bounds_round_up_and_bad_input_is_one_line(tmp_path):
    assert suggest.threshold_text("rtt.p50", 63.1e-6 * 1.5) == "95us"
    assert suggest.threshold_text("rtt.p99", 0.0121) == "13ms"
    assert suggest.threshold_text("loss", 0.00184 * 1.5) == "0.28%"
    assert suggest.threshold_text("loss", 0.0) == "0.01%"
    for v in np.random.default_rng(1).uniform(1e-6, 2.0, 200):
        assert duration(suggest.threshold_text("rtt.p50", v)) >= v
    with pytest.raises(slo.SpecError, match=r"^--margin: value '0.8x' — expected a factor >= 1"):
        suggest.margin_of("0.8x")
    run = subprocess.run([sys.executable, "-m", "netslo", "slo", "suggest", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [
        f"netslo: RESULTS: value {str(tmp_path)!r} — expected a results.json file or a directory containing "
        "results.json files (netslo-results/ of past runs)"]
