"""slo-qos.yaml: an SLO file plus a validated qos section; one-line errors naming the field."""

from pathlib import Path

import pytest
import yaml

from netslo.core.errors import SpecError
from netslo.studies.qos import spec

ROOT = Path(__file__).resolve().parents[2]
DOC = yaml.safe_load((ROOT / "netslo" / "gate" / "slo-qos.yaml").read_text())


def test_shipped_file_loads():
    s = spec.load(ROOT / "netslo" / "gate" / "slo-qos.yaml")
    assert s.for_prefix("priority").objectives[0].name == "priority.ef"
    assert s["bandwidth"]["egress"] == 50e6 and s["congestion"]["loss"] == (0.01, 0.03)
    assert s.policy.class_of(46).name == "ef"
    assert s["dscp"]["marks"] == (46, 34, 8)


def test_defaults_when_qos_is_missing():
    s = spec.parse({k: v for k, v in DOC.items() if k != "qos"})
    assert s["bufferbloat"]["algorithms"] == ("cubic", "bbr", "reno") and s.policy.link_bits == 20e6


def _bad(path, value):
    doc = yaml.safe_load(yaml.safe_dump(DOC))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize("path,value,field", [
    (("qos", "bandwidth", "egress"), "50mbit", "qos.bandwidth.egress"),
    (("qos", "bandwidth", "tolerance"), "0.1", "qos.bandwidth.tolerance"),
    (("qos", "bandwidth", "steady_from"), "4s", "qos.bandwidth.steady_from"),
    (("qos", "congestion", "algorithms"), ["cubic", "vegas"], "qos.congestion.algorithms[1]"),
    (("qos", "congestion", "loss"), ["60%"], "qos.congestion.loss[0]"),
    (("qos", "dscp", "marks"), ["EF", "XX"], "qos.dscp.marks[1]"),
    (("qos", "bufferbloat", "count"), 5, "qos.bufferbloat.count"),
    (("qos", "priority", "link"), "fast", "qos.priority.link"),
    (("qos", "nonsense"), {}, "qos.nonsense"),
    (("qos", "netem", "colour"), 1, "qos.netem.colour"),
    (("qos", "netem", "bbr_duration"), "1s", "qos.netem.bbr_duration"),
    (("objectives",), [{"name": "x", "thresholds": {"rtt.p99": "5"}}], "objectives[0].thresholds.rtt.p99"),
])
def test_errors_name_field_value_expected(path, value, field):
    with pytest.raises(SpecError) as e:
        spec.parse(_bad(path, value), "slo-qos.yaml")
    msg = str(e.value)
    assert msg.startswith(f"slo-qos.yaml: {field}: value") and "expected" in msg and "\n" not in msg


def test_unknown_prefix(tmp_path):
    with pytest.raises(SpecError, match="at least one objective"):
        spec.parse(DOC).for_prefix("nope")


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(SpecError, match="readable"):
        spec.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: [1\n")
    with pytest.raises(SpecError, match="valid YAML"):
        spec.load(bad)
