"""THE GATE, NetworkPolicy part: how fast a policy change takes effect, and what policies cost per packet.

- Enforcement latency: while a client pod opens a new TCP connection to a server pod every
  millisecond, a policy denying the client is applied, then one allowing it, ``defaults.trials`` times;
  the time until the client's connections stop (``policy_enforce.*``) and resume (``policy_allow.*``)
  being admitted is judged against the SLO file (``netslo.studies.enforcement``: clock points, 1 ms resolution,
  censoring, and why each request is a new flow: a stateful CNI keeps an established flow allowed).
- Data-path cost: the RTT of a new connection with 0, 100 and 1000 decoy policies beside the one
  admitting the client, in interleaved rounds; the P50/P99 shift none -> 1000 is judged
  (``policy_cost.*``, ``netslo.studies.policy_cost``).

On the embedded provider the policies are an iptables emulation (``netslo.providers.netns.policy``) and
the output says so; on kind and existing clusters they are NetworkPolicy objects the CNI enforces
(``netslo.providers.kube.policy``). The data-path cost on a real cluster (marker ``scale``) runs with
``--netslo-scale`` only, else it is deselected and named in the summary: it makes and removes up to 1000
NetworkPolicy objects per change and waits until the path is steady after each (``policy_cost.settle``:
measured right after a change on kind + Calico, 2026-11-26, 7 % of the connections with no decoys and
31 % with 1000 went unanswered for 250 ms, and the P50 shift, 187 ms, was the CNI agent's CPU load on
the node, not per-packet cost).
"""

import pytest

from netslo.core.errors import Unsupported
from netslo.gate.plugin.cluster import plan_pods, planned_pod
from netslo.gate.plugin.gate import skip_unsupported
from netslo.gate.plugin.studies import study_thresholds
from netslo.studies import enforcement, policy_cost

pytestmark = pytest.mark.cni

PLACEMENT = "cross-node"          # the client on another node than the server (a skip on one node)
POLICY_SERIES = ("policy_enforce", "policy_allow")


@pytest.fixture(scope="module")
def netslo_policy_server(netslo_cluster, netslo_gate_pods):
    """(pod, tcp port) of a responder pod of its own: policies isolate it, not the shared responder."""
    pod = planned_pod(netslo_gate_pods, netslo_cluster, "pol-server", netslo_cluster.nodes[0])
    return pod, netslo_cluster.start_responders(pod, ("tcp",))["tcp"]


plan_pods("netslo_policy_server", ("pol-server", 0))


@pytest.fixture
def netslo_policies(netslo_cluster):
    """The cluster's policies; every rule or object made in the test is removed after it (also on error)."""
    try:
        pol = netslo_cluster.policies()
    except Unsupported as e:
        skip_unsupported(e)
    try:
        yield pol
    finally:
        pol.clear()


def _thresholds(slo, cluster, study: str, wanted: str) -> list:
    return study_thresholds(slo, cluster, {"study": study, "placement": PLACEMENT, "protocol": enforcement.PROTOCOL}, wanted)


def _emulated(policies) -> list[str]:
    return [policies.description] if policies.emulated else []   # (it begins "emulated: ...")


@pytest.mark.slo_labels(study="policy", placement=PLACEMENT, protocol=enforcement.PROTOCOL)
def test_policy_enforcement_latency(netslo_cluster, netslo_client_for, netslo_policy_server, netslo_policies,
                                    netslo_slo, netslo_study_report, request):
    client = netslo_client_for(PLACEMENT)
    server, port = netslo_policy_server
    ths = _thresholds(netslo_slo, netslo_cluster, "policy", "policy_enforce.* / policy_allow.*")
    steps = [enforcement.Step("policy_enforce", enforcement.STOP, lambda: netslo_policies.deny(client, server, port)),
             enforcement.Step("policy_allow", enforcement.RESUME, lambda: netslo_policies.allow(client, server, port))]
    trials = enforcement.run(netslo_cluster, client, server.ip, port, steps, trials=enforcement.trials_for(ths),
                             window=enforcement.window_for(ths, POLICY_SERIES))
    trials.judge(ths, netslo_slo.sampling.confidence)
    text = netslo_study_report(request.node.name, _emulated(netslo_policies) + trials.summary(),
                               trials.numbers(netslo_slo.sampling.confidence))
    request.node.user_properties.append(("netslo_policy_enforcement", text))   # (the fixture warns under xunit2)
    assert trials.checks and not trials.failed, "policy enforcement SLO not met:\n" + text


@pytest.mark.scale   # on real clusters with --netslo-scale: see the module docstring
@pytest.mark.slo_labels(study="policy-cost", placement=PLACEMENT, protocol=enforcement.PROTOCOL)
def test_policy_datapath_cost(netslo_cluster, netslo_client_for, netslo_policy_server, netslo_policies, netslo_slo,
                              netslo_study_report, request):
    client = netslo_client_for(PLACEMENT)
    server, port = netslo_policy_server
    ths = _thresholds(netslo_slo, netslo_cluster, "policy-cost", "policy_cost.*")
    cost = policy_cost.measure(netslo_cluster, client, server, port, netslo_policies,
                               confidence=netslo_slo.sampling.confidence)
    cost.judge(ths, netslo_slo.sampling.confidence)
    text = netslo_study_report(request.node.name, _emulated(netslo_policies) + cost.summary(), cost.numbers())
    request.node.user_properties.append(("netslo_policy_cost", text))
    assert cost.checks and all(c.verdict == "pass" for c in cost.checks), "policy cost SLO not met:\n" + text
