"""Service programming on a real cluster: a Service with a requested address, created and deleted,
or a Service whose one backend is added to its endpoints and taken out again.

The Service selects one agent pod and maps TCP ``port`` to it. Change ``service``: its address is fixed
up front so a client can send to it before it exists: ClusterIP ``spec.clusterIP`` = a free address in
the /24 of the ``default/kubernetes`` Service (the service range starts there), NodePort
``spec.ports[].nodePort`` = a free port in 30000-32767 on the backend's node. ``create()`` is the one API
call the study times: what follows (EndpointSlice by the controller, kube-proxy or the CNI's load
balancer on the client's node) is the network programming the measurement covers. ``delete()`` waits
until the Service is gone. Change ``endpoint``: the Service is made once, its selector also asking for
label ``netslo.io/svc-member=<its name>``, which no pod has; ``create()`` puts that label on the backend
pod (one patch: the EndpointSlice controller then adds the pod, and the data plane follows),
``delete()`` removes it.

``quiet_s`` (``service_program``) comes from kube-proxy's ``minSyncPeriod`` (``kube_proxy_sync``):
a reset may take two syncs (the Service's removal, then its EndpointSlice's, at most one period
apart), and the next change must come one full period after the last of them; ``QUIET_MARGIN_S``
covers the syncs' own run (~65 ms each on kind + Calico here) and the watch events' delivery.
"""

from __future__ import annotations

import ipaddress
import random

from netslo.core.errors import InfrastructureError
from netslo.providers.base import Pod
from netslo.providers.kube import manifests as km
from netslo.providers.kube import proxy_sync as kube_proxy_sync
from netslo.providers.kube.wait import wait_deleted
from netslo.providers.service_program import ServiceProgram, check_change, check_type

NODE_PORTS = (30000, 32767)
TRIES = 20
MEMBER_LABEL = "netslo.io/svc-member"
QUIET_MARGIN_S = 0.5    # s beyond two kube-proxy sync periods after a reset (see the module docstring)
# s conntrack keeps an unanswered SYN's entry (nf_conntrack_tcp_timeout_syn_sent's default): one to a
# ClusterIP sent before kube-proxy programmed it holds no DNAT, and a later SYN on its tuple follows it
SYN_SENT_S = 120.0


class KubeServiceProgram(ServiceProgram):
    emulated = False
    description = "a real Service; kube-proxy or the CNI's load balancer programs it"
    tuple_return_s = SYN_SENT_S

    def __init__(self, cluster, backend: Pod, port: int, type: str, client: Pod, change: str = "service"):
        check_type(type)
        self.cluster, self.api, self.type, self.change = cluster, cluster.api, type, check_change(change)
        self.name = km.k8s_name(f"svcp-{backend.name}-{type.lower()}" + ("-ep" if change == "endpoint" else ""))
        self.manifest = km.service_manifest(self.name, cluster.run_id, backend.name, type=type,
                                            ports=[{"name": "tcp", "port": port, "targetPort": port, "protocol": "TCP"}])
        self._pod = cluster.k8s_pod_name(backend)
        self._closed = False
        min_sync, self.quiet_why = kube_proxy_sync.read(self.api)
        self.quiet_s = 2 * min_sync + QUIET_MARGIN_S if min_sync > 0 else 0.0
        if change == "service":
            self._reserve(backend, port)
            return
        self.manifest["spec"]["selector"][MEMBER_LABEL] = self.name
        self._create_service()
        self.target = self._target(self.api.get("service", self.name, cluster.namespace)["spec"], backend, port)

    def _target(self, spec: dict, backend: Pod, port: int) -> tuple:
        """(host, port) the client sends to: the ClusterIP, or the backend node's NodePort, of ``spec``."""
        return ((spec["clusterIP"], port) if self.type == "ClusterIP"
                else (self.cluster.node_ip(backend.node), spec["ports"][0]["nodePort"]))

    def _reserve(self, backend: Pod, port: int) -> None:
        """Pick the address by creating the Service once (a conflict: another pick) and deleting it."""
        rng = random.Random()
        kube_ip = ipaddress.ip_address(self.api.get("service", "kubernetes", "default")["spec"]["clusterIP"])
        net = ipaddress.ip_network(f"{kube_ip}/24", strict=False)
        spec = self.manifest["spec"]
        for _ in range(TRIES):
            if self.type == "ClusterIP":
                spec["clusterIP"] = str(net.network_address + rng.randrange(100, 250))
            else:
                spec["ports"][0]["nodePort"] = rng.randint(*NODE_PORTS)
            try:
                self._create_service()
            except InfrastructureError as e:
                if "already allocated" in str(e) or "provided port is already" in str(e):
                    continue
                raise
            self._delete_service()
            self.target = self._target(spec, backend, port)
            return
        raise InfrastructureError(f"no free {self.type} address for Service {self.name} in {TRIES} tries")

    def _create_service(self) -> None:
        self.api.create(self.manifest, what=f"create service {self.cluster.namespace}/{self.name}")

    def _delete_service(self) -> None:
        self.api.delete("service", self.name, self.cluster.namespace)
        wait_deleted(self.api, "service", self.name, self.cluster.namespace, 60.0)

    def _member(self, on: bool) -> None:
        self.api.patch("pod", self._pod, self.cluster.namespace,
                       {"metadata": {"labels": {MEMBER_LABEL: self.name if on else None}}},
                       what=f"{'label' if on else 'unlabel'} pod {self.cluster.namespace}/{self._pod} "
                            f"as an endpoint of service {self.name}")

    def create(self) -> None:
        if self.change == "service":
            self._create_service()
        else:
            self._member(True)

    def delete(self) -> None:
        if self.change == "service":
            self._delete_service()
        else:
            self._member(False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        steps = [lambda: self.api.delete("service", self.name, self.cluster.namespace)]
        if self.change == "endpoint":
            steps.insert(0, lambda: self._member(False))
        for step in steps:   # each alone: whatever a failure left, the rest still goes
            try:
                step()
            except InfrastructureError:
                pass   # the run namespace goes with the cluster
