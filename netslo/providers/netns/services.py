"""Service exposure paths in the embedded provider (the paths: ``netslo.providers.exposure``).

``NetnsServices`` builds them in the embedded provider the way kube-proxy's iptables mode does:
in every node namespace, a nat chain ``NETSLO-SVC`` jumped to from PREROUTING (pod traffic) and
OUTPUT (host-network clients); masquerade by firewall mark 0x4000 in POSTROUTING. Every rule
carries the comment ``netslo:<exposure>`` so its packet counter proves traffic took that path.
Rules, the ingress proxy process and its ready file are removed by ``close()`` (also on failure);
namespaces themselves belong to the cluster. Same-node clients are not supported on the embedded
``bridge``/``vxlan`` datapaths: the answer would bypass the node's conntrack (real clusters need
br_netfilter or hairpin masquerade for that).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

from netslo.core import scratch
from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.families import host_port
from netslo.providers.base import RESPONDER_PORTS, Pod
from netslo.providers.exposure import check_name

CHAIN = "NETSLO-SVC"
MASQ_MARK = "0x4000/0x4000"
CLUSTER_IP = "10.96.0.10"
SERVICE_PORT = 80
NODE_PORT_CLUSTER = 30080
NODE_PORT_LOCAL = 30081
READY_TIMEOUT_S = 20.0
_COUNTER_RE = re.compile(r"^\[(\d+):(\d+)\] .*--comment \"?netslo:([a-z-]+)\"?")


def parse_counters(iptables_save: str) -> dict[str, int]:
    """``iptables-save -c -t nat`` text -> {exposure: packets} of the rules commented netslo:<exposure>."""
    out: dict[str, int] = {}
    for line in iptables_save.splitlines():
        m = _COUNTER_RE.match(line)
        if m:
            out[m.group(3)] = out.get(m.group(3), 0) + int(m.group(1))
    return out


class NetnsServices:
    """kube-proxy-like Services and an ingress proxy for one backend (pod, port) of a NetnsCluster."""

    def __init__(self, cluster, backend: Pod, port: int, ingress_node: str | None = None):
        if shutil.which("iptables") is None:
            raise Unsupported("Service exposure paths need iptables (Debian package 'iptables')")
        self.cluster, self.backend, self.port = cluster, backend, port
        self.ingress_node = ingress_node or backend.node
        self.ingress: Pod | None = None
        self._proxy: subprocess.Popen | None = None
        self._tmp = scratch.mkdtemp("exposure")
        self._installed: list[str] = []
        self._closed = False
        try:
            self._install()
            self._start_ingress()
        except BaseException:
            self.close()
            raise

    # -- helpers
    def node_ip(self, node: str) -> str:
        from netslo.providers.netns.cluster import UNDERLAY
        return UNDERLAY.format(10 + self.cluster.nodes.index(node))

    def _ipt(self, node: str, args: list[str], check: bool = True) -> str:
        ns = self.cluster.node_netns(node)
        run = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "iptables", "-w", "5", *args],
                             capture_output=True, text=True)
        if check and run.returncode:
            raise InfrastructureError(f"iptables {' '.join(args)} in {ns}: {run.stderr.strip()}")
        return run.stdout

    # -- build
    def _install(self) -> None:
        backend = host_port(self.backend.ip, self.port)
        for node in self.cluster.nodes:
            self._installed.append(node)
            ip = self.node_ip(node)
            self._ipt(node, ["-t", "nat", "-N", CHAIN])
            for hook in ("PREROUTING", "OUTPUT"):
                self._ipt(node, ["-t", "nat", "-A", hook, "-j", CHAIN])
            self._ipt(node, ["-t", "nat", "-A", "POSTROUTING", "-m", "mark", "--mark", MASQ_MARK,
                             "-m", "comment", "--comment", "netslo:masquerade", "-j", "MASQUERADE"])
            rules = [
                ["-d", f"{CLUSTER_IP}/32", "-p", "tcp", "--dport", str(SERVICE_PORT),
                 "-m", "comment", "--comment", "netslo:clusterip", "-j", "DNAT", "--to-destination", backend],
                ["-d", f"{ip}/32", "-p", "tcp", "--dport", str(NODE_PORT_CLUSTER),
                 "-j", "MARK", "--or-mark", MASQ_MARK.split("/")[0]],
                ["-d", f"{ip}/32", "-p", "tcp", "--dport", str(NODE_PORT_CLUSTER),
                 "-m", "comment", "--comment", "netslo:nodeport-cluster", "-j", "DNAT", "--to-destination", backend],
            ]
            if node == self.backend.node:  # externalTrafficPolicy=Local: only nodes with a backend answer
                rules.append(["-d", f"{ip}/32", "-p", "tcp", "--dport", str(NODE_PORT_LOCAL),
                              "-m", "comment", "--comment", "netslo:nodeport-local",
                              "-j", "DNAT", "--to-destination", backend])
            else:  # ... and the others drop, as kube-proxy does without a local endpoint
                self._ipt(node, ["-t", "filter", "-A", "INPUT", *self._local_drop(ip)])
            for rule in rules:
                self._ipt(node, ["-t", "nat", "-A", CHAIN, *rule])

    @staticmethod
    def _local_drop(ip: str) -> list[str]:
        return ["-d", f"{ip}/32", "-p", "tcp", "--dport", str(NODE_PORT_LOCAL),
                "-m", "comment", "--comment", "netslo:nodeport-local-drop", "-j", "DROP"]

    def _start_ingress(self) -> None:
        from netslo.core.procs import CHILD_CWD, child_env
        from netslo.providers.netns.cluster import NETNS_DIR
        self.ingress = self.cluster.add_pod(f"ingress-{self.backend.name}"[:31], self.ingress_node)
        ready = self._tmp / "ready"
        log = open(self._tmp / "proxy.log", "wb")
        argv = ["nsenter", f"--net={NETNS_DIR / self.cluster.netns_of(self.ingress)}", sys.executable, "-m",
                "netslo.agent", "serve", "proxy", "--port", str(RESPONDER_PORTS["proxy"]),
                "--upstream", host_port(self.backend.ip, self.port), "--ready-file", str(ready)]
        self._proxy = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=child_env(),
                                       start_new_session=True, cwd=CHILD_CWD)
        log.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if self._proxy.poll() is not None:
                tail = (self._tmp / "proxy.log").read_text(errors="replace")[-400:].strip()
                raise InfrastructureError(f"ingress proxy exited (code {self._proxy.returncode}): {tail}")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"ingress proxy not ready after {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.02)

    # -- use
    def target(self, exposure: str, client: Pod) -> tuple[str, int]:
        """(host, port) a client uses to reach the backend over ``exposure``."""
        check_name(exposure)
        if client.node == self.backend.node and exposure in ("clusterip", "nodeport-local", "nodeport-cluster") \
                and getattr(self.cluster, "datapath", "") in ("bridge", "vxlan"):
            raise Unsupported(f"{exposure} from a same-node client on the embedded {self.cluster.datapath} "
                              "datapath (answers bypass the node's conntrack without br_netfilter)")
        if exposure == "pod-ip":
            return self.backend.ip, self.port
        if exposure == "clusterip":
            return CLUSTER_IP, SERVICE_PORT
        if exposure == "nodeport-local":
            return self.node_ip(self.backend.node), NODE_PORT_LOCAL
        if exposure == "nodeport-cluster":
            others = [n for n in self.cluster.nodes if n != self.backend.node]
            if not others:
                raise Unsupported("nodeport-cluster needs a node without the backend (use --netslo-nodes 2 or more)")
            return self.node_ip(client.node if client.node in others else others[0]), NODE_PORT_CLUSTER
        return self.ingress.ip, RESPONDER_PORTS["proxy"]

    def await_reachable(self, client: Pod) -> None:
        """Every path answers once made (the rules are written before ``__init__`` returns): nothing to
        wait for. (Kubernetes Services do need it: ``KubeServices.await_reachable``.)"""

    def counters(self) -> dict[str, int]:
        """Packets matched so far per rule comment, summed over nodes (NAT rules see each connection once)."""
        total: dict[str, int] = {}
        for node in self.cluster.nodes:
            ns = self.cluster.node_netns(node)
            for table in ("nat", "filter"):
                run = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "iptables-save", "-c", "-t", table],
                                     capture_output=True, text=True)
                for k, v in parse_counters(run.stdout).items():
                    total[k] = total.get(k, 0) + v
        return total

    def close(self) -> None:
        """Stop the proxy and delete every rule and chain this object created. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._proxy is not None and self._proxy.poll() is None:
            self._proxy.terminate()
            try:
                self._proxy.wait(timeout=3.0)
            except subprocess.TimeoutExpired:
                self._proxy.kill()
                self._proxy.wait()
        for node in self._installed:
            try:
                self._uninstall(node)
            except Exception:
                pass  # the namespace may be gone already; then so are its rules
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _uninstall(self, node: str) -> None:
        for hook in ("PREROUTING", "OUTPUT"):
            self._ipt(node, ["-t", "nat", "-D", hook, "-j", CHAIN], check=False)
        self._ipt(node, ["-t", "nat", "-D", "POSTROUTING", "-m", "mark", "--mark", MASQ_MARK,
                         "-m", "comment", "--comment", "netslo:masquerade", "-j", "MASQUERADE"], check=False)
        self._ipt(node, ["-t", "nat", "-F", CHAIN], check=False)
        self._ipt(node, ["-t", "nat", "-X", CHAIN], check=False)
        if node != self.backend.node:
            self._ipt(node, ["-t", "filter", "-D", "INPUT", *self._local_drop(self.node_ip(node))], check=False)

    def rules_left(self) -> int:
        """How many netslo rules/chains remain in the cluster's node namespaces (0 after close)."""
        left = 0
        for node in self.cluster.nodes:
            ns = self.cluster.node_netns(node)
            for table in ("nat", "filter"):
                run = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "iptables-save", "-t", table],
                                     capture_output=True, text=True)
                left += sum(1 for line in run.stdout.splitlines() if "netslo:" in line or CHAIN in line)
        return left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
