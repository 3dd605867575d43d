"""Service exposure paths: how a client reaches a backend pod, with the names every provider uses.

  pod-ip            straight to the pod IP (no Service)
  clusterip         Service type ClusterIP: a virtual IP, DNAT on the client's node (kube-proxy iptables)
  nodeport-local    Service type NodePort, externalTrafficPolicy=Local: to a node that runs the backend;
                    DNAT only, client source address kept
  nodeport-cluster  NodePort, externalTrafficPolicy=Cluster: to a node WITHOUT the backend; DNAT plus
                    SNAT (masquerade) and one more node hop
  ingress           an L7 reverse proxy (``responders.proxy``) in its own pod in front of the backend
"""

from __future__ import annotations

from netslo.core.errors import SpecError

EXPOSURES = ("pod-ip", "clusterip", "nodeport-local", "nodeport-cluster", "ingress")
DESCRIPTION = {
    "pod-ip": "pod IP, no Service",
    "clusterip": "Service ClusterIP (virtual IP, DNAT on the client's node)",
    "nodeport-local": "Service NodePort, externalTrafficPolicy=Local (node with the backend; no SNAT)",
    "nodeport-cluster": "Service NodePort, externalTrafficPolicy=Cluster (node without the backend; DNAT+SNAT)",
    "ingress": "L7 reverse proxy (ingress-like) in its own pod",
}


def check_name(exposure: str) -> str:
    if exposure not in EXPOSURES:
        raise SpecError("exposure", exposure, f"one of {', '.join(EXPOSURES)}")
    return exposure
