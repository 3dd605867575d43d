"""IP families: endpoint text with brackets, family of an address, Pod.address, scenario ids and labels,
SLO ``select: family``, and the deselection of scenarios of a family the run did not ask for."""

import socket
import sys
from types import SimpleNamespace

import pytest

from netslo.agent.cli import _parser, probe_spec
from netslo.core import families
from netslo.core.errors import SpecError, Unsupported
from netslo.gate import test_latency
from netslo.gate.plugin import family_select as families_plugin
from netslo.gate.plugin.hooks import NetsloOptions
from netslo.providers.base import Pod
from netslo.providers.netns.cluster import _target_ip
from netslo.slo import skips
from netslo.slo import spec as slo
from netslo.slo.scenario import Scenario, matrix
from netslo.traffic.sockopts import IPV6_TCLASS, tos_from_ancillary
from tests.unit.plugin_stub import collect


@pytest.mark.parametrize("text, want", [
    ("10.244.1.5:7001", ("10.244.1.5", 7001)),
    ("[fd00:10:244:1::5]:7001", ("fd00:10:244:1::5", 7001)),
    ("[::1]:80", ("::1", 80)),
    ("server:1883", ("server", 1883)),
])
def test_host_port_parses_both_families(text, want):
    assert families.parse_host_port(text) == want
    assert families.host_port(*want) == text


@pytest.mark.parametrize("text", ["fd00::5:7001", "[fd00::5]", "[10.0.0.1]:7001", "[fd00::5:7001", "10.0.0.1:0",
                                  "10.0.0.1:65536", "10.0.0.1", ":7001", "[nonsense]:1"])
def test_bad_endpoints_are_one_line_naming_the_field(text):
    with pytest.raises(SpecError, match=r"^--target: value .* — expected HOST:PORT or \[IPV6\]:PORT [^\n]*$"):
        families.parse_host_port(text, "--target")


def test_the_agent_takes_a_bracketed_ipv6_target():
    args = _parser().parse_args(["probe", "udp", "--target", "[fd00:10:244::2]:7000", "--out", "-"])
    assert probe_spec(args).host == "fd00:10:244::2" and probe_spec(args).port == 7000


def test_family_of_an_address_and_its_socket_family():
    assert families.family_of("fd00::1") == "ipv6" and families.socket_family("fd00::1") == socket.AF_INET6
    assert families.family_of("10.0.0.1") == "ipv4" and families.socket_family("10.0.0.1") == socket.AF_INET
    assert families.url_host("fd00::1") == "[fd00::1]" and families.url_host("10.0.0.1") == "10.0.0.1"
    assert families.families_of("dual") == ("ipv4", "ipv6") and families.families_of("ipv6") == ("ipv6",)
    with pytest.raises(SpecError, match="--netslo-ip-family: value 'v6'"):
        families.families_of("v6")


def test_pod_address_by_family_and_the_skip_category_when_missing():
    dual = Pod("server", "node0", "10.244.0.2", ip6="fd00:10:244::2")
    assert dual.address("ipv4") == "10.244.0.2" and dual.address("ipv6") == "fd00:10:244::2"
    only6 = Pod("server", "node0", "fd00:10:244::2", ip6="fd00:10:244::2")
    assert only6.address("ipv6") == "fd00:10:244::2"
    with pytest.raises(Unsupported) as e:
        only6.address("ipv4")
    assert e.value.category == "ip_family" and "pod server has no ipv4 address" in str(e.value)
    with pytest.raises(Unsupported) as e:
        Pod("client", "node1", "10.244.1.2").address("ipv6")
    assert e.value.category == "ip_family" and "pod client has no ipv6 address" in str(e.value)
    assert "ip_family" in skips.CATEGORIES
    with pytest.raises(SpecError):
        dual.address("ip6")


def test_ipv4_ids_are_unchanged_and_ipv6_ones_carry_a_suffix():
    v4, v6 = Scenario("cross-node", "udp", "1k"), Scenario("cross-node", "udp", "1k", family="ipv6")
    assert v4.id == "cross-node-udp-1k" and v6.id == "cross-node-udp-1k-ipv6"
    assert v4.labels()["family"] == "ipv4" and v6.labels()["family"] == "ipv6"
    with pytest.raises(SpecError, match="scenario.family: value 'inet6'"):
        Scenario("cross-node", "udp", "1k", family="inet6")
    both = matrix(protocols=("udp",), families=("ipv4", "ipv6"))
    assert sorted(s.id for s in both) == ["cross-node-udp-1k", "cross-node-udp-1k-ipv6",
                                          "same-node-udp-1k", "same-node-udp-1k-ipv6"]


def test_the_gate_carries_a_representative_ipv6_subset():
    v6 = sorted(s.id for s in test_latency.SCENARIOS if s.family == "ipv6")
    assert v6 == ["cross-node-http-new-1k-ipv6", "cross-node-tcp-rr-1k-ipv6", "cross-node-udp-1k-ipv6"]


SLO_DOC = """
version: 1
objectives:
  - name: v4
    select: {family: ipv4}
    thresholds: {rtt.p99: 5ms}
  - name: v6
    select: {family: ipv6}
    thresholds: {rtt.p99: 7ms}
  - name: all
    thresholds: {loss: 1%}
"""


def test_slo_select_family(tmp_path):
    f = tmp_path / "slo.yaml"
    f.write_text(SLO_DOC)
    spec = slo.load(f)
    got = {fam: sorted(t.objective for t in spec.thresholds_for(Scenario("cross-node", "udp", "1k", family=fam).labels()))
           for fam in ("ipv4", "ipv6")}
    assert got == {"ipv4": ["all", "v4"], "ipv6": ["all", "v6"]}


@pytest.mark.parametrize("value", ["ipv7", "v6", "IPv6"])
def test_slo_select_family_bad_value_is_one_line(tmp_path, value):
    f = tmp_path / "slo.yaml"
    f.write_text(SLO_DOC.replace("{family: ipv6}", f"{{family: {value}}}"))
    with pytest.raises(SpecError) as e:
        slo.load(f)
    msg = str(e.value)
    assert "\n" not in msg and "objectives[1].select.family" in msg and repr(value) in msg and "ipv4 or ipv6" in msg


def test_a_glob_over_families_is_accepted(tmp_path):
    f = tmp_path / "slo.yaml"
    f.write_text(SLO_DOC.replace("{family: ipv6}", "{family: 'ipv*'}"))
    assert len(slo.load(f).thresholds_for({"family": "ipv4"})) == 3


class Item(SimpleNamespace):
    pass


def _collect(ip_family: str, items: list) -> tuple[list, list]:
    return collect(families_plugin, NetsloOptions("kind", "bridge", 2, None, None, {}, frozenset(), ip_family), items)


def _items():
    return [Item(name=f"test_latency_slo[{s.id}]", callspec=SimpleNamespace(params={"scenario": s}))
            for s in (Scenario("cross-node", "udp", "1k"), Scenario("cross-node", "udp", "1k", family="ipv6"))] + [
        Item(name="test_other")]


def test_ipv6_scenarios_are_deselected_when_the_run_asked_for_ipv4_only():
    items = _items()
    dropped, lines = _collect("ipv4", items)
    assert [i.name for i in items] == ["test_latency_slo[cross-node-udp-1k]", "test_other"]
    assert [i.name for i in dropped] == ["test_latency_slo[cross-node-udp-1k-ipv6]"]
    assert len(lines) == 1 and "--netslo-ip-family ipv4" in lines[0] and "cross-node-udp-1k-ipv6" in lines[0]


def test_dual_keeps_both_and_ipv6_drops_ipv4():
    items = _items()
    assert _collect("dual", items) == ([], []) and len(items) == 3
    items = _items()
    dropped, _ = _collect("ipv6", items)
    assert [i.name for i in dropped] == ["test_latency_slo[cross-node-udp-1k]"]


@pytest.mark.parametrize("argv, want", [
    (["--target", "10.244.0.2:7001"], "10.244.0.2"),
    (["--target", "[fd00:10:244::2]:7001"], "fd00:10:244::2"),
    (["ping", "fd00:10:244:1::2"], "fd00:10:244:1::2"),
    (["--count", "10"], None),
])
def test_evidence_finds_the_target_of_either_family(argv, want):
    assert _target_ip(argv) == want


def test_traffic_class_is_read_from_ipv6_ancillary_data():
    tclass = (0xB8).to_bytes(4, sys.byteorder)
    assert tos_from_ancillary([(socket.IPPROTO_IPV6, IPV6_TCLASS, tclass)]) == 0xB8
    assert tos_from_ancillary([(socket.IPPROTO_IP, socket.IP_TOS, b"\x28")]) == 0x28
    assert tos_from_ancillary([]) == -1


def test_summary_puts_each_ipv6_scenario_beside_its_ipv4_twin():
    from netslo.report.summary import family_rows

    def rec(sid, fam, p50, p99, test="test_latency_slo"):
        return {"test": f"gate.py::{test}[{sid}]", "scenario": sid, "labels": {"family": fam},
                "metrics": {"rtt.p50": {"value": p50}, "rtt.p99": {"value": p99}}}
    rows = family_rows([rec("cross-node-udp-1k", "ipv4", 100e-6, 200e-6), rec("same-node-udp-1k", "ipv4", 1e-4, 2e-4),
                        rec("cross-node-udp-1k-ipv6", "ipv6", 110e-6, 300e-6), rec("cross-node-tcp-rr-1k-ipv6", "ipv6", 1e-4, 1e-4),
                        rec("cross-node-udp-1k", "ipv4", 9e-3, 9e-3, test="test_impaired")])   # same scenario, other test
    assert len(rows) == 1 and rows[0].startswith("ipv4 vs ipv6 cross-node-udp-1k")
    assert "(+10%)" in rows[0] and "(+50%)" in rows[0]
    assert family_rows([rec("cross-node-udp-1k", "ipv4", 1e-4, 2e-4)]) == []
