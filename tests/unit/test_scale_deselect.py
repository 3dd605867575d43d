"""The at-scale studies (marker ``scale``: the NetworkPolicy data-path cost with up to 1000 objects) run
on a real cluster only with --netslo-scale, else they are deselected with the reason; on the embedded
provider they always run."""

from types import SimpleNamespace

from netslo.gate import test_policy
from netslo.gate.plugin import studies
from tests.unit.plugin_stub import collect


class Item(SimpleNamespace):
    def get_closest_marker(self, name):
        return object() if name in self.marks else None


def _items():
    return [Item(name="test_policy_datapath_cost", marks={"cni", "scale"}),
            Item(name="test_policy_enforcement_latency", marks={"cni"})]


def test_on_a_real_cluster_without_the_option_they_are_deselected_and_named():
    items = _items()
    dropped, lines = collect(studies, SimpleNamespace(provider="kind"), items)
    assert [i.name for i in items] == ["test_policy_enforcement_latency"] and [i.name for i in dropped] == \
        ["test_policy_datapath_cost"]
    assert len(lines) == 1 and "1 at-scale studies deselected on provider kind (run them with --netslo-scale" \
        in lines[0] and lines[0].endswith(": test_policy_datapath_cost")


def test_with_the_option_or_on_the_embedded_provider_they_run():
    for provider, cli in (("existing", {"--netslo-scale": True}), ("netns", {})):
        items = _items()
        dropped, lines = collect(studies, SimpleNamespace(provider=provider), items, cli)
        assert len(items) == 2 and not dropped and not lines


def test_the_gate_marks_its_policy_cost_study():
    marks = [m.name for m in test_policy.test_policy_datapath_cost.pytestmark]
    assert "scale" in marks and "emulation" not in marks


def test_rollout_studies_run_on_a_real_cluster_only_with_netslo_disruption():
    items = [Item(name="test_disruption_slo_agent_restart[cross-node]", marks={"cni", "rollout"}),
             Item(name="test_latency_slo", marks={"cni"})]
    dropped, lines = collect(studies, SimpleNamespace(provider="kind"), items)
    assert [i.name for i in dropped] == ["test_disruption_slo_agent_restart[cross-node]"]
    assert len(lines) == 1 and "rollout studies deselected on provider kind (run them with --netslo-disruption" in lines[0]
    for provider, cli in (("kind", {"--netslo-disruption": True}), ("netns", {})):
        items = [Item(name="test_disruption_slo_agent_restart[cross-node]", marks={"cni", "rollout"})]
        dropped, lines = collect(studies, SimpleNamespace(provider=provider), items, cli)
        assert len(items) == 1 and not dropped and not lines


def test_the_gate_marks_its_agent_restart_as_rollout_and_its_controls_as_emulation():
    from netslo.gate import test_disruption
    restart = [m.name for m in test_disruption.test_disruption_slo_agent_restart.pytestmark]
    controls = [m.name for m in test_disruption.test_disruption_control_measures_the_drop_it_was_given.pytestmark]
    assert "rollout" in restart and "emulation" not in restart and "emulation" in controls


def test_cluster_only_studies_are_deselected_on_the_embedded_provider_only():
    def items():
        return [Item(name="test_disruption_slo_rollout[kube-proxy-restart-same-node]", marks={"cni", "rollout", "cluster_only"}),
                Item(name="test_disruption_slo_rollout[agent-roll-same-node]", marks={"cni", "rollout"})]
    its = items()
    dropped, lines = collect(studies, SimpleNamespace(provider="netns"), its)
    assert [i.name for i in dropped] == ["test_disruption_slo_rollout[kube-proxy-restart-same-node]"]
    assert len(lines) == 1 and "real-cluster-only studies deselected on the embedded provider" in lines[0]
    its = items()
    dropped, lines = collect(studies, SimpleNamespace(provider="kind"), its, {"--netslo-disruption": True})
    assert len(its) == 2 and not dropped and not lines


def test_the_gate_marks_kube_proxy_restart_cluster_only_and_every_rollout_action_rollout():
    from netslo.gate import test_disruption
    assert "rollout" in [m.name for m in test_disruption.test_disruption_slo_rollout.pytestmark]
    params = {p.id: [m.name for m in p.marks] for p in test_disruption.ROLLOUTS}
    assert "cluster_only" in params["kube-proxy-restart"] and "cluster_only" not in params["agent-roll"]


def test_same_node_emulated_rollouts_run_on_the_embedded_provider_only_with_netslo_disruption():
    def items():
        return [Item(name=f"test_disruption_slo_agent_restart[{p}]", marks={"cni", "rollout"},
                     callspec=SimpleNamespace(params={"placement": p})) for p in ("same-node", "cross-node")]
    its = items()
    dropped, lines = collect(studies, SimpleNamespace(provider="netns"), its)
    assert [i.name for i in dropped] == ["test_disruption_slo_agent_restart[same-node]"]
    assert [i.name for i in its] == ["test_disruption_slo_agent_restart[cross-node]"]
    assert len(lines) == 1 and "same-node emulated restarts and rolls deselected on the embedded provider (run them " \
        "with --netslo-disruption" in lines[0]
    its = items()
    dropped, lines = collect(studies, SimpleNamespace(provider="netns"), its, {"--netslo-disruption": True})
    assert len(its) == 2 and not dropped and not lines
