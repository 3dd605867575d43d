"""Disruption actions on a real cluster (``netslo.providers.disruption``), through the Kubernetes API.

* ``agent-restart``: the CNI agent pod on the server's node deleted (calico-node, cilium, antrea-agent:
  the DaemonSet that names the cluster's CNI); the action ends when the DaemonSet's new pod on that
  node is Ready (marks: ``on_start`` the delete, ``off_end`` the new pod seen Ready).
* ``kube-proxy-restart``: the same for kube-proxy's pod on the server's node.
* ``agent-roll``: the CNI agent's DaemonSet rolled to a new revision, as a change of its configuration
  rolls it: its pod template gets the annotation ``ROLL_ANNOTATION`` (what ``kubectl rollout restart``
  does), and the DaemonSet replaces its pods node by node; the action ends when its status says every
  pod is of the new revision and available (``on_start``/``on_end`` the patch, ``off_end`` the status
  seen complete). The annotation stays on the DaemonSet, as a rollout restart leaves its own.

* ``drain``: the server's node drained of a Service's backend, which moves to another node
  (``netslo.providers.kube.drain``): the probes send to that Service.

A pod that does not come back Ready within ``READY_TIMEOUT_S`` is an InfrastructureError naming it and
its last events. The trial's window is the action's expected length plus a clean stretch; an action that
overruns its window is the study's InfrastructureError, never a shorter measured outage.
"""

from __future__ import annotations

import time

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.providers.base import Pod
from netslo.providers.disruption import Action, Disruptions, drop_spec
from netslo.providers.kube import drain as drain_mod
from netslo.providers.kube.wait import pod_ready_safe

READY_TIMEOUT_S = 120.0
POLL_S = 0.2
# s from the action's start to the end of a trial's window: the new pods' start and readiness and a clean
# stretch. kind + Calico on this 2-core VM (2 nodes): calico-node Ready again 5.7-6.4 s after its delete
# (2026-12-02); its DaemonSet rolled in 11.4-13.4 s, kube-proxy Ready again 1.1-1.9 s (2026-12-03)
WINDOW_S = {"agent-restart": 20.0, "kube-proxy-restart": 10.0, "agent-roll": 30.0}
ROLL_ANNOTATION = "netslo.io/rolled-at"     # the pod template's annotation a roll changes (ns since the epoch)
AGENTS = {"calico": "calico-node", "cilium": "cilium", "antrea": "antrea-agent"}   # DaemonSet per CNI
NAMESPACE = "kube-system"


class KubeDisruptions(Disruptions):
    """The agent and kube-proxy restarts and the agent's roll of a ``KubeCluster`` (module doc)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self._drains: dict[str, drain_mod.Drain] = {}     # node -> its drain's backend and Service

    def action(self, name: str, client: Pod, server: Pod) -> Action:
        if name == "drain":
            node = server.node
            d = self._drains.get(node) or self._drains.setdefault(node, drain_mod.Drain(self.cluster, node))
            return Action(name, d.move, f"node {node} cordoned and its Service backend ({drain_mod.BACKEND}, one "
                          "replica) evicted, until its replacement on another node is a ready endpoint; the "
                          "probes send to the Service", drain_mod.WINDOW_S, target=d.target, restore=d.restore,
                          restore_s=drain_mod.RESTORE_S, one_responder=False)
        if name == "agent-roll":
            ds = self._agent_daemonset()
            return Action(name, lambda: self._roll(ds), f"{NAMESPACE}/{ds} DaemonSet rolled to a new revision (its "
                          "pod template changed), until every pod of it is updated and available", WINDOW_S[name])
        if name == "agent-restart":
            ds = self._agent_daemonset()
        elif name == "kube-proxy-restart":
            ds = "kube-proxy"
            if self.cluster.api.get("daemonset", ds, NAMESPACE, missing_ok=True) is None:
                raise Unsupported(f"the cluster runs no {NAMESPACE}/{ds} DaemonSet (its CNI replaces kube-proxy)",
                                  "limitation")
        elif name == "api-server-restart":
            raise Unsupported(f"action {name} on provider {self.cluster.provider}: kind's only (its control plane is "
                              "a container of this host; elsewhere the API server is not netslo's to restart)",
                              "provider")
        else:
            drop_spec(name)      # a name of a known form: one this provider cannot do yet
            raise Unsupported(f"action {name} on provider {self.cluster.provider}: drops are the embedded "
                              "provider's, partitions the embedded provider's and kind's (a node seen from this "
                              "host)", "provider")
        node = server.node
        return Action(name, lambda: self._restart(ds, node), f"{NAMESPACE}/{ds} pod on node {node} deleted, "
                      "until its successor is Ready", WINDOW_S[name])

    def _agent_daemonset(self) -> str:
        ds = AGENTS.get(self.cluster.datapath)
        if ds is None:
            raise Unsupported(f"no CNI agent DaemonSet known for datapath {self.cluster.datapath}", "provider")
        return ds

    def _roll(self, ds: str) -> dict:
        before = self.cluster.api.get("daemonset", ds, NAMESPACE)
        generation = before["metadata"].get("generation", 0)
        marks = {"on_start": time.monotonic_ns()}
        body = {"spec": {"template": {"metadata": {"annotations": {ROLL_ANNOTATION: str(time.time_ns())}}}}}
        self.cluster.api.patch("daemonset", ds, NAMESPACE, body, what=f"roll {NAMESPACE}/{ds}")
        marks["on_end"] = time.monotonic_ns()
        deadline = time.monotonic() + READY_TIMEOUT_S
        st: dict = {}
        while time.monotonic() < deadline:
            obj = self.cluster.api.get("daemonset", ds, NAMESPACE)
            st = obj.get("status") or {}
            want = st.get("desiredNumberScheduled", -1)
            if (st.get("observedGeneration", 0) > generation and st.get("updatedNumberScheduled") == want
                    and st.get("numberAvailable") == want and not st.get("numberUnavailable")):
                marks["off_start"] = marks["off_end"] = time.monotonic_ns()
                marks["pods"] = want
                return marks
            time.sleep(POLL_S)
        events = self.cluster.api.events(NAMESPACE)
        counts = ", ".join(f"{k} {st.get(k)}" for k in ("desiredNumberScheduled", "updatedNumberScheduled",
                                                        "numberAvailable", "numberUnavailable"))
        raise InfrastructureError(f"DaemonSet {NAMESPACE}/{ds} not rolled within {READY_TIMEOUT_S:.0f} s ({counts}); "
                                  f"events: {'; '.join(events) or 'none'}")

    def _pods(self, ds: str, node: str) -> list[dict]:
        items, _ = self.cluster.api.list("pods", NAMESPACE, field_selector=f"spec.nodeName={node}")
        return [p for p in items if any(o.get("kind") == "DaemonSet" and o.get("name") == ds
                                        for o in p["metadata"].get("ownerReferences", []))]

    def _restart(self, ds: str, node: str) -> dict:
        old = self._pods(ds, node)
        if not old:
            raise InfrastructureError(f"no pod of DaemonSet {NAMESPACE}/{ds} on node {node}")
        gone = {p["metadata"]["uid"] for p in old}
        marks = {"on_start": time.monotonic_ns()}
        for p in old:
            self.cluster.api.delete("pods", p["metadata"]["name"], NAMESPACE)
        marks["on_end"] = time.monotonic_ns()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            new = [p for p in self._pods(ds, node) if p["metadata"]["uid"] not in gone]
            if new and all(pod_ready_safe(p) for p in new):
                marks["off_start"] = marks["off_end"] = time.monotonic_ns()
                marks["new_pod"] = new[0]["metadata"]["name"]
                return marks
            time.sleep(POLL_S)
        events = self.cluster.api.events(NAMESPACE)
        raise InfrastructureError(f"the {ds} pod on node {node} was not Ready again within {READY_TIMEOUT_S:.0f} s "
                                  f"after its delete; events: {'; '.join(events) or 'none'}")

    def close(self) -> None:
        """Uncordon what a drain cordoned (a deleted pod's DaemonSet makes the next one by itself)."""
        for d in self._drains.values():
            d.close()
