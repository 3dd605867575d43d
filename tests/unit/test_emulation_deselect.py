"""On a real cluster the gate's emulation-only tests (netslo's own datapaths) are deselected with the
reason, so a kind/existing report speaks only of the cluster under test; on the embedded provider they run."""

from types import SimpleNamespace

from netslo.gate import test_qos
from netslo.gate.plugin import qos as qos_plugin
from tests.unit.plugin_stub import collect


class Item(SimpleNamespace):
    def get_closest_marker(self, name):
        return object() if name in self.marks else None


def _collect(provider: str, items: list) -> tuple[list, list]:
    return collect(qos_plugin, SimpleNamespace(provider=provider), items)


def test_emulation_only_tests_are_deselected_on_a_cluster_and_named():
    items = [Item(name="test_dscp_rewrite_is_detected", marks={"cni", "emulation"}),
             Item(name="test_dscp_end_to_end_probe[same-node]", marks={"cni"})]
    kept = list(items)
    dropped, lines = _collect("kind", kept)
    assert [i.name for i in kept] == ["test_dscp_end_to_end_probe[same-node]"] and dropped == [items[0]]
    assert len(lines) == 1 and "1 emulation-only tests deselected on provider kind" in lines[0]
    assert "test_dscp_rewrite_is_detected" in lines[0]


def test_they_run_on_the_embedded_provider():
    items = [Item(name="test_dscp_rewrite_is_detected", marks={"cni", "emulation"})]
    dropped, lines = _collect("netns", items)
    assert len(items) == 1 and not dropped and not lines


def test_the_gate_marks_exactly_its_emulated_datapath_tests():
    marked = {name for name, fn in vars(test_qos).items() if name.startswith("test_")
              and any(m.name == "emulation" for m in getattr(fn, "pytestmark", []))}
    assert marked == {"test_dscp_preserved_per_hop", "test_dscp_vxlan_outer_header", "test_dscp_rewrite_is_detected"}
