"""Service exposure paths on a real cluster, with the interface of ``netslo.providers.netns.services.NetnsServices``.

    svc = KubeServices(cluster, backend_pod, port, ingress_node=None, iptables_save=None)
    svc.await_reachable(client_pod)                      # kube-proxy has programmed every Service
    host, port = svc.target("clusterip", client_pod)   # pod-ip | clusterip | nodeport-local |
    svc.counters(); svc.close()                          # nodeport-cluster | ingress

Real Services in the run namespace: ClusterIP (port 80 -> ``port``), NodePort with
externalTrafficPolicy Local and Cluster, and an ingress-like L7 proxy (``serve proxy``) in its own
agent pod. ``counters()`` reads kube-proxy's own iptables rules (packets per exposure, plus
"masquerade") through ``iptables_save() -> text`` of the node's nat table; without node access
(most clusters) it raises Unsupported. ``close()`` deletes the Services (the namespace goes with the
cluster anyway).
"""

from __future__ import annotations

import re
from typing import Callable

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.families import host_port
from netslo.providers.base import RESPONDER_PORTS, Pod
from netslo.providers.exposure import EXPOSURES, check_name

SERVICE_PORT = 80
AWAIT_S = 30.0        # s a new Service may take to answer (kube-proxy's sync) before it is an error
_RULE = re.compile(r'^\[(\d+):\d+\] -A (\S+) .*?--comment (?:"([^"]*)"|(\S+))')


def exposure_services(cluster, backend: Pod, port: int) -> dict:
    """exposure -> KubeService: the ClusterIP and the two NodePort Services in front of ``backend``'s
    ``port``, each returned once its endpoints are ready (those made before a failure are deleted)."""
    ports = [{"name": "http", "port": SERVICE_PORT, "targetPort": port, "protocol": "TCP"}]
    made: dict = {}
    try:
        for exposure, typ, policy in (("clusterip", "ClusterIP", None),
                                      ("nodeport-local", "NodePort", "Local"),
                                      ("nodeport-cluster", "NodePort", "Cluster")):
            made[exposure] = cluster.add_service(f"exp-{backend.name}-{exposure}", backend, type=typ,
                                                 external_traffic_policy=policy, ports=ports)
    except BaseException:
        _delete(cluster, made)
        raise
    return made


def _delete(cluster, services: dict) -> None:
    for svc in services.values():
        try:
            cluster.api.delete("service", svc.name, cluster.namespace)
        except InfrastructureError:
            pass  # the run namespace goes at cluster.close() anyway


class KubeServices:
    """``services``: what ``exposure_services`` made for the same backend and port beforehand (the
    gate makes them with its pods, so that kube-proxy has programmed them long before the first
    request); else they are made here."""

    def __init__(self, cluster, backend: Pod, port: int, ingress_node: str | None = None,
                 iptables_save: Callable[[], str] | None = None, ingress: Pod | None = None,
                 services: dict | None = None):
        self.cluster, self.backend, self.port = cluster, backend, port
        self.iptables_save = iptables_save
        self.services: dict = dict(services or {})
        self.ingress: Pod | None = None
        self._closed = False
        try:
            if not self.services:
                self.services = exposure_services(cluster, backend, port)
            # the ingress proxy's pod: given (made with others, no responders of its own) or made now
            self.ingress = ingress or cluster.add_pod(f"{backend.name}-ingress", ingress_node or backend.node,
                                                      responders=())
            cluster.start_responders(self.ingress, ("proxy",), upstream=host_port(backend.ip, port))
        except BaseException:
            self.close()
            raise

    def target(self, exposure: str, client: Pod) -> tuple[str, int]:
        """(host, port) a client uses for ``exposure``."""
        check_name(exposure)
        if exposure == "pod-ip":
            return self.backend.ip, self.port
        if exposure == "ingress":
            return self.ingress.ip, RESPONDER_PORTS["proxy"]
        svc = self.services[exposure]
        if exposure == "clusterip":
            return svc.cluster_ip, SERVICE_PORT
        if exposure == "nodeport-local":
            return self.cluster.node_ip(self.backend.node), svc.node_ports["http"]
        others = [n for n in self.cluster.nodes if n != self.backend.node]
        if not others:
            raise Unsupported("nodeport-cluster needs a node without the backend (2+ nodes)")
        return self.cluster.node_ip(client.node if client.node in others else others[0]), svc.node_ports["http"]

    def await_reachable(self, client: Pod, timeout: float = AWAIT_S) -> None:
        """Return once every Service path answers one HTTP request from ``client``. Ready endpoints
        are not a programmed Service: kube-proxy writes a new Service's rules in its next sync (at
        most one per minSyncPeriod, 1 s by default) and refuses connections to it until then. Asked
        every ``reachable.POLL_S``; InfrastructureError naming the paths still failing after ``timeout``."""
        from netslo.traffic.probes import ProbeSpec
        from netslo.traffic.probes.reachable import await_answers
        paths = {}
        for e in self.services:
            try:
                paths[e] = self.target(e, client)
            except Unsupported:   # a path this cluster cannot offer: its test says so
                pass
        specs = {e: ProbeSpec("http", host, port, count=1, interval=0.01, wait=1.0) for e, (host, port) in paths.items()}
        _, failing = await_answers(lambda spec: self.cluster.probe(client, spec), specs, timeout)
        if failing:
            raise InfrastructureError(f"Services not answering from pod {client.name} after {timeout:g}s "
                                      "(kube-proxy has not programmed them): "
                                      + "; ".join(f"{e} {host_port(*paths[e])}: {w}" for e, w in failing.items()))

    def counters(self) -> dict[str, int]:
        """Packets kube-proxy's rules of each exposure matched so far (plus 'masquerade')."""
        if self.iptables_save is None:
            raise Unsupported("packet counters of kube-proxy rules need node access (iptables_save)")
        return parse_kube_proxy_counters(self.iptables_save(), self.cluster.namespace,
                                         {e: s.name for e, s in self.services.items()})

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _delete(self.cluster, self.services)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def parse_kube_proxy_counters(iptables_save: str, namespace: str, names: dict[str, str]) -> dict[str, int]:
    """``iptables-save -c -t nat`` of kube-proxy (iptables mode) -> {exposure: packets, 'masquerade': n}.

    ClusterIP: the KUBE-SERVICES rule commented '<ns>/<svc>:http cluster IP'; NodePort: the
    KUBE-NODEPORTS rule commented '<ns>/<svc>:http'; masquerade: rules commented 'masquerade traffic
    for <ns>/<svc>:http external destinations' of netslo's Services.
    """
    by_svc = {f"{namespace}/{svc}:http": exposure for exposure, svc in names.items()}
    out: dict[str, int] = {e: 0 for e in names}
    out["masquerade"] = 0
    for line in iptables_save.splitlines():
        m = _RULE.match(line)
        if not m:
            continue
        packets, chain, comment = int(m.group(1)), m.group(2), m.group(3) or m.group(4)
        if chain == "KUBE-SERVICES" and comment.endswith(" cluster IP") and comment[:-11] in by_svc:
            out[by_svc[comment[:-11]]] += packets
        elif chain == "KUBE-NODEPORTS" and comment in by_svc:
            out[by_svc[comment]] += packets
        elif comment.startswith("masquerade traffic for ") and comment.endswith(" external destinations"):
            if comment[len("masquerade traffic for "):-len(" external destinations")] in by_svc:
                out["masquerade"] += packets
    return out


__all__ = ["KubeServices", "parse_kube_proxy_counters", "EXPOSURES"]
