"""``drain``: the server's node drained of a Service's backend, so that its endpoint moves to another node.

The probes of this action send to a ClusterIP Service (udp and tcp) in front of one backend: the only
pod of a Deployment, an agent pod serving the responders, that prefers the server's node. A trial:

* the node cordoned (``spec.unschedulable``, as ``kubectl drain`` does first; the node is annotated
  ``CORDON_ANNOTATION`` = the run id, so a run killed before it uncordons is undone by the next run's
  reaper, ``netslo.providers.kube.reap``), then the backend evicted through the Eviction API (its
  disruption budget honoured, its 1 s grace period kept): marks ``on_start``/``on_end``;
* the Deployment's replacement scheduled on another node and Ready: mark ``pod_ready``;
* the Service's EndpointSlice listing the replacement as ready: marks ``off_start`` = ``off_end``.

Only the backend is evicted, not everything on the node: the run's other pods and the cluster's own
(DNS, the CNI agent) stay, where a full drain would evict them too (and the client of a same-node pair
with them). With one replica this is what a drain does to a single-replica Service: traffic is lost
from the eviction until the new pod serves and every node's Service programming (kube-proxy, or the
CNI's own) sends to it, and the established connections die with the old pod. After each trial's
window (``Action.restore``, outside every window) the node is uncordoned and the backend moved home
the same way, so each trial starts from the same placement; a same-node pair's path is cross-node
while the backend is away.
"""

from __future__ import annotations

import time

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.providers.base import Pod
from netslo.providers.kube import manifests as km
from netslo.providers.kube.wait import pod_ready_safe

CORDON_ANNOTATION = "netslo.io/cordoned-by"   # on a node this run cordoned: the run id
BACKEND = "drain-backend"
SERVICE = "drain"
PROTOCOLS = ("udp", "tcp")
MOVE_TIMEOUT_S = 15.0    # eviction to the replacement serving through the Service
POLL_S = 0.2
# s after a restore before the next trial: kube-proxy programs a Service change within its sync
# period (minSyncPeriod 1 s by default), so the next trial's "before" is steady again
SETTLE_S = 3.0
# s from a trial's start to its window's end, and the most a restore may take (the probes run through
# both, so these are budgets, not timeouts): on kind + Calico here (2 cores, 2026-12-03) the
# replacement served 2.5-2.7 s after the eviction, a restore (a move back and SETTLE_S) took 5.3-5.5 s
WINDOW_S = 15.0
RESTORE_S = 10.0


class Drain:
    """The backend, its Service and the cordons of one run (module doc); ``close()`` uncordons."""

    def __init__(self, cluster, home: str):
        others = [n for n in cluster.nodes if n != home]
        if not others:
            raise Unsupported(f"a drain of node {home} needs another node for the backend to move to "
                              f"(the cluster has {len(cluster.nodes)})", "limitation")
        self.cluster, self.api, self.ns, self.home = cluster, cluster.api, cluster.namespace, home
        self._mine: set[str] = set()          # nodes this object cordoned (and must uncordon)
        hostname = cluster.node_labels(home).get("kubernetes.io/hostname", home)
        self.api.create(km.backend_deployment_manifest(BACKEND, cluster.run_id, hostname, image=cluster.image,
                                                       pull_policy=cluster.pull_policy, responders=PROTOCOLS),
                        what=f"create deployment {self.ns}/{BACKEND}")
        pod = self._serving(set(), time.monotonic() + MOVE_TIMEOUT_S)
        if pod["spec"].get("nodeName") != home:
            raise InfrastructureError(f"the drain's backend {pod['metadata']['name']} was scheduled on "
                                      f"{pod['spec'].get('nodeName')}, not on node {home} that it prefers")
        svc = cluster.add_service(SERVICE, Pod(name=BACKEND, node=home, ip=""), protocols=PROTOCOLS)
        self.target = (svc.cluster_ip, {p: svc.ports[p] for p in PROTOCOLS})

    def _pods(self) -> list[dict]:
        sel = f"{km.POD_LABEL}={km.k8s_name(BACKEND)},{km.RUN_LABEL}={self.cluster.run_id}"
        items, _ = self.api.list("pods", self.ns, selector=sel)
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def _serving(self, old: set, deadline: float, marks: dict | None = None) -> dict:
        """The backend pod not in ``old`` (uids) once it is Ready and its Service endpoint ready (the
        Service's, when it exists); marks ``pod_ready`` and ``off_start``/``off_end`` into ``marks``."""
        pod = None
        while time.monotonic() < deadline:
            new = [p for p in self._pods() if p["metadata"]["uid"] not in old]
            if new and pod_ready_safe(new[0]):
                pod = new[0]
                break
            time.sleep(POLL_S)
        if pod is None:
            raise InfrastructureError(f"the drain's backend (Deployment {self.ns}/{BACKEND}) had no new Ready pod "
                                      f"within {MOVE_TIMEOUT_S:.0f} s; events: "
                                      + ("; ".join(self.api.events(self.ns)) or "none"))
        if marks is not None:
            marks["pod_ready"] = time.monotonic_ns()
            name = pod["metadata"]["name"]
            while not self._endpoint_ready(name):
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"Service {self.ns}/{SERVICE} did not list its new backend {name} "
                                              f"as a ready endpoint within {MOVE_TIMEOUT_S:.0f} s of the eviction")
                time.sleep(POLL_S)
            marks["off_start"] = marks["off_end"] = time.monotonic_ns()
            marks["to_node"] = pod["spec"].get("nodeName")
        return pod

    def _endpoint_ready(self, pod_name: str) -> bool:
        slices, _ = self.api.list("endpointslices", self.ns, selector=f"kubernetes.io/service-name={km.k8s_name(SERVICE)}")
        return any((ep.get("targetRef") or {}).get("name") == pod_name and (ep.get("conditions") or {}).get("ready")
                   for s in slices for ep in s.get("endpoints") or [])

    def _cordon(self, node: str) -> None:
        obj = self.api.get("node", node)
        if obj.get("spec", {}).get("unschedulable") and node not in self._mine:
            raise InfrastructureError(f"node {node} is cordoned already (not by this run): a drain of it "
                                      "would not be this run's to undo")
        self.api.patch("node", node, None, {"spec": {"unschedulable": True},
                                            "metadata": {"annotations": {CORDON_ANNOTATION: self.cluster.run_id}}},
                       what=f"cordon node {node}")
        self._mine.add(node)

    def _uncordon(self, node: str) -> None:
        uncordon(self.api, node)
        self._mine.discard(node)

    def move(self) -> dict:
        """Drain the backend's node of it (module doc; the node stays cordoned): its marks, ns, and the
        nodes it left and went to."""
        pods = self._pods()
        if len(pods) != 1:
            raise InfrastructureError(f"the drain's backend has {len(pods)} pods, not 1: "
                                      + ", ".join(p["metadata"]["name"] for p in pods))
        old = pods[0]
        frm = old["spec"].get("nodeName")
        marks = {"on_start": time.monotonic_ns()}
        self._cordon(frm)
        self.api.evict(old["metadata"]["name"], self.ns)
        marks["on_end"] = time.monotonic_ns()
        self._serving({old["metadata"]["uid"]}, time.monotonic() + MOVE_TIMEOUT_S, marks)
        marks["from_node"] = frm
        return marks

    def restore(self) -> dict:
        """The home node uncordoned and the backend moved back to it (its node cordoned for the move,
        then uncordoned); returns once the Service sends to it again and ``SETTLE_S`` more."""
        self._uncordon(self.home)
        marks = self.move()
        self._uncordon(marks["from_node"])
        if marks["to_node"] != self.home:
            raise InfrastructureError(f"the drain's backend went to node {marks['to_node']}, not back to {self.home}")
        time.sleep(SETTLE_S)
        return marks

    def close(self) -> None:
        """Uncordon every node this drain cordoned (the run's namespace takes the backend and Service)."""
        for node in sorted(self._mine):
            self._uncordon(node)


def uncordon(api, node: str) -> None:
    """Make ``node`` schedulable again and drop this project's cordon annotation."""
    api.patch("node", node, None, {"spec": {"unschedulable": None},
                                   "metadata": {"annotations": {CORDON_ANNOTATION: None}}},
              what=f"uncordon node {node}")
