"""SLO file: schema, shipped file, one-line errors, verdict policy."""

import math
from pathlib import Path

import jsonschema
import pytest
import yaml

from netslo.core.errors import SpecError
from netslo.slo import spec as slo
from netslo.stats.analysis import Estimate

ROOT = Path(__file__).resolve().parents[2]


def test_exported_schema_is_a_valid_json_schema_and_accepts_shipped_file():
    jsonschema.Draft202012Validator.check_schema(slo.json_schema())
    doc = yaml.safe_load((ROOT / "netslo" / "gate" / "slo.yaml").read_text())
    jsonschema.validate(doc, slo.json_schema())
    spec = slo.load(ROOT / "netslo" / "gate" / "slo.yaml")
    assert spec.thresholds_for({"protocol": "udp", "placement": "cross-node", "profile": "1k"})


BAD = [
    ("version: 1\nobjectives: [{name: a, thresholds: {rtt.p99: 5}}]", "objectives[0].thresholds.rtt.p99", "duration"),
    ("version: 1\nobjectives: [{name: a, thresholds: {rtt.p98: 5ms}}]", "rtt.p98", "known metric"),
    ("version: 1\nobjectives: [{name: a, thresholds: {loss: 5ms}}]", "thresholds.loss", "percentage"),
    ("version: 1\nobjectives: [{name: a, thresholds: {loss: 101%}}]", "thresholds.loss", "100%"),
    ("version: 2\nobjectives: [{name: a, thresholds: {loss: 1%}}]", "version", "1"),
    ("version: 1\nobjectivs: []", "objectivs", "keys"),
    ("version: 1\nobjectives: []", "objectives", "at least one"),
    ("version: 1\ndefaults: {samples: 5}\nobjectives: [{name: a, thresholds: {loss: 1%}}]", "defaults.samples", "20"),
    ("version: 1\ndefaults: {interval: 2}\nobjectives: [{name: a, thresholds: {loss: 1%}}]", "defaults.interval", "duration"),
    ("version: 1\ndefaults: {samples: 500, max_samples: 100}\nobjectives: [{name: a, thresholds: {loss: 1%}}]",
     "defaults.max_samples", ">="),
    ("version: 1\nobjectives: [{name: a, select: {proto: udp}, thresholds: {loss: 1%}}]", "select.proto", "keys"),
    ("version: 1\nobjectives: [{name: a, thresholds: {loss: 1%}}, {name: a, thresholds: {loss: 1%}}]", "name", "not used"),
    ("version: 1\nobjectives: [{thresholds: {loss: 1%}}]", "objectives[0]", "name"),
    ("- just a list", "(top level)", "type object"),
]


@pytest.mark.parametrize("text,field,expect", BAD, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD)])
def test_malformed_files_give_one_line_naming_file_field_and_form(tmp_path, text, field, expect):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(SpecError) as e:
        slo.load(f)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(f)) and field in msg and expect in msg, msg


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(SpecError, match="readable YAML file"):
        slo.load(tmp_path / "missing.yaml")
    (tmp_path / "x.yaml").write_text("a: [1,\n")
    with pytest.raises(SpecError, match="valid YAML"):
        slo.load(tmp_path / "x.yaml")


TH = slo.Threshold("rtt.p99", 0.010, "10ms", "o")


@pytest.mark.parametrize("lo,hi,verdict", [(0.001, 0.009, "pass"), (0.011, 0.02, "fail"), (0.009, 0.011, "inconclusive"),
                                           (0.005, 0.010, "pass"), (0.0, math.inf, "inconclusive")])
def test_judge_uses_the_whole_confidence_interval(lo, hi, verdict):
    assert slo.judge(Estimate((lo + min(hi, 1)) / 2, lo, hi, 1000), TH) == verdict


def test_decide_falls_back_to_point_estimate_and_says_so():
    c = slo.decide(Estimate(0.0101, 0.009, 0.011, 3000), TH)
    assert c.verdict == "fail" and c.by_point and "point estimate" in c.line()
    c = slo.decide(Estimate(0.0099, 0.009, 0.011, 3000), TH)
    assert c.verdict == "pass" and c.by_point


def test_selectors_match_globs_and_lists():
    o = slo.Objective("x", {"protocol": ("tcp-*",), "placement": ("same-node", "cross-node")}, ())
    assert o.matches({"protocol": "tcp-rr", "placement": "cross-node"})
    assert not o.matches({"protocol": "udp", "placement": "cross-node"})


def test_udp_sender_default_reaches_udp_probes_only():
    from netslo.providers.base import Pod
    from netslo.slo.runner import probe_spec
    from netslo.slo.scenario import Scenario
    spec = slo.parse({"version": 1, "defaults": {"udp_sender": "native"},
                      "objectives": [{"name": "a", "thresholds": {"rtt.p50": "1ms"}}]})
    server = Pod("srv", "node0", "10.0.0.2")
    ports = {"udp": 7000, "tcp": 7001}
    assert probe_spec(Scenario("cross-node", "udp", "1k"), server, ports, spec.sampling, 10).sender == "native"
    assert probe_spec(Scenario("cross-node", "tcp-rr", "1k"), server, ports, spec.sampling, 10).sender == "python"
    assert slo.parse({"version": 1, "objectives": [{"name": "a", "thresholds": {"rtt.p50": "1ms"}}]}
                     ).sampling.udp_sender == "python"
