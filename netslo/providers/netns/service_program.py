"""Emulated Service programming for the embedded provider: kube-proxy's iptables mode, on demand.

``create()`` puts, in every node namespace at once (each node's kube-proxy acts on its own), the
DNAT rule kube-proxy would into chain ``NETSLO-SVCP`` (jumped to from ``nat PREROUTING``): ClusterIP
``10.96.200.<k>:80`` -> backend, or NodePort (any local address, port ``30000+k``) -> backend.

The Service maps TCP: the study opens a new connection per request, so no flow seen before the
Service existed (a conntrack entry without NAT) carries over into a trial; ``create()`` adds the DNAT and
``delete()`` flushes the chain, one ``iptables-restore`` per node and change.
The client must be on another node than the backend on the ``bridge``/``vxlan`` datapaths (the
answer would bypass the node's conntrack without br_netfilter, as in ``netslo.providers.netns.services``).
Change ``endpoint`` (``service_program.CHANGES``): the emulated Service is the same DNAT rule, so
adding its one endpoint is the same one ``iptables-restore`` per node as creating it (kube-proxy's
iptables mode writes the endpoint's rules when either changes); the report says which was measured.
Reports say "emulated".
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.providers.base import Pod
from netslo.providers.service_program import ServiceProgram, check_change, check_type

CHAIN = "NETSLO-SVCP"
CLUSTER_IP = "10.96.200.{}"
SERVICE_PORT = 80
NODE_PORT = 30000
COMMENT = "-m comment --comment netslo:svc-program"
_next = itertools.count(1)


class NetnsServiceProgram(ServiceProgram):
    emulated = True
    description = "emulated: kube-proxy-like iptables DNAT on every node at once"

    def __init__(self, cluster, backend: Pod, port: int, type: str, client: Pod, change: str = "service"):
        check_type(type)
        self.change = check_change(change)
        if change == "endpoint":
            self.description = "emulated: kube-proxy-like iptables DNAT for the Service's one endpoint, on every node at once"
        if shutil.which("iptables-restore") is None:
            raise Unsupported("emulated Services need iptables (Debian package 'iptables')", "tool")
        if client.node == backend.node and cluster.datapath in ("bridge", "vxlan"):
            raise Unsupported(f"a {type} client on the backend's node on the embedded {cluster.datapath} datapath "
                              "(answers bypass the node's conntrack without br_netfilter)", "provider")
        self.cluster, self.type = cluster, type
        k = next(_next)
        if type == "ClusterIP":
            self.target = (CLUSTER_IP.format(k), SERVICE_PORT)
            match = f"-d {self.target[0]}/32 -p tcp -m tcp --dport {SERVICE_PORT}"
        else:
            self.target = (cluster.node_ip(backend.node), NODE_PORT + k)
            match = f"-p tcp -m addrtype --dst-type LOCAL -m tcp --dport {self.target[1]}"
        self.dnat = f"{match} {COMMENT} -j DNAT --to-destination {backend.ip}:{port}"
        self._hooked: list[str] = []
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=len(cluster.nodes), thread_name_prefix="svc-program")
        try:
            for node in cluster.nodes:
                ns = cluster.node_netns(node)
                self._hooked.append(ns)
                self._restore(ns, f"*nat\n:{CHAIN} - [0:0]\n-I PREROUTING 1 -j {CHAIN}\nCOMMIT\n")
        except BaseException:
            self.close()
            raise

    def _restore(self, ns: str, script: str, check: bool = True) -> None:
        run = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "iptables-restore", "-w", "5", "--noflush"],
                             input=script, capture_output=True, text=True, timeout=60)
        if check and run.returncode:
            raise InfrastructureError(f"iptables-restore in {ns}: {run.stderr.strip() or run.returncode}")

    def _on_every_node(self, script: str) -> None:
        list(self._pool.map(lambda ns: self._restore(ns, script), self._hooked))

    def create(self) -> None:
        self._on_every_node(f"*nat\n-A {CHAIN} {self.dnat}\nCOMMIT\n")

    def delete(self) -> None:
        self._on_every_node(f"*nat\n-F {CHAIN}\nCOMMIT\n")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        for ns in self._hooked:   # each piece alone: whatever state a failure left, the rest still goes
            for script in (f"*nat\n-D PREROUTING -j {CHAIN}\nCOMMIT\n", f"*nat\n-F {CHAIN}\n-X {CHAIN}\nCOMMIT\n"):
                self._restore(ns, script, check=False)   # a namespace already gone took its rules with it
