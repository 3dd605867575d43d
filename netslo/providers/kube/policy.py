"""NetworkPolicy on a real cluster: ``networking.k8s.io/v1`` objects in the run namespace.

Enforced by the cluster's CNI (Calico, Cilium, ...). Objects carry the run label and
``netslo.io/policy`` so ``clear()`` finds them; the run namespace removes them anyway. Decoy ``i``
admits pods labelled ``netslo.io/decoy=<i>``, which no pod has; decoy names sort before the allowing
policy's, so an implementation that walks policies in name order meets every decoy first.
"""

from __future__ import annotations

from netslo.providers.base import Pod
from netslo.providers.kube import manifests as km
from netslo.providers.policy import Policies

POLICY_LABEL = "netslo.io/policy"
DECOY_LABEL = "netslo.io/decoy"


def policy_manifest(name: str, run_id: str, server: str, ingress: list, kind: str) -> dict:
    """A NetworkPolicy selecting agent pod ``server`` for ingress, admitting ``ingress`` (a list of rules)."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": km.k8s_name(name), "namespace": km.namespace_name(run_id),
                         "labels": km.labels(run_id, **{POLICY_LABEL: kind})},
            "spec": {"podSelector": {"matchLabels": {km.POD_LABEL: km.k8s_name(server), km.RUN_LABEL: run_id}},
                     "policyTypes": ["Ingress"], "ingress": ingress}}


def admit(labels: dict, port: int) -> list:
    """The ingress rules admitting pods with ``labels`` on TCP ``port`` (the studies' probe: tcp-crr)."""
    return [{"from": [{"podSelector": {"matchLabels": labels}}], "ports": [{"protocol": "TCP", "port": port}]}]


class KubePolicies(Policies):
    emulated = False
    description = "networking.k8s.io/v1 NetworkPolicy enforced by the cluster's CNI"

    def __init__(self, cluster):
        self.cluster = cluster
        self.api, self.run_id, self.namespace = cluster.api, cluster.run_id, cluster.namespace
        self._names: set[str] = set()
        self._decoys: dict[str, int] = {}

    def _create(self, name: str, server: Pod, ingress: list, kind: str) -> None:
        m = policy_manifest(name, self.run_id, server.name, ingress, kind)
        self.api.create(m)
        self._names.add(m["metadata"]["name"])

    def _delete(self, name: str) -> None:
        name = km.k8s_name(name)
        self.api.delete("networkpolicy", name, self.namespace)
        self._names.discard(name)

    def deny(self, client: Pod, server: Pod, port: int) -> None:
        deny = km.k8s_name(f"pol-deny-{server.name}")
        if deny not in self._names:
            self._create(deny, server, [], "deny")
        allow = km.k8s_name(f"pol-allow-{server.name}-{client.name}")
        if allow in self._names:
            self._delete(allow)

    def allow(self, client: Pod, server: Pod, port: int) -> None:
        labels = {km.POD_LABEL: km.k8s_name(client.name), km.RUN_LABEL: self.run_id}
        self._create(f"pol-allow-{server.name}-{client.name}", server, admit(labels, port), "allow")

    def decoys(self, server: Pod, port: int, n: int) -> None:
        have = self._decoys.get(server.name, 0)
        for i in range(have, n):
            self._create(f"pol-decoy-{server.name}-{i:05d}", server, admit({DECOY_LABEL: str(i)}, port), "decoy")
        for i in range(n, have):
            self._delete(f"pol-decoy-{server.name}-{i:05d}")
        self._decoys[server.name] = n

    def path_rules(self, server: Pod, port: int, n: int) -> None:
        """``n`` decoy policies on ``server`` and one admitting every pod of the run on every port: the
        CNI evaluates them all on each packet to it, and nothing of the run is denied (a change of the
        data path of known direction, for comparing two clusters)."""
        self.decoys(server, port, n)
        if n and km.k8s_name(f"pol-run-{server.name}") not in self._names:
            self._create(f"pol-run-{server.name}", server, [{"from": [{"podSelector": {"matchLabels": {
                km.RUN_LABEL: self.run_id}}}]}], "allow")

    def clear(self) -> None:
        for name in sorted(self._names):
            self.api.delete("networkpolicy", name, self.namespace)
        self._names.clear()
        self._decoys.clear()
