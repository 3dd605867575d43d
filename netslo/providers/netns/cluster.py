"""Embedded provider: an emulated pod network made of Linux network namespaces (needs root).

Layout for a run with id ``RID`` (6 hex digits) and N nodes:

    nsl-RID-sw           underlay switch: bridge ``br0``; node i plugged in as ``n<i>``
    nsl-RID-node<i>      a node: ``eth0`` 172.18.0.(10+i)/24 on the underlay, IP forwarding on
    nsl-RID-<pod>        a pod: ``eth0`` on a veth pair whose other end lives in its node

Datapaths (pod CIDR 10.244.<i>.0/24 and fd00:10:244:<i>::/64 on node i):
  bridge   kindnet/host-gw-like: node bridge ``cni0`` 10.244.i.1/24 and fd00:10:244:i::1/64;
           cross-node routes via node IPs
  routed   Calico-like: pod /32 (and /128), default route via 169.254.1.1 answered by proxy-ARP (IPv6:
           via the link-local fe80::ecee:eeff:feee:eeee, Calico's, on the host veth ``cali<k>``), one
           /32 (/128) route per pod on the node; cross-node routes via node IPs
  vxlan    Flannel-like overlay: bridge as above plus VXLAN ``flannel.1`` (VNI 1, port 4789) with
           static FDB/neighbour entries; IPv6 pods' packets ride the same IPv4 tunnel (routes via the
           remote VTEP's link-local, a permanent neighbour); pod MTU 1450

IP families (``ip_family``): ``dual`` (both, the default), ``ipv4`` or ``ipv6`` pods; nodes always
carry the IPv4 underlay (``eth0`` also gets fd00:172:18::(10+i)/64 when IPv6 is on). IPv6 addresses
are added without duplicate address detection (``nodad``, ``accept_dad=0`` on nodes), so they are
usable at once, as a CNI's are.

Every namespace carries the run id; ``/run/netslo/RID/owner.pid`` names the owning process. A later
run (or ``python -m netslo reap``) removes namespaces, processes, state and temp files of dead owners.
It is an emulation: reports say ``emulated`` and never claim to be a real CNI.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pyroute2 import netns

from netslo.agent import forkserver
from netslo.core import evidence, netns_access, scratch
from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.core.families import IPV4, IPV6, families_of
from netslo.core.phase_times import timed_call
from netslo.core.procs import CHILD_CWD, LIVE_RUNS, alive, child_env, owned_elsewhere_or_here
from netslo.providers import DATAPATHS, NETNS_MAX_MTU, NETNS_MAX_NODES, NETNS_MIN_MTU, POOL_LABEL, ZONE_LABEL
from netslo.providers.base import RESPONDER_PORTS, Cluster, PathPoint, Pod

STATE_ROOT = Path("/run/netslo")
NETNS_DIR = Path("/run/netns")
NAME_RE = re.compile(r"^nsl-([0-9a-f]{6})-")
UNDERLAY = "172.18.0.{}"
UNDERLAY6 = "fd00:172:18::{}"
POD6 = "fd00:10:244:{}::{}"                 # node index, host number (written as hex digits; see _v6)
CALICO_GATEWAY6 = "fe80::ecee:eeff:feee:eeee"   # the link-local Calico gives every host veth
IFA_F_NODAD = 0x02
VXLAN_MTU = NETNS_MAX_MTU["vxlan"]    # the VXLAN device: the underlay's 1500 less its 50 B of headers
FORKSERVER_START_S = 30.0
# how each probe process starts: a report key, so a regression report against baselines measured
# with fresh interpreters (before 2026-11-25) says that the measuring instrument changed
AGENT_START = "fork of a warm agent (netslo.agent.forkserver)"
# the last stderr line of an agent run that could not reach its peer (then the error carries evidence)
CONNECT_FAILURE = re.compile(r"timed out|timeout|refused|unreachable|no route to host|connection reset|"
                             r"ETIMEDOUT|ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ECONNRESET", re.I)


# ---- process helpers --------------------------------------------------------------------------


def pids_with_netns(inode: int) -> list[int]:
    """PIDs of processes whose network namespace has ``inode`` (as ``stat`` of a namespace file gives it)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def pids_in_netns(name: str) -> list[int]:
    """PIDs of other processes whose network namespace is /run/netns/NAME (or the path NAME)."""
    try:
        target = os.stat(NETNS_DIR / name).st_ino
    except FileNotFoundError:
        return []
    return [p for p in pids_with_netns(target) if p != os.getpid()]


def _target_ip(argv: list[str]) -> str | None:
    """The first IP address in ``argv`` ('--target 10.244.0.2:7001', '--target [fd00::2]:7001' or
    a bare address of either family), or None."""
    for arg in argv:
        m = (re.fullmatch(r"(\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?", arg)
             or re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:\d+", arg) or re.fullmatch(r"([0-9a-fA-F]*:[0-9a-fA-F:.]+)", arg))
        if m:
            return m.group(1)
    return None


def _v6(address: str) -> str:
    """An IPv6 address in its canonical text (RFC 5952), as the kernel and peers print it."""
    return str(ipaddress.IPv6Address(address))


UDP_RESPONDERS = ("udp", "dns")     # responder kinds that serve on a UDP port (the rest: TCP)
TCP_LISTEN, UDP_UNCONNECTED = "0A", "07"   # socket states in /proc/net/{tcp,udp}[6]


def bound_ports(pid: int, transport: str) -> set[int] | None:
    """Ports with a listening TCP socket (``transport`` 'tcp') or an unconnected bound UDP socket
    ('udp') in the network namespace of process ``pid`` (its /proc/PID/net tables, both families);
    None when they cannot be read (the process is gone)."""
    state = TCP_LISTEN if transport == "tcp" else UDP_UNCONNECTED
    ports = set()
    for table in (transport, transport + "6"):
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            return None
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == state:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _kill_all(pids: list[int], grace: float = 1.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.02)
        pids = [p for p in pids if alive(p)]
        if not pids:
            return


def reap(dry_run: bool = False, keep_run: str | None = None) -> list[str]:
    """Remove namespaces/processes/state of netslo runs whose owner process is gone.

    Returns one human line per thing removed (or that would be removed with ``dry_run``)."""
    said = []
    runs: dict[str, list[str]] = {}
    for name in sorted(netns.listnetns()):
        m = NAME_RE.match(name)
        if m:
            runs.setdefault(m.group(1), []).append(name)
    if STATE_ROOT.is_dir():
        for d in STATE_ROOT.iterdir():
            if re.fullmatch(r"[0-9a-f]{6}", d.name):
                runs.setdefault(d.name, [])
    for rid, names in sorted(runs.items()):
        if rid == keep_run:
            continue
        owner = STATE_ROOT / rid / "owner.pid"
        try:
            pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            pid = None
        if owned_elsewhere_or_here(rid, pid):
            continue  # a live run owns it
        for name in names:
            pids = pids_in_netns(name)
            said.append(f"reap: run {rid}: namespace {name}" + (f" and processes {pids}" if pids else ""))
            if not dry_run:
                _kill_all(pids)
                try:
                    netns.remove(name)
                except OSError:
                    pass
        if (STATE_ROOT / rid).exists():
            said.append(f"reap: run {rid}: state dir {STATE_ROOT / rid}")
            if not dry_run:
                shutil.rmtree(STATE_ROOT / rid, ignore_errors=True)
    if not os.environ.get("NETSLO_UML_GUEST"):  # inside a guest the host's owner PIDs look dead
        from netslo.providers.netns import uml  # user-mode-linux guests of dead runs (netem where the host lacks it)
        said += uml.reap(dry_run=dry_run)
        said += scratch.reap(dry_run=dry_run)   # temp files and directories of dead runs
    return said


CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21


def effective_caps() -> int:
    """This process's effective capability mask (CapEff in /proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def require_privileges() -> None:
    """InfrastructureError naming what is missing when namespaces cannot be created here."""
    caps = effective_caps()
    missing = [name for bit, name in ((CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"))
               if not caps >> bit & 1]
    if missing:
        raise InfrastructureError(
            f"the netns provider needs {' and '.join(missing)} (it creates network namespaces, veth pairs and "
            f"routes); run as root, e.g. `sudo python3 -m pytest -m cni`, or use --netslo-provider existing")


# ---- the cluster --------------------------------------------------------------------------------

class NetnsCluster(Cluster):
    """An emulated cluster in network namespaces on this kernel."""

    provider = "netns"
    emulated = True
    shared_clock = True

    def __init__(self, nodes: int = 2, datapath: str = "bridge", run_id: str | None = None,
                 fork_responders: bool = False, ip_family: str = "dual", zones: int = 1, pools: int = 1,
                 mtu: int | None = None):
        if datapath not in DATAPATHS:
            raise SpecError("--netslo-datapath", datapath, f"one of {', '.join(DATAPATHS)}")
        self.families = families_of(ip_family)
        self.ip_family = ip_family
        if not isinstance(nodes, int) or not 1 <= nodes <= NETNS_MAX_NODES:
            raise SpecError("--netslo-nodes", nodes, f"a whole number 1..{NETNS_MAX_NODES}")
        for name, value in (("--netslo-zones", zones), ("--netslo-pools", pools)):
            if not isinstance(value, int) or not 1 <= value <= nodes:
                raise SpecError(name, value, f"a whole number 1..{nodes} (the nodes)")
        self.zones, self.pools = zones, pools
        top = NETNS_MAX_MTU[datapath]
        if mtu is not None and (not isinstance(mtu, int) or not NETNS_MIN_MTU <= mtu <= top):
            raise SpecError("mtu", mtu, f"a whole number {NETNS_MIN_MTU}..{top} on the {datapath} datapath")
        require_privileges()
        run_id = run_id or os.environ.get("NETSLO_RUN_ID") or secrets.token_hex(3)
        if not re.fullmatch(r"[0-9a-f]{6}", run_id):
            raise SpecError("NETSLO_RUN_ID", run_id, "6 lowercase hex digits")
        self.run_id = run_id
        self.datapath = datapath
        self.node_count = nodes
        self.fork_responders = fork_responders   # responders forked from the warm agent (see start_responders)
        self.state = STATE_ROOT / self.run_id
        self._namespaces: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._responders: dict = {}     # (pod name, protocol) -> its process
        self._forkserver: subprocess.Popen | None = None
        self._forkserver_lock = threading.Lock()
        self._pods: dict[str, Pod] = {}
        self._pod_ns: dict[str, str] = {}
        self._next_host = {}
        self._closed = False
        self.mtu = mtu or top      # the pods' veths and the bridge (vxlan: VXLAN_MTU)
        LIVE_RUNS.add(self.run_id)
        self.reaped = reap(keep_run=self.run_id)
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "owner.pid").write_text(str(os.getpid()))
        atexit.register(self.close)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- naming
    def ns_name(self, role: str) -> str:
        return f"nsl-{self.run_id}-{role}"

    @property
    def nodes(self) -> list[str]:
        return [f"node{i}" for i in range(self.node_count)]

    def node_labels(self, node: str) -> dict[str, str]:
        """Emulated zone and pool labels: zones in contiguous blocks of nodes (zone-a, zone-b, ...),
        pools across them (node i in pool-(i mod pools))."""
        i = self._node_index(node)
        return {ZONE_LABEL: f"zone-{chr(ord('a') + i * self.zones // self.node_count)}",
                POOL_LABEL: f"pool-{i % self.pools}"}

    def _node_index(self, node: str) -> int:
        if node not in self.nodes:
            raise SpecError("node", node, f"one of {', '.join(self.nodes)}")
        return self.nodes.index(node)

    # -- low-level helpers
    def _create_ns(self, role: str) -> str:
        name = self.ns_name(role)
        netns.create(name)
        self._namespaces.append(name)
        return name

    def sysctl(self, ns: str, settings: dict[str, str]) -> None:
        """Write sysctls inside namespace ``ns`` (net.* are per namespace)."""
        try:
            netns_access.write_sysctls(ns, settings)
        except OSError as e:
            raise InfrastructureError(f"sysctl in {ns} failed: {e.strerror or e}") from None

    @staticmethod
    def _up(ipr, ifname: str, **extra) -> int:
        idx = ipr.link_lookup(ifname=ifname)[0]
        ipr.link("set", index=idx, state="up", **extra)
        return idx

    # -- topology
    @property
    def v6(self) -> bool:
        return IPV6 in self.families

    @property
    def v4(self) -> bool:
        return IPV4 in self.families

    def _addr6(self, ipr, index: int, address: str, prefixlen: int) -> None:
        """An IPv6 address usable at once (no duplicate address detection)."""
        ipr.addr("add", index=index, address=address, prefixlen=prefixlen, flags=IFA_F_NODAD)

    def _build(self) -> None:
        sw_ns = self._create_ns("sw")
        with netns_access.rtnl(sw_ns) as sw:
            # no multicast snooping: IPv6 neighbour discovery is multicast, and a snooping bridge
            # would forward it by group memberships the pods have not reported yet
            sw.link("add", ifname="br0", kind="bridge", br_mcast_snooping=0)
            self._up(sw, "br0")
            self._up(sw, "lo")
            for i in range(self.node_count):
                node_ns = self._create_ns(f"node{i}")
                # before its devices exist: they take the namespace's defaults (accept_dad=0)
                self.sysctl(node_ns, self._node_sysctls())
                sw.link("add", ifname=f"n{i}", kind="veth",
                        peer={"ifname": "eth0", "net_ns_fd": node_ns, "address": self._node_mac(i)})
                idx = sw.link_lookup(ifname=f"n{i}")[0]
                br = sw.link_lookup(ifname="br0")[0]
                sw.link("set", index=idx, master=br, state="up")
        for i in range(self.node_count):
            self._build_node(i)

    def _node_sysctls(self) -> dict[str, str]:
        """A node's forwarding and filter settings (and, with IPv6, no duplicate address detection)."""
        out = {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "0",
               "net.ipv4.conf.default.rp_filter": "0"}
        if self.v6:
            out.update({"net.ipv6.conf.all.forwarding": "1", "net.ipv6.conf.default.accept_dad": "0",
                        "net.ipv6.conf.all.accept_dad": "0"})
        return out

    def _build_node(self, i: int) -> None:
        ns = self.ns_name(f"node{i}")
        self._next_host[i] = 2
        with netns_access.rtnl(ns) as ipr:
            self._up(ipr, "lo")
            eth = self._up(ipr, "eth0")
            ipr.addr("add", index=eth, address=UNDERLAY.format(10 + i), prefixlen=24)
            if self.v6:
                self._addr6(ipr, eth, UNDERLAY6.format(10 + i), 64)
            self._underlay_neighbours(ipr, i, eth)
            if self.datapath == "routed":
                # proxy-ARP answers only for targets routed out of another interface (as on a
                # Calico node, whose default route covers 169.254.1.1): give it such a route.
                ipr.route("add", dst="169.254.1.1/32", oif=eth)
            if self.datapath in ("bridge", "vxlan"):
                # A fixed address: a bridge left to itself takes its ports' lowest MAC, so a new pod
                # would move the gateway's MAC under the pods that cached it (their frames to the old
                # address are dropped as PACKET_OTHERHOST until the neighbour entry expires).
                ipr.link("add", ifname="cni0", kind="bridge", mtu=self.mtu, address=self._gateway_mac(i),
                         br_mcast_snooping=0)
                br = self._up(ipr, "cni0")
                ipr.addr("add", index=br, address=f"10.244.{i}.1", prefixlen=24)
                if self.v6:
                    self._addr6(ipr, br, POD6.format(i, 1), 64)
            if self.datapath == "vxlan":
                ipr.link("add", ifname="flannel.1", kind="vxlan", vxlan_id=1, vxlan_port=4789,
                         vxlan_local=UNDERLAY.format(10 + i), vxlan_learning=0, mtu=VXLAN_MTU,
                         address=self._vtep_mac(i))
                vx = self._up(ipr, "flannel.1")
                ipr.addr("add", index=vx, address=f"10.244.{i}.0", prefixlen=32)
            self.program_node_routes(ipr, i)

    def program_node_routes(self, ipr, i: int, op: str = "add") -> None:
        """Node ``i``'s routes to the other nodes' pod CIDRs, with its VXLAN FDB and neighbour entries
        on the vxlan datapath (what a CNI agent programs): ``op`` "add", or "del" to remove them."""
        vx = ipr.link_lookup(ifname="flannel.1")[0] if self.datapath == "vxlan" else None
        fdb_op, neigh_op = ("append", "add") if op == "add" else ("del", "del")
        for j in range(self.node_count):
            if j == i:
                continue
            if self.datapath == "vxlan":
                ipr.fdb(fdb_op, ifindex=vx, lladdr=self._vtep_mac(j), dst=UNDERLAY.format(10 + j))
                ipr.neigh(neigh_op, dst=f"10.244.{j}.0", lladdr=self._vtep_mac(j), ifindex=vx,
                          state=0x80)  # NUD_PERMANENT
                ipr.route(op, dst=f"10.244.{j}.0/24", gateway=f"10.244.{j}.0", oif=vx,
                          flags=4)  # RTNH_F_ONLINK
                if self.v6:   # IPv6 inside the same IPv4 tunnel: via the remote VTEP's link-local
                    ipr.neigh(neigh_op, dst=self._vtep_ll6(j), lladdr=self._vtep_mac(j), ifindex=vx,
                              state=0x80, family=10)  # NUD_PERMANENT, AF_INET6
                    ipr.route(op, dst=f"{POD6.format(j, '')}/64", gateway=self._vtep_ll6(j), oif=vx)
            else:
                ipr.route(op, dst=f"10.244.{j}.0/24", gateway=UNDERLAY.format(10 + j))
                if self.v6:
                    ipr.route(op, dst=f"{POD6.format(j, '')}/64", gateway=UNDERLAY6.format(10 + j))

    def _underlay_neighbours(self, ipr, i: int, eth: int) -> None:
        """Permanent neighbour entries for every other node's underlay addresses, as a node's own ARP
        cache holds them. The kernel's neighbour table is one for all namespaces, and its
        garbage-collected entries are capped by net.ipv4.neigh.default.gc_thresh3 (1024 by default):
        n nodes learning each other's addresses need n(n - 1) of them, so 32 nodes overflowed it
        ("neighbor table overflow!", a pair losing 77 % while its nodes' entries could not be made).
        Permanent entries are not counted against that cap."""
        for j in range(self.node_count):
            if j != i:
                ipr.neigh("add", dst=UNDERLAY.format(10 + j), lladdr=self._node_mac(j), ifindex=eth,
                          state=0x80)  # NUD_PERMANENT
                if self.v6:
                    ipr.neigh("add", dst=UNDERLAY6.format(10 + j), lladdr=self._node_mac(j), ifindex=eth,
                              state=0x80, family=10)  # AF_INET6

    @staticmethod
    def _node_mac(i: int) -> str:
        """MAC of node i's underlay eth0 (172.18.0.(10+i)); 0a:58 + the IPv4 address."""
        return f"0a:58:ac:12:00:{10 + i:02x}"

    @staticmethod
    def _vtep_mac(i: int) -> str:
        """MAC of node i's VXLAN device (10.244.i.0); 0a:58 + the IPv4 address, as CNI plugins do."""
        return f"0a:58:0a:f4:{i:02x}:00"

    @staticmethod
    def _vtep_ll6(i: int) -> str:
        """The link-local address node i's VXLAN device forms from its MAC (EUI-64)."""
        return f"fe80::858:aff:fef4:{i:02x}00"

    @staticmethod
    def _gateway_mac(i: int) -> str:
        """MAC of node i's bridge, the pods' gateway 10.244.i.1."""
        return f"0a:58:0a:f4:{i:02x}:01"

    # -- pods
    @timed_call("pods")
    def add_pod(self, name: str, node: str, *, host_network: bool = False,
                annotations: dict | None = None, responders=None, cpu: str | None = None) -> Pod:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", name) or name in self._pods or name.startswith("node"):
            raise SpecError("pod name", name, "a new name of lowercase letters, digits and '-' (max 31), "
                            "not starting with 'node'")
        i = self._node_index(node)
        node_ns = self.ns_name(f"node{i}")
        if host_network:
            ip6 = _v6(UNDERLAY6.format(10 + i)) if self.v6 else ""
            pod = Pod(name, node, UNDERLAY.format(10 + i) if self.v4 else ip6, True, dict(annotations or {}), ip6)
            self._pods[name], self._pod_ns[name] = pod, node_ns
            return pod
        k = self._next_host[i]
        if k > 250:
            raise InfrastructureError(f"node {node}: pod CIDR 10.244.{i}.0/24 is full")
        self._next_host[i] = k + 1
        ip = f"10.244.{i}.{k}"
        ip6 = _v6(POD6.format(i, k)) if self.v6 else ""
        pod_ns = self._create_ns(name)
        host_if = f"cali{k}" if self.datapath == "routed" else f"veth{k}"
        with netns_access.rtnl(node_ns) as ipr:
            ipr.link("add", ifname=host_if, kind="veth", mtu=self.mtu,
                     peer={"ifname": "eth0", "net_ns_fd": pod_ns, "mtu": self.mtu})
            hidx = ipr.link_lookup(ifname=host_if)[0]
            if self.datapath == "routed":
                ipr.link("set", index=hidx, state="up")
                if self.v6:   # the pods' IPv6 gateway: Calico's link-local on every host veth
                    self._addr6(ipr, hidx, CALICO_GATEWAY6, 64)
                    ipr.route("add", dst=f"{ip6}/128", oif=hidx)
            else:
                ipr.link("set", index=hidx, master=ipr.link_lookup(ifname="cni0")[0], state="up")
        if self.datapath == "routed" and self.v4:
            self.sysctl(node_ns, {f"net.ipv4.conf.{host_if}.proxy_arp": "1",
                                  f"net.ipv4.neigh.{host_if}.proxy_delay": "0",
                                  f"net.ipv4.conf.{host_if}.rp_filter": "0"})
            with netns_access.rtnl(node_ns) as ipr:
                ipr.route("add", dst=f"{ip}/32", oif=ipr.link_lookup(ifname=host_if)[0], scope=253)
        with netns_access.rtnl(pod_ns) as ipr:
            self._up(ipr, "lo")
            eth = self._up(ipr, "eth0")
            if self.v4 and self.datapath == "routed":
                ipr.addr("add", index=eth, address=ip, prefixlen=32)
                ipr.route("add", dst="169.254.1.1/32", oif=eth, scope=253)
                ipr.route("add", dst="0.0.0.0/0", gateway="169.254.1.1", oif=eth)
            elif self.v4:
                ipr.addr("add", index=eth, address=ip, prefixlen=24)
                ipr.route("add", dst="0.0.0.0/0", gateway=f"10.244.{i}.1")
            if self.v6 and self.datapath == "routed":
                self._addr6(ipr, eth, ip6, 128)
                ipr.route("add", dst="::/0", gateway=CALICO_GATEWAY6, oif=eth)
            elif self.v6:
                self._addr6(ipr, eth, ip6, 64)
                ipr.route("add", dst="::/0", gateway=POD6.format(i, 1))
        from netslo.impair.shaping.bandwidth import apply_annotations  # kubernetes.io/{ingress,egress}-bandwidth (issue 6)
        apply_annotations(node_ns, host_if, annotations)
        pod = Pod(name, node, ip if self.v4 else ip6, False, dict(annotations or {}), ip6)
        pod.host_interface = host_if
        self._pods[name], self._pod_ns[name] = pod, pod_ns
        return pod

    def policies(self):
        """Emulated NetworkPolicy: iptables in the pod's namespace (``netslo.providers.netns.policy``)."""
        from netslo.providers.netns.policy import NetnsPolicies
        return NetnsPolicies(self)

    def disruptions(self):
        """Disruption actions: DROPs in the server pod, an emulated agent restart
        (``netslo.providers.netns.disruption``)."""
        from netslo.providers.netns.disruption import NetnsDisruptions
        return NetnsDisruptions(self)

    def service_program(self, backend: Pod, port: int, type: str, client: Pod, change: str = "service"):
        """Emulated kube-proxy Service programming (``netslo.providers.netns.service_program``)."""
        from netslo.providers.netns.service_program import NetnsServiceProgram
        return NetnsServiceProgram(self, backend, port, type, client, change)

    def netns_of(self, pod: Pod) -> str:
        """Name of the network namespace a pod (or a hostNetwork pod's node) lives in."""
        return self._pod_ns[pod.name]

    def node_ip(self, node: str) -> str:
        """The node's IPv4 address on the underlay (NodePort and hostNetwork targets), as KubeCluster's."""
        return UNDERLAY.format(10 + self._node_index(node))

    def node_netns(self, node: str) -> str:
        return self.ns_name(f"node{self._node_index(node)}")

    def node_links(self, node: str):
        """The QoS studies' ``NodeLinks`` of ``node``: its namespace, entered from here; the uplink is
        its eth0 (the underlay), where the vxlan datapath's outer header carries no mark."""
        from netslo.impair.shaping.node_links import LocalNodeLinks
        return LocalNodeLinks(node, self.node_netns(node), "eth0", "vxlan-inner" if self.datapath == "vxlan" else "ip",
                              host_interface=self.host_interface, pod_netns=self.netns_of)

    def host_interface(self, pod: Pod) -> str:
        """The pod's veth on its node (the peer of its eth0)."""
        if not getattr(pod, "host_interface", None):
            raise Unsupported(f"pod {pod.name} has no host-side interface (a hostNetwork pod)")
        return pod.host_interface

    def observation_points(self, client: Pod, server: Pod) -> list[PathPoint]:
        """Where client -> server traffic can be captured, in path order: the pods' eth0 and host
        veths, and across nodes the client node's flannel.1 (vxlan), its switch port on the underlay
        and the server node's eth0 (VXLAN-encapsulated on both with the vxlan datapath)."""
        vx = self.datapath == "vxlan"
        cnode, snode = self.node_netns(client.node), self.node_netns(server.node)
        chost, shost = self.host_interface(client), self.host_interface(server)
        points = [PathPoint("client pod eth0", self.netns_of(client), "eth0"),
                  PathPoint(f"{client.node} {chost}", cnode, chost)]
        if client.node != server.node:
            if vx:
                points.append(PathPoint(f"{client.node} flannel.1", cnode, "flannel.1"))
            port = f"n{self._node_index(client.node)}"   # the client node's port on the underlay switch
            points += [PathPoint(f"underlay {client.node}", self.ns_name("sw"), port, vx),
                       PathPoint(f"{server.node} eth0", snode, "eth0", vx)]
        points += [PathPoint(f"{server.node} {shost}", snode, shost),
                   PathPoint("server pod eth0", self.netns_of(server), "eth0")]
        return points

    # -- agents
    def _agent_argv(self, ns: str, args: list[str], module: str = "netslo.agent") -> list[str]:
        return ["nsenter", f"--net={NETNS_DIR / ns}", sys.executable, "-m", module, *args]

    @timed_call("responders")
    def start_responders(self, pod: Pod, protocols=("udp", "tcp", "http")) -> dict[str, int]:
        ports = {}
        procs = []
        for proto in protocols:
            port = RESPONDER_PORTS[proto]
            ready = self.state / f"ready-{pod.name}-{proto}"
            args = ["serve", proto, "--port", str(port), "--ready-file", str(ready)]
            with open(self.state / f"responder-{pod.name}-{proto}.log", "wb") as log:
                if self.fork_responders:
                    proc = self._agent_run(self.netns_of(pod), args, output=log.fileno())
                else:
                    proc = subprocess.Popen(self._agent_argv(self.netns_of(pod), args), stdout=log,
                                            stderr=subprocess.STDOUT, env=child_env(), start_new_session=True,
                                            cwd=CHILD_CWD)
            self._procs.append(proc)
            self._responders[(pod.name, proto)] = proc
            procs.append((proto, proc, ready))
            ports[proto] = port
        deadline = time.monotonic() + 20.0
        for proto, proc, ready in procs:
            while not ready.exists():
                if proc.poll() is not None:
                    tail = (self.state / f"responder-{pod.name}-{proto}.log").read_text()[-400:]
                    raise InfrastructureError(f"responder {proto} in pod {pod.name} exited "
                                              f"(code {proc.returncode}): {tail.strip()}")
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"responder {proto} in pod {pod.name} not ready after 20 s")
                time.sleep(0.02)
        return ports

    def responder_faults(self, pod: Pod) -> list[str]:
        """One line per responder of ``pod`` that cannot answer: it exited (its code and log's last
        lines), or it runs but its port has no listening (TCP) / bound (UDP) socket in its namespace."""
        lines = []
        for (name, proto), proc in self._responders.items():
            if name != pod.name:
                continue
            if proc.poll() is not None:
                log = self.state / f"responder-{name}-{proto}.log"
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                lines.append(f"responder {proto} in pod {name} exited (code {proc.returncode}): "
                             f"{' | '.join(tail) or 'no output'}")
            elif (port := RESPONDER_PORTS.get(proto)) is not None:
                transport = "udp" if proto in UDP_RESPONDERS else "tcp"
                bound = bound_ports(proc.pid, transport)
                if bound is not None and port not in bound:
                    lines.append(f"responder {proto} in pod {name} runs (pid {proc.pid}) but nothing "
                                 f"{'is bound to' if transport == 'udp' else 'listens on'} {transport} port {port}")
        return lines

    def exec_agent(self, pod: Pod, args: list[str], timeout: float) -> bytes:
        return self.exec_in(pod, ["__agent__", *args], timeout)

    def _agent_run(self, ns: str, args: list[str], module: str = "netslo.agent",
                   output: int | None = None) -> forkserver.Run:
        """``python -m MODULE ARGS`` in namespace ``ns``, forked from the cluster's warm agent
        (``netslo.agent.forkserver``, started on first use in node0's namespace, so close() and a later
        run's reap find it there)."""
        sock = self.state / "agent.sock"
        with self._forkserver_lock:
            if self._forkserver is None or self._forkserver.poll() is not None:
                self._start_forkserver(sock)
        return forkserver.Run(str(sock), str(NETNS_DIR / ns), module, args, child_env(), CHILD_CWD,
                              output=output)

    def _start_forkserver(self, sock: Path) -> None:
        ready = self.state / "agent.ready"
        for f in (sock, ready):
            f.unlink(missing_ok=True)
        log = open(self.state / "forkserver.log", "wb")
        self._forkserver = subprocess.Popen(
            self._agent_argv(self.ns_name("node0"), [str(sock), str(ready)], module="netslo.agent.forkserver"),
            stdout=log, stderr=subprocess.STDOUT, env=child_env(), start_new_session=True, cwd=CHILD_CWD)
        log.close()
        self._procs.append(self._forkserver)
        deadline = time.monotonic() + FORKSERVER_START_S
        while not ready.exists():
            if self._forkserver.poll() is not None or time.monotonic() > deadline:
                tail = (self.state / "forkserver.log").read_text(errors="replace").strip().splitlines()[-3:]
                raise InfrastructureError(f"the warm agent (netslo.agent.forkserver) did not start within "
                                          f"{FORKSERVER_START_S:g} s: {' | '.join(tail) or 'no output'}")
            time.sleep(0.01)

    @timed_call("bulk flows and pod commands")
    def exec_in(self, pod: Pod, argv: list[str], timeout: float = 60.0) -> bytes:
        """Run a command in the pod's network namespace ('__agent__' = the netslo agent).

        InfrastructureError when it fails; when it hangs past ``timeout`` (evidence taken before it is
        killed) or an agent run fails to connect, the error carries the path's evidence
        (``netslo.core.evidence``)."""
        ns = self.netns_of(pod)
        if argv[:1] == ["__agent__"]:
            proc = self._agent_run(ns, argv[1:])
        elif argv[:2] == [sys.executable, "-m"] and len(argv) > 2 and argv[2].startswith(forkserver.MODULE_PREFIX):
            proc = self._agent_run(ns, argv[3:], module=argv[2])       # a netslo helper, e.g. qos.tcpflow
        else:
            proc = subprocess.Popen(["nsenter", f"--net={NETNS_DIR / ns}", *argv], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=child_env(), cwd=CHILD_CWD)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            err = InfrastructureError(f"{' '.join(argv[:3])} in pod {pod.name} timed out after {timeout:.0f} s")
            try:
                err = evidence.attach(err, self.evidence_for(pod, argv))
            finally:
                proc.kill()
                proc.communicate()
            raise err from e
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        if proc.returncode:
            lines = stderr.decode(errors="replace").strip().splitlines()
            err = InfrastructureError(f"{' '.join(argv[:3])} in pod {pod.name} exited with "
                                      f"{proc.returncode}: {lines[-1] if lines else 'no output'}")
            if lines and CONNECT_FAILURE.search(lines[-1]):   # the agent, or a helper such as qos.tcpflow
                err = evidence.attach(err, self.evidence_for(pod, argv))
            raise err
        return stdout

    def evidence_for(self, pod: Pod, argv: list[str]) -> dict[str, str]:
        """``netslo.core.evidence`` sections for a flow from ``pod`` to the pod or node whose IP is in ``argv``."""
        places = self.path_places(pod, _target_ip(argv))
        sections = evidence.collect(places, flow=places[0])
        for place in places:
            served = [proto for (name, proto) in self._responders if name == place.name]
            if place.role == evidence.SERVER_ROLE and served:
                faults = self.responder_faults(self._pods[place.name])
                sections[f"responders: {place.label}"] = "\n".join(faults) or (
                    f"{', '.join(served)}: running, each with its socket")
        return sections

    def path_places(self, client: Pod, server_ip: str | None) -> list[evidence.Place]:
        """Namespaces on the path client pod -> client node -> server node -> server pod (each once),
        with the devices packets cross on the nodes (the pods' host veths, bridge, VXLAN, eth0)."""
        at_ip = [p for p in self._pods.values() if server_ip in (p.ip, p.ip6)]
        server = next((p for p in at_ip if not p.host_network), at_ip[0] if at_ip else None)
        node_ips = {UNDERLAY.format(10 + i): node for i, node in enumerate(self.nodes)}
        node_ips.update({_v6(UNDERLAY6.format(10 + i)): node for i, node in enumerate(self.nodes)})
        server_node = server.node if server is not None else node_ips.get(server_ip)
        shared = {"bridge": ("cni0",), "vxlan": ("cni0", "flannel.1"), "routed": ()}[self.datapath] + ("eth0",)

        def devices(node: str) -> tuple[str, ...]:
            ends = [p for p in (client, server) if p is not None and p.node == node]
            return tuple(p.host_interface for p in ends if getattr(p, "host_interface", None)) + shared

        places = [] if client.host_network else [
            evidence.Place("client pod", client.name, self.netns_of(client))]
        for node in dict.fromkeys(n for n in (client.node, server_node) if n is not None):
            role = ("client and server node" if node == client.node == server_node else
                    "client node" if node == client.node else "server node")
            places.append(evidence.Place(role, node, self.node_netns(node), devices(node)))
        if server is not None and not server.host_network:
            places.append(evidence.Place(evidence.SERVER_ROLE, server.name, self.netns_of(server)))
        return places

    def environment(self) -> dict[str, str]:
        def read(ns, key):
            try:
                return netns_access.sysctl(ns, key) or "?"
            except OSError:
                return "?"
        node0 = self.ns_name("node0")
        return {
            "provider": "netns (emulated pod network)",
            "emulated": "yes",
            "datapath": self.datapath + {"bridge": " (kindnet/host-gw-like)", "routed": " (Calico-like)",
                                         "vxlan": " (Flannel-like VXLAN)"}[self.datapath],
            "nodes": str(self.node_count),
            "pod_mtu": str(self.mtu),
            "ip_family": self.ip_family,
            "kernel": f"host {platform.release()}",
            "clock": "CLOCK_MONOTONIC shared by all pods (one-way delay exact)",
            "congestion_control": read(node0, "net.ipv4.tcp_congestion_control"),
            "tcp_slow_start_after_idle": read(node0, "net.ipv4.tcp_slow_start_after_idle"),
            "cpu_pinning": "none",
            "agent_start": AGENT_START,
            # responders forked too (the user-mode-linux guest, where a fresh interpreter costs ~1.5 s per
            # responder); on the host they are fresh interpreters and the key is absent, as in older baselines
            **({"responder_start": AGENT_START} if self.fork_responders else {}),
            "cpus": str(os.cpu_count()),
            "python": platform.python_version(),
            "run_id": self.run_id,
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 2.0
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for name in reversed(self._namespaces):
            _kill_all(pids_in_netns(name))
            try:
                netns.remove(name)
            except OSError:
                pass
        shutil.rmtree(self.state, ignore_errors=True)
        LIVE_RUNS.discard(self.run_id)
        try:
            atexit.unregister(self.close)
        except Exception:
            pass


class NetnsProvider:
    """Factory of NetnsCluster with the user's options."""

    def __init__(self, nodes: int = 2, datapath: str = "bridge", ip_family: str = "dual", zones: int = 1):
        families_of(ip_family)      # SpecError at start-up, before anything is created
        self.nodes, self.datapath, self.ip_family, self.zones = nodes, datapath, ip_family, zones

    def up(self) -> NetnsCluster:
        return NetnsCluster(nodes=self.nodes, datapath=self.datapath, ip_family=self.ip_family, zones=self.zones)
