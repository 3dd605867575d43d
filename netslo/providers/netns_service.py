"""Emulated Service programming for the embedded provider: kube-proxy's iptables mode, on demand.

``create()`` adds, in every node namespace, the DNAT rule kube-proxy would (chain ``NETSLO-SVCP``
jumped to from ``nat PREROUTING``): ClusterIP ``10.96.200.<k>:80`` -> backend, or NodePort (any
local address, port ``30000+k``) -> backend; then, as kube-proxy does for a UDP Service that gets
endpoints, it deletes the conntrack entries of flows to that address (an unanswered flow's entry
would keep bypassing the new NAT rule for 30 s). ``delete()`` flushes the chain and the entries
again. One ``iptables`` run per node, all nodes at once (each node's kube-proxy acts on its own). The client must be on
another node than the backend on the ``bridge``/``vxlan`` datapaths (the answer would bypass the
node's conntrack without br_netfilter, as in ``netslo.exposure``). Reports say "emulated".
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
import shutil
import subprocess

from pyroute2 import Conntrack   # imported here, not in the first measured create (~0.1 s)
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

from .. import netns_access
from ..errors import InfrastructureError, SpecError, Unsupported
from .base import Pod
from .service_program import SERVICE_TYPES, ServiceProgram

CHAIN = "NETSLO-SVCP"
CLUSTER_IP = "10.96.200.{}"
SERVICE_PORT = 80
NODE_PORT = 30000
_next = itertools.count(1)


def forget_flows(netns: str, port: int, daddr: str | None = None) -> int:
    """Delete the conntrack entries of UDP flows to ``daddr`` (any with None):``port`` in ``netns``; how many."""
    def run():
        ct = Conntrack()
        try:
            gone = 0
            for e in list(ct.dump_entries(tuple_orig=NFCTAttrTuple(daddr=daddr, proto=17) if daddr else None)):
                if e.tuple_orig.proto == 17 and e.tuple_orig.dport == port and (daddr is None or e.tuple_orig.daddr == daddr):
                    ct.entry("del", tuple_orig=e.tuple_orig)
                    gone += 1
            return gone
        finally:
            ct.close()
    return netns_access.run_in(netns, run)


class NetnsServiceProgram(ServiceProgram):
    emulated = True
    description = "emulated: kube-proxy-like iptables DNAT in every node namespace, conntrack flushed as kube-proxy does"

    def __init__(self, cluster, backend: Pod, port: int, type: str, client: Pod):
        if type not in SERVICE_TYPES:
            raise SpecError("service type", type, f"one of {', '.join(SERVICE_TYPES)}")
        if shutil.which("iptables") is None:
            raise Unsupported("emulated Services need iptables (Debian package 'iptables')", "tool")
        if client.node == backend.node and cluster.datapath in ("bridge", "vxlan"):
            raise Unsupported(f"a {type} client on the backend's node on the embedded {cluster.datapath} datapath "
                              "(answers bypass the node's conntrack without br_netfilter)", "provider")
        from .netns import UNDERLAY
        self.cluster, self.type = cluster, type
        k = next(_next)
        if type == "ClusterIP":
            self.target = (CLUSTER_IP.format(k), SERVICE_PORT)
            match = f"-d {self.target[0]}/32 -p udp --dport {SERVICE_PORT}"
        else:
            self.target = (UNDERLAY.format(10 + cluster.nodes.index(backend.node)), NODE_PORT + k)
            match = f"-m addrtype --dst-type LOCAL -p udp --dport {self.target[1]}"
        self.rule = f"{match} -m comment --comment netslo:svc-program -j DNAT --to-destination {backend.ip}:{port}"
        self._hooked: list[str] = []
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=len(cluster.nodes), thread_name_prefix="svc-program")
        try:
            for node in cluster.nodes:
                ns = cluster.node_netns(node)
                self._hooked.append(ns)
                self._ipt(ns, f"-t nat -N {CHAIN}")
                self._ipt(ns, f"-t nat -I PREROUTING 1 -j {CHAIN}")
                self._forget(ns)   # no stale flow to the address; and the first measured create is not a cold one
        except BaseException:
            self.close()
            raise

    def _ipt(self, ns: str, args: str, check: bool = True) -> None:
        run = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "iptables", "-w", "5", *args.split()],
                             capture_output=True, text=True, timeout=60)
        if check and run.returncode:
            raise InfrastructureError(f"iptables {args} in {ns}: {run.stderr.strip()}")

    def _forget(self, ns: str) -> None:
        host, port = self.target
        forget_flows(ns, port, host if self.type == "ClusterIP" else None)

    def _on_every_node(self, args: str) -> None:
        """``iptables args`` and the conntrack flush on every node at once (each node's kube-proxy
        acts on its own); the first error is raised."""
        def one(ns):
            self._ipt(ns, args)
            self._forget(ns)
        list(self._pool.map(one, self._hooked))

    def create(self) -> None:
        self._on_every_node(f"-t nat -A {CHAIN} {self.rule}")

    def delete(self) -> None:
        self._on_every_node(f"-t nat -F {CHAIN}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        for ns in self._hooked:
            for args in (f"-t nat -D PREROUTING -j {CHAIN}", f"-t nat -F {CHAIN}", f"-t nat -X {CHAIN}"):
                self._ipt(ns, args, check=False)   # a namespace already gone took its rules with it
