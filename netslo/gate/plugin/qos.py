"""QoS fixtures (issue 6). Import the ones a test module uses: ``from netslo.gate.plugin.qos import ...``.

- ``qos_spec`` (session): slo-qos.yaml (``NETSLO_QOS_SLO_FILE`` overrides), validated.
- ``bandwidth_pods`` (session): on the session cluster, the server (session responder, node0) plus a
  latency client and a bulk client on node1; any provider with ``node_links`` (the embedded one from
  this host, kind/minikube/existing through the node agent: ``netslo.impair.shaping.node_links``).
- ``qos_pods`` (session): the same pods for the shaping studies (qdiscs and rules on node1's uplink).
- ``dscp_matrix`` (module): datapath -> per-hop DSCP reports of every case of ``DSCP_CASES``, each
  datapath checked in a child process with its own 2-node cluster (whatever --netslo-datapath says).
- ``cluster_dscp`` (module): placement -> per-hop DSCP report of the session cluster's own datapath
  (pod and node namespaces entered from this host: netns, kind).
- ``uml_qos`` (function): the session's user-mode-linux guest (real netem, shared with the impairment
  module) with its server and a cross-node client; skipped with the reason where user-mode-linux is
  not usable.
- ``qos_report`` (session): metrics each test records; written to <results>/qos.json at the end.
- ``expect_limitation(request, cluster, feature, placement)``: strict xfail when the CNI table says
  the feature does not work there (the check still runs; an unexpected pass fails the run).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import pytest

from netslo.core.errors import SpecError, Unsupported
from netslo.core.resources import shipped_slo
from netslo.gate.plugin.cluster import plan_pods, planned_pod
from netslo.gate.plugin.deselection import deselect
from netslo.gate.plugin.gate import expect_failure, skip, skip_unsupported
from netslo.gate.plugin.hooks import OPTIONS, write_result_file
from netslo.impair.shaping import bandwidth
from netslo.studies.qos import limits
from netslo.studies.qos import spec as qos_spec_mod

DEFAULT_QOS_SLO = shipped_slo("slo-qos.yaml")


def pytest_collection_modifyitems(session, config, items):
    """On a real cluster (kind, minikube, existing) the tests marked ``emulation`` (they build and
    measure netslo's own emulated datapaths, not the cluster's) are deselected, not run, so a kind +
    Calico report speaks only of Calico; the terminal summary names them."""
    if OPTIONS not in config.stash or config.stash[OPTIONS].provider == "netns":
        return
    deselect(config, items, [i for i in items if i.get_closest_marker("emulation") is not None],
             f"emulation-only tests deselected on provider {config.stash[OPTIONS].provider} (they measure "
             f"netslo's embedded datapaths, not the cluster under test)")


def load_qos_spec() -> dict:
    """The QoS SLO file (``NETSLO_QOS_SLO_FILE``, else the shipped one); a bad one is a usage error."""
    path = os.environ.get("NETSLO_QOS_SLO_FILE") or DEFAULT_QOS_SLO
    try:
        return qos_spec_mod.load(path)
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None


@pytest.fixture(scope="session")
def netslo_qos_spec():
    return load_qos_spec()


@pytest.fixture(scope="session")
def netslo_qos_report(pytestconfig):
    """dict test-name -> metrics; saved as qos.json in the results directory after the session."""
    data: dict = {}
    yield data
    if data:
        write_result_file(pytestconfig, "qos.json", data)


def expect_limitation(request, cluster, feature: str, placement: str) -> str | None:
    """Mark the running test strict-xfail when the limitations table names a reason; returns it.
    The xfail holds only for the limitation's own symptom (``limits.SYMPTOMS``: exception type and
    message pattern); any other failure stays a failure. ``cluster`` is a cluster or a CNI name of
    the table (e.g. 'netns-vxlan')."""
    cni = cluster if isinstance(cluster, str) else limits.cni_of(cluster)
    reason = limits.limitation(cni, feature, placement)
    if reason:
        raises, match = limits.SYMPTOMS[feature]
        expect_failure(request.node, f"known limitation ({cni}): {reason}", raises, match)
    return reason


@dataclass
class QosPods:
    cluster: object
    server: object
    ports: dict
    lat: object          # latency client, node1
    bulk: object         # bulk client, node1
    extra: dict = field(default_factory=dict)
    links: dict = field(default_factory=dict)

    @property
    def uplink(self):
        """``NodeLinks`` of node1, whose uplink egress is the bottleneck of client -> server (asked once)."""
        return self.links_of(self.lat.node)

    def links_of(self, node: str):
        """``NodeLinks`` of ``node`` (asked once per node)."""
        if node not in self.links:
            self.links[node] = self.cluster.node_links(node)
        return self.links[node]

    def pod(self, name: str, node: str, **kw):
        if name not in self.extra:
            self.extra[name] = self.cluster.add_pod(name, node, **kw)
        return self.extra[name]

    def prepare(self, specs: list[dict]) -> None:
        """Make the pods of ``specs`` (``add_pods`` entries) that do not exist yet, together (on
        Kubernetes at once, awaited with one watch); ``pod()`` then returns them."""
        new = [s for s in specs if s["name"] not in self.extra]
        if new:
            self.extra.update((p.name, p) for p in self.cluster.add_pods(new))


@pytest.fixture(scope="session")
def netslo_bandwidth_pods(netslo_cluster, netslo_responder, netslo_gate_pods, netslo_qos_spec):
    """QosPods on a cluster whose nodes' links netslo can reach (``node_links``): the
    bandwidth-annotation tests read the qdiscs the CNI installed for the annotation (the embedded
    shaper, Calico's felix, a bandwidth plugin)."""
    if not hasattr(netslo_cluster, "node_links"):
        skip("provider", f"QoS tests act on node links (cluster.node_links), which provider "
                         f"{getattr(netslo_cluster, 'provider', '?')} does not offer")
    if len(netslo_cluster.nodes) < 2:
        skip("nodes", "QoS tests need 2 nodes (client node -> server node)")
    server, ports = netslo_responder
    lat, bulk = (planned_pod(netslo_gate_pods, netslo_cluster, name, netslo_cluster.nodes[1])
                 for name in ("qos-lat", "qos-bulk"))
    nodes = netslo_cluster.nodes
    shaped = {name: netslo_gate_pods[name] for name, i, *_ in bandwidth_plan(netslo_qos_spec["bandwidth"])
              if name in netslo_gate_pods and netslo_gate_pods[name].node == nodes[i]}
    return QosPods(netslo_cluster, server, ports, lat, bulk, extra=shaped)


def bandwidth_plan(sec: dict) -> list[tuple[str, int, dict, tuple]]:
    """(name, node index, annotations, responders) of every pod the bandwidth tests use (``sec``: the
    QoS file's ``bandwidth`` section): per direction and placement a shaped pod (ingress: one each, a
    used token bucket refills only slowly; it receives, so it serves TCP), the same-node sender, and
    the wrong-limit control's pod (senders: no responders)."""
    egress, ingress = {bandwidth.EGRESS_KEY: f"{sec['egress']:.0f}"}, {bandwidth.INGRESS_KEY: f"{sec['ingress']:.0f}"}
    return [("qos-bw-eg-same", 0, egress, ()), ("qos-bw-eg-cros", 1, egress, ()),
            ("qos-bw-in-same", 0, ingress, ("tcp",)), ("qos-bw-in-cros", 0, ingress, ("tcp",)),
            ("qos-bw-src-same", 0, {}, ()), ("qos-bw-wrong", 1, egress, ())]


# The latency and bulk clients, and the bandwidth tests' pods: made with the gate's other pods.
plan_pods("netslo_bandwidth_pods", lambda config: [("qos-lat", 1, None, ()), ("qos-bulk", 1, None, ()),
                                                   *bandwidth_plan(load_qos_spec()["bandwidth"])])


@pytest.fixture(scope="session")
def netslo_qos_pods(netslo_cluster, netslo_bandwidth_pods):
    """QosPods for the shaping studies (htb/tbf/netfilter on node1's uplink, ``QosPods.uplink``)."""
    return netslo_bandwidth_pods


DSCP_CASES = {"bridge": (("same-node", "plain"), ("cross-node", "plain"), ("cross-node", "rewrite")),
              "routed": (("same-node", "plain"), ("cross-node", "plain")),
              "vxlan": (("same-node", "plain"), ("cross-node", "plain"), ("cross-node", "tos-inherit"))}


@pytest.fixture(scope="module")
def netslo_dscp_matrix(netslo_qos_spec):
    """datapath -> {"placement/variant": DscpReport, ...}: one child process per embedded datapath
    builds its own 2-node cluster, checks every case and removes the cluster (run once, cached)."""
    from netslo.providers.netns.cluster import require_privileges
    from netslo.studies.qos import dscp_check
    require_privileges()    # without them the matrix cannot run: an infrastructure error, not a skip
    done: dict = {}
    sec = netslo_qos_spec["dscp"]

    def get(datapath: str) -> dict:
        if datapath not in done:
            done[datapath] = dscp_check.run_matrix(datapath, DSCP_CASES[datapath], sec["marks"], sec["packets"],
                                                   str(sec["rewrite_to"]))
        return done[datapath]

    return get


@pytest.fixture(scope="module")
def netslo_cluster_dscp(netslo_cluster, netslo_responder, netslo_client_for, netslo_qos_spec):
    """placement -> per-hop DscpReport of the session cluster's own datapath (the real CNI on kind),
    captured from this host in pod and node namespaces (run once per placement); skipped 'provider'
    where those namespaces are not on this host (existing, minikube)."""
    from netslo.studies.qos import dscp_check
    sec = netslo_qos_spec["dscp"]
    done: dict = {}
    server, _ = netslo_responder

    def get(placement: str):
        if placement not in done:
            client = netslo_client_for(placement)
            try:   # Unsupported only from the path (no namespaces on this host), before anything is sent
                done[placement] = dscp_check.check(netslo_cluster, client, server, sec["marks"], sec["packets"])
            except Unsupported as e:
                skip_unsupported(e, "provider")
        return done[placement]

    return get


@pytest.fixture
def netslo_uml_qos(pytestconfig):
    """(cluster, server, ports, client) in user-mode-linux with real netem (the session's 2-node bridge
    guest, shared with the impairment module: ``netem_guest``); skip with the reason."""
    from netslo.gate.plugin.impair import netem_guest
    from netslo.impair import capability
    ok, why = capability.uml_available()
    if not ok:
        skip("needs_netem", f"needs netem (user-mode-linux): {why}")
    if not shutil.which("sysctl"):
        skip("tool", "needs sysctl (procps)")
    guest = netem_guest(pytestconfig, 2, "bridge")
    try:
        c = guest.up()
    except Unsupported as e:
        skip("needs_netem", f"needs netem (user-mode-linux): {e}")
    return c, guest.server, guest.ports, guest.pod("qos-client", "node1")
