"""SLO files that layer (``extends``) and gate only what they select (``gate: selected-only``)."""

from pathlib import Path

import pytest

from netslo.core.errors import SpecError
from netslo.slo import spec as slo

SHIPPED = slo.load(Path(slo.shipped_slo("slo.yaml")))
TEAM = """version: 1
extends: netslo
defaults: {samples: 400}
objectives:
  - name: udp-latency          # the shipped objective of this name, replaced in its place
    select: {protocol: udp}
    thresholds: {rtt.p50: 300us, rtt.p99: 2ms}
  - name: team-tcp
    select: {protocol: tcp-rr, placement: cross-node}
    thresholds: {rtt.p99: 1ms}
"""


def _file(tmp_path, text, name="slo.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_extends_netslo_keeps_the_shipped_objectives_and_replaces_same_names_in_place(tmp_path):
    spec = slo.load(_file(tmp_path, TEAM))
    names = [o.name for o in spec.objectives]
    assert names == [o.name for o in SHIPPED.objectives] + ["team-tcp"]
    udp = spec.objectives[names.index("udp-latency")]
    assert {t.metric: t.text for t in udp.thresholds} == {"rtt.p50": "300us", "rtt.p99": "2ms"}
    assert spec.sampling.samples == 400 and spec.sampling.max_samples == SHIPPED.sampling.max_samples
    assert spec.sampling.trials == SHIPPED.sampling.trials          # a default the file does not set
    assert spec.layers == (str(slo.shipped_slo("slo.yaml")), str(tmp_path / "slo.yaml"))
    labels = {"protocol": "http", "placement": "cross-node", "profile": "1k", "family": "ipv4", "datapath": "bridge"}
    assert spec.thresholds_for(labels) == SHIPPED.thresholds_for(labels)   # what the team did not write


def test_without_extends_a_scenario_no_objective_selects_says_how_to_fix_it(tmp_path):
    spec = slo.load(_file(tmp_path, TEAM.replace("extends: netslo\n", "")))
    assert len(spec.objectives) == 2 and spec.gate == slo.GATE_ALL
    hint = spec.not_selected_hint()
    assert "'extends: netslo'" in hint and "'gate: selected-only'" in hint and str(tmp_path / "slo.yaml") in hint


def test_extends_a_file_beside_it_and_a_circle_is_one_line(tmp_path):
    _file(tmp_path, "version: 1\nobjectives: [{name: base, select: {protocol: udp}, thresholds: {loss: 1%}}]\n",
          "base.yaml")
    spec = slo.load(_file(tmp_path, "version: 1\nextends: base.yaml\ngate: selected-only\n"))
    assert [o.name for o in spec.objectives] == ["base"] and spec.gate == slo.GATE_SELECTED_ONLY
    _file(tmp_path, "version: 1\nextends: b.yaml\nobjectives: [{name: a, thresholds: {loss: 1%}}]\n", "a.yaml")
    _file(tmp_path, "version: 1\nextends: a.yaml\nobjectives: [{name: b, thresholds: {loss: 1%}}]\n", "b.yaml")
    with pytest.raises(SpecError, match=r"b\.yaml: extends: value 'a\.yaml' — expected a file that does not "
                                        r"extend this one again"):
        slo.load(tmp_path / "a.yaml")
    with pytest.raises(SpecError, match=r"slo\.yaml: extends: value '.*missing\.yaml' — expected a readable YAML file"):
        slo.load(_file(tmp_path, "version: 1\nextends: missing.yaml\n"))


def test_errors_name_the_layer_they_are_in(tmp_path):
    with pytest.raises(SpecError, match=r"slo\.yaml: objectives\[1\]\.thresholds\.rtt\.p99: value 1 — expected a duration"):
        slo.load(_file(tmp_path, TEAM.replace("rtt.p99: 1ms", "rtt.p99: 1")))
    with pytest.raises(SpecError, match=r"slo\.yaml: defaults\.max_samples: value 100 — expected a number >= "
                                        r"defaults\.samples \(400\)"):
        slo.load(_file(tmp_path, TEAM.replace("samples: 400", "samples: 400, max_samples: 100")))
    # the team's defaults make a shipped objective unjudgeable: named in the shipped file, extended by the team's
    with pytest.raises(SpecError, match=r"slo\.yaml \(extended by .*slo\.yaml\): objectives\[\d+\]\.thresholds\.policy"):
        slo.load(_file(tmp_path, TEAM.replace("samples: 400", "samples: 400, trials: 5")))
    with pytest.raises(SpecError, match=r"\(top level\): value None — expected a mapping with the key 'objectives' "
                                        r"\(or 'extends: netslo'"):
        slo.load(_file(tmp_path, "version: 1\n"))
    with pytest.raises(SpecError, match=r"slo\.yaml: version: value None — expected 1 \(the SLO file's schema version"):
        slo.load(_file(tmp_path, "extends: netslo\nobjectives: []\n"))
    with pytest.raises(SpecError, match=r"gate: value 'some' — expected"):
        slo.load(_file(tmp_path, TEAM + "gate: some\n"))


def test_selected_only_declares_its_skips_and_selects_by_the_labels_known(tmp_path):
    spec = slo.load(_file(tmp_path, TEAM.replace("extends: netslo\n", "gate: selected-only\n")))
    assert "not_gated" in spec.allow_skips
    assert spec.selects({"protocol": "tcp-rr", "placement": "cross-node", "profile": "1k", "family": "ipv4"})
    assert not spec.selects({"protocol": "tcp-rr", "placement": "same-node", "profile": "1k", "family": "ipv4"})
    assert not spec.selects({"protocol": "http", "placement": "cross-node"})
    assert not spec.selects({"study": "policy", "placement": "cross-node", "protocol": "tcp"})   # no study metric
    on_calico = slo.parse({"version": 1, "objectives": [{"name": "c", "select": {"datapath": "calico"},
                                                         "thresholds": {"policy_enforce.p50": "1s"}}]})
    assert on_calico.selects({"study": "policy"})     # the datapath is not known at collection: it may match
    assert "not_gated" not in slo.load(_file(tmp_path, TEAM)).allow_skips
