"""Service programming on a real cluster: a Service with a requested address, created and deleted.

The Service selects one agent pod and maps TCP ``port`` to it. Its address is fixed up front so a
client can send to it before it exists: ClusterIP ``spec.clusterIP`` = a free address in the /24 of
the ``default/kubernetes`` Service (the service range starts there), NodePort ``spec.ports[].nodePort``
= a free port in 30000-32767 on the backend's node. ``create()`` is the one API call the study times:
what follows (EndpointSlice by the controller, kube-proxy or the CNI's load balancer on the client's
node) is the network programming the measurement covers. ``delete()`` waits until the Service is gone.
"""

from __future__ import annotations

import ipaddress
import random

from ..errors import InfrastructureError
from . import kube_manifests as km
from .kube_wait import wait_deleted
from .base import Pod
from .service_program import ServiceProgram, check_type

NODE_PORTS = (30000, 32767)
TRIES = 20


class KubeServiceProgram(ServiceProgram):
    emulated = False
    description = "a real Service; kube-proxy or the CNI's load balancer programs it"

    def __init__(self, cluster, backend: Pod, port: int, type: str, client: Pod):
        check_type(type)
        self.cluster, self.api, self.type = cluster, cluster.api, type
        self.name = km.k8s_name(f"svcp-{backend.name}-{type.lower()}")
        self.manifest = km.service_manifest(self.name, cluster.run_id, backend.name, type=type,
                                            ports=[{"name": "tcp", "port": port, "targetPort": port, "protocol": "TCP"}])
        self._closed = False
        self._reserve(backend, port)

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
                self.create()
            except InfrastructureError as e:
                if "already allocated" in str(e) or "provided port is already" in str(e):
                    continue
                raise
            self.delete()
            self.target = ((spec["clusterIP"], port) if self.type == "ClusterIP"
                           else (self.cluster.node_ip(backend.node), spec["ports"][0]["nodePort"]))
            return
        raise InfrastructureError(f"no free {self.type} address for Service {self.name} in {TRIES} tries")

    def create(self) -> None:
        self.api.create(self.manifest, what=f"create service {self.cluster.namespace}/{self.name}")

    def delete(self) -> None:
        self.api.delete("service", self.name, self.cluster.namespace)
        wait_deleted(self.api, "service", self.name, self.cluster.namespace, 60.0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.api.delete("service", self.name, self.cluster.namespace)
        except InfrastructureError:
            pass   # the run namespace goes with the cluster
