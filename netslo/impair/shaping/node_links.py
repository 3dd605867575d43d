"""A node's links as the QoS studies act on them, whatever the provider: ``cluster.node_links(node)``.

``NodeLinks`` is the one interface; the studies (``netslo.studies.qos.experiments``, the bandwidth tests)
use only it and never ask which provider they run on:

    uplink, layer, tunnel_port        the node's uplink device (where cross-node pod traffic leaves:
                                      the embedded node's eth0, a real node's default-route device)
                                      and where a pod's DSCP is visible there: "ip", or "vxlan-inner"
                                      when the CNI tunnels (VXLAN UDP port ``tunnel_port``) and the
                                      outer header carries no mark (netslo.studies.qos.limits)
    priority(policy)                  with-block: htb classes keyed on DSCP on the uplink egress
                                      (``netslo.impair.shaping.priority``), the cluster's control traffic
                                      (``control``: its TCP ports) beside them; yields the
                                      read-back ``Installed``
    class_counters()                  {flowid: bytes} of the htb classes on the uplink
    bottleneck(rate_bits, queue_s)    with-block: a root tbf on the uplink; yields ``Bottleneck``
    random_drop(p, src, dst, dport)   with-block: drop TCP segments src -> dst:dport with probability
                                      ``p`` where they leave this node; yields ``counts() -> (dropped,
                                      matched)``
    pod_bandwidth(pod)                {'ingress','egress'}: rates (bits/s) the kernel holds for a pod of
                                      this node (the CNI's tbf/ifb on its host-side interface)
    pod_link_mtu(pod) / pod_mtu(pod)  MTU of the pod's host-side interface / of its eth0
    reshape_pod(pod, egress_bits)     replace whatever shapes the pod's egress with netslo's tbf at
                                      this rate (the broken-plugin control)
    root_qdisc(ifname)                kind of the root qdisc of a device of the node

Two implementations: ``LocalNodeLinks`` here (a namespace this process can enter: the embedded netns
provider's nodes; the node agent uses it on its own node) and ``netslo.providers.kube.links.AgentNodeLinks``
(kind, minikube, existing: every operation is ``python -m netslo.agent qos ...`` in the node agent
DaemonSet on that node). Rates are bits/s, times seconds.
"""

from __future__ import annotations

import abc
import contextlib

from netslo.core import netns_access
from netslo.impair.shaping import bandwidth, priority, qdiscs

HERE = "/proc/self/ns/net"     # the namespace of the process itself (a hostNetwork node agent: the node's)


def drop_match(src: str, dst: str, dport: int) -> list[str]:
    """iptables match of TCP segments ``src`` -> ``dst``:``dport`` (the packet's own header)."""
    return ["-p", "tcp", "-s", src, "-d", dst, "--dport", str(dport)]


def _hex_ip(ip: str) -> str:
    return "0x" + "".join(f"{int(x):02x}" for x in ip.split("."))


def tunnel_drop_match(src: str, dst: str, dport: int, port: int, uplink: str) -> list[str]:
    """iptables match of the same segments VXLAN-encapsulated on ``uplink`` (xt_u32 on fixed
    offsets: outer IPv4 without options, UDP to ``port``, inner Ethernet + IPv4 without options, TCP):
    a tunnel whose encapsulation bypasses the FORWARD chain (an eBPF redirect) still passes here."""
    u32 = "&&".join(["8>>16&0xFF=17", f"20&0xFFFF={port}", "56&0xFF=6", f"62={_hex_ip(src)}", f"66={_hex_ip(dst)}",
                     f"70&0xFFFF={dport}"])
    return ["-o", uplink, "-m", "u32", "--u32", u32]


class NodeLinks(abc.ABC):
    """What the QoS studies do on one node's links (see the module docstring)."""

    node: str
    uplink: str
    layer: str = "ip"
    tunnel_port: int = priority.VXLAN_PORT
    control: tuple = ()     # the cluster's control traffic through the uplink: priority.install's ``control``

    # ---- primitives: each implementation does these where the node is ---------------------------
    @abc.abstractmethod
    def install_priority(self, policy: priority.QosPolicy) -> priority.Installed: ...

    @abc.abstractmethod
    def clear(self, kind: str) -> None:
        """Remove netslo's root qdisc of ``kind`` (tbf, htb) from the uplink; already gone is fine."""

    @abc.abstractmethod
    def class_counters(self) -> dict: ...

    @abc.abstractmethod
    def install_bottleneck(self, rate_bits: float, queue_s: float) -> qdiscs.Bottleneck: ...

    @abc.abstractmethod
    def add_drop(self, probability: float, src: str, dst: str, dport: int) -> object:
        """Install the counting + random-drop rules; returns a handle for ``drop_counts``/``remove_drop``."""

    @abc.abstractmethod
    def drop_counts(self, handle) -> tuple[int, int]: ...

    @abc.abstractmethod
    def remove_drop(self, handle) -> None: ...

    @abc.abstractmethod
    def pod_bandwidth(self, pod) -> dict: ...

    @abc.abstractmethod
    def pod_link_mtu(self, pod) -> int: ...

    @abc.abstractmethod
    def pod_mtu(self, pod) -> int: ...

    @abc.abstractmethod
    def reshape_pod(self, pod, egress_bits: float) -> None: ...

    @abc.abstractmethod
    def root_qdisc(self, ifname: str) -> str | None: ...

    # ---- with-blocks, the same for every implementation ---------------------------------------------
    @contextlib.contextmanager
    def priority(self, policy: priority.QosPolicy):
        inst = self.install_priority(policy)
        try:
            yield inst
        finally:
            self.clear("htb")

    @contextlib.contextmanager
    def bottleneck(self, rate_bits: float, queue_s: float = 0.05):
        b = self.install_bottleneck(rate_bits, queue_s)
        try:
            yield b
        finally:
            self.clear("tbf")

    @contextlib.contextmanager
    def random_drop(self, probability: float, src: str, dst: str, dport: int):
        handle = self.add_drop(probability, src, dst, dport)
        try:
            yield _Counts(self, handle)
        finally:
            self.remove_drop(handle)


class _Counts:
    def __init__(self, links: NodeLinks, handle):
        self.links, self.handle = links, handle

    def counts(self) -> tuple[int, int]:
        """(packets dropped, packets that reached the rule)."""
        return self.links.drop_counts(self.handle)


class LocalNodeLinks(NodeLinks):
    """A node namespace this process can enter (a name under /run/netns or a path; ``HERE``: its own).

    ``host_interface(pod) -> name`` and ``pod_netns(pod) -> namespace`` say where a pod of this node
    is; ``tunnel_rules``: random drop on the encapsulated packets leaving the uplink, inserted first
    (a real node, where a CNI owns the FORWARD chain or bypasses it), instead of the FORWARD chain
    appended (the embedded node, whose FORWARD chain is netslo's alone)."""

    def __init__(self, node: str, netns: str, uplink: str = "eth0", layer: str = "ip",
                 tunnel_port: int = priority.VXLAN_PORT, host_interface=None, pod_netns=None,
                 tunnel_rules: bool = False, control: tuple = ()):
        self.node, self.netns, self.uplink, self.layer, self.tunnel_port = node, netns, uplink, layer, tunnel_port
        self.control = control
        self._host_if, self._pod_netns, self._tunnel_rules = host_interface, pod_netns, tunnel_rules

    def install_priority(self, policy):
        return priority.install(self.netns, self.uplink, policy, self.layer, port=self.tunnel_port,
                                control=self.control)

    def clear(self, kind: str) -> None:
        qdiscs.clear_root(self.netns, self.uplink, kind)

    def class_counters(self) -> dict:
        return priority.class_counters(self.netns, self.uplink)

    def install_bottleneck(self, rate_bits, queue_s):
        return qdiscs.install_tbf(self.netns, self.uplink, rate_bits, queue_s)

    def drop_rules(self, probability, src, dst, dport) -> qdiscs.RandomDrop:
        if self._tunnel_rules and self.layer == "vxlan-inner":
            match = tunnel_drop_match(src, dst, dport, self.tunnel_port, self.uplink)
            return qdiscs.drop_rules(self.netns, probability, match, "mangle", "POSTROUTING")
        return qdiscs.drop_rules(self.netns, probability, drop_match(src, dst, dport))

    def add_drop(self, probability, src, dst, dport):
        rules = self.drop_rules(probability, src, dst, dport)
        rules.add(first=self._tunnel_rules)
        return rules

    def drop_counts(self, handle):
        return handle.counts()

    def remove_drop(self, handle):
        handle.remove()

    def pod_bandwidth(self, pod) -> dict:
        return bandwidth.read(self.netns, self._host_if(pod))

    def pod_link_mtu(self, pod) -> int:
        return bandwidth.link_mtu(self.netns, self._host_if(pod))

    def pod_mtu(self, pod) -> int:
        return bandwidth.link_mtu(self._pod_netns(pod), "eth0")

    def reshape_pod(self, pod, egress_bits: float) -> None:
        host_if = self._host_if(pod)
        bandwidth.remove(bandwidth.Shaping(self.netns, host_if, None, None, None))
        bandwidth.install(self.netns, host_if, None, egress_bits)

    def root_qdisc(self, ifname: str) -> str | None:
        return bandwidth.root_qdisc(self.netns, ifname)


def uplink_of(netns: str = HERE) -> dict:
    """A real node's uplink seen in its namespace: {'uplink': default-route device, 'layer',
    'tunnel_port', 'tunnels': [VXLAN devices]}. A VXLAN device of the CNI (vxlan.calico, cilium_vxlan)
    makes the layer "vxlan-inner" at its UDP port."""
    with netns_access.rtnl(netns) as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        routes = [r for r in ipr.get_default_routes(family=2) if r.get_attr("RTA_OIF") in names]
        uplink = names[routes[0].get_attr("RTA_OIF")] if routes else "eth0"
        tunnels = {}
        for link in ipr.get_links():
            info = link.get_attr("IFLA_LINKINFO")
            if info is not None and info.get_attr("IFLA_INFO_KIND") == "vxlan":
                data = info.get_attr("IFLA_INFO_DATA")
                tunnels[link.get_attr("IFLA_IFNAME")] = (data.get_attr("IFLA_VXLAN_PORT") if data else None) \
                    or priority.VXLAN_PORT
    port = sorted(tunnels.values())[0] if tunnels else priority.VXLAN_PORT
    return {"uplink": uplink, "layer": "vxlan-inner" if tunnels else "ip", "tunnel_port": port,
            "tunnels": sorted(tunnels)}
