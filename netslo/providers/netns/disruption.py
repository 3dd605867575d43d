"""Disruption actions of the embedded provider (``netslo.providers.disruption``).

* ``drop-<duration>[-up|-down]``: the server pod's IPv4 packets dropped for that long, at its eth0:
  arriving (up: the client's requests), leaving (down: the answers), or both. A tc u32 filter on a
  clsact qdisc redirects every IPv4 packet to an ifb device that is down, which drops it (act_mirred
  drops what it cannot deliver; this kernel has no gact). The filters are added and the qdisc
  deleted by netlink from this process (well under a millisecond each), so the true outage is known to
  about the send interval: the controls that show the probes measure an outage they were given.
  ARP and IPv6 pass.
* ``partition-<duration>``: the same at the server node's eth0 (its underlay link): the node cut off
  from the others, so cross-node paths lose their packets and same-node ones do not.
* ``agent-restart`` (*emulated*): the server node's routes to the other nodes' pod CIDRs (and, on the
  vxlan datapath, its VXLAN FDB and neighbour entries) deleted and programmed again at once, the way
  a CNI agent that starts afresh re-programs its node. Same-node paths do not cross those routes.
* ``agent-roll`` (*emulated*): the same on the path's nodes in turn (the client's and the server's, by
  name), ``ROLL_GAP_S`` apart, the way a DaemonSet rolled to a new revision restarts its agents node by
  node (the other nodes' agents do not touch this path's routes).
"""

from __future__ import annotations

import time

from pyroute2.netlink.exceptions import NetlinkError

from netslo.core import netns_access
from netslo.core.errors import InfrastructureError
from netslo.providers.base import Pod
from netslo.providers.disruption import Action, Disruptions, drop_spec

CLEAN_WINDOW_S = 1.5     # after an action: its recovery and a clean second (stats.disruption.CLEAN_S)
AGENT_RESTART = "agent-restart"
AGENT_ROLL = "agent-roll"
ROLL_GAP_S = 0.2         # between two nodes' emulated agent restarts in a roll
ETH_P_IP = 0x0800
CLSACT_INGRESS, CLSACT_EGRESS = 0xFFFFFFF2, 0xFFFFFFF3
SINK = "nsl-drop"        # the ifb device, down, that dropped packets are redirected to


class NetnsDisruptions(Disruptions):
    """The embedded provider's actions (module doc); what they put in place goes on ``close()``."""

    def __init__(self, cluster):
        self.cluster = cluster
        self._netns: set[str] = set()        # namespaces with a sink device (and maybe a clsact left)
        self._routes_out: list[int] = []     # nodes whose routes are deleted now

    def action(self, name: str, client: Pod, server: Pod) -> Action:
        if name == AGENT_RESTART:
            node = self.cluster._node_index(server.node)
            return Action(name, lambda: self._reprogram(node), f"emulated: node {server.node}'s routes to the other "
                          "nodes' pod CIDRs deleted and programmed again (a CNI agent starting afresh)",
                          CLEAN_WINDOW_S, emulated=True)
        if name == AGENT_ROLL:
            nodes = sorted({self.cluster._node_index(client.node), self.cluster._node_index(server.node)})
            where = " and ".join(self.cluster.nodes[i] for i in nodes)
            return Action(name, lambda: self._roll(nodes), f"emulated: the routes of {where} to the other nodes' pod "
                          f"CIDRs deleted and programmed again, node by node {ROLL_GAP_S * 1e3:g} ms apart (a CNI "
                          "DaemonSet rolled)", CLEAN_WINDOW_S + len(nodes) * ROLL_GAP_S, emulated=True)
        kind, seconds, direction = drop_spec(name)
        if kind == "partition":   # the server node cut off the underlay: cross-node paths, not same-node
            ns, where = self.cluster.node_netns(server.node), f"node {server.node}'s underlay eth0"
        else:
            ns, where = self.cluster.netns_of(server), f"pod {server.name}'s eth0"
        return Action(name, lambda: self._drop(ns, seconds, direction),
                      f"IPv4 dropped {direction} at {where} for {seconds * 1e3:g} ms (tc u32 -> mirred to a down ifb)",
                      seconds + CLEAN_WINDOW_S)

    def _drop(self, ns: str, seconds: float, direction: str) -> dict:
        parents = {"both": (CLSACT_INGRESS, CLSACT_EGRESS), "up": (CLSACT_INGRESS,), "down": (CLSACT_EGRESS,)}[direction]
        try:
            with netns_access.rtnl(ns) as ipr:
                eth = ipr.link_lookup(ifname="eth0")[0]
                if not ipr.link_lookup(ifname=SINK):
                    ipr.link("add", ifname=SINK, kind="ifb")     # stays down: what it is given is dropped
                self._netns.add(ns)
                sink = ipr.link_lookup(ifname=SINK)[0]
                marks = {"on_start": time.monotonic_ns()}
                ipr.tc("add", "clsact", eth)
                for parent in parents:
                    ipr.tc("add-filter", "u32", eth, parent=parent, prio=1, protocol=ETH_P_IP, target=0x10001,
                           keys=["0x0/0x0+0"],
                           action=[{"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": sink}])
                marks["on_end"] = time.monotonic_ns()
                time.sleep(max(0.0, seconds - (marks["on_end"] - marks["on_start"]) * 1e-9))
                marks["off_start"] = time.monotonic_ns()
                ipr.tc("del", "clsact", eth)                     # its filters with it, both directions at once
                marks["off_end"] = time.monotonic_ns()
        except NetlinkError as e:
            self.close()
            raise InfrastructureError(f"DROP in {ns}: tc failed: {e}") from None
        return marks

    def _reprogram(self, node: int) -> dict:
        marks = {"on_start": time.monotonic_ns()}
        with netns_access.rtnl(self.cluster.node_netns(self.cluster.nodes[node])) as ipr:
            self._routes_out.append(node)
            self.cluster.program_node_routes(ipr, node, "del")
            marks["on_end"] = marks["off_start"] = time.monotonic_ns()
            self.cluster.program_node_routes(ipr, node, "add")
            self._routes_out.remove(node)
        marks["off_end"] = time.monotonic_ns()
        return marks

    def _roll(self, nodes: list[int]) -> dict:
        marks = {}
        for k, i in enumerate(nodes):
            if k:
                time.sleep(ROLL_GAP_S)
            one = self._reprogram(i)
            marks.setdefault("on_start", one["on_start"])
            marks["on_end"], marks["off_start"], marks["off_end"] = one["on_end"], one["off_start"], one["off_end"]
        return marks

    def close(self) -> None:
        """Remove the drop qdiscs and sink devices, and program the routes an interrupted action left out."""
        for ns in list(self._netns):
            try:
                with netns_access.rtnl(ns) as ipr:
                    eth = ipr.link_lookup(ifname="eth0")[0]
                    try:
                        ipr.tc("del", "clsact", eth)
                    except NetlinkError:
                        pass    # none left
                    for idx in ipr.link_lookup(ifname=SINK):
                        ipr.link("del", index=idx)
            except (OSError, NetlinkError, IndexError):
                pass   # its namespace went with the cluster
            self._netns.discard(ns)
        for node in list(self._routes_out):
            with netns_access.rtnl(self.cluster.node_netns(self.cluster.nodes[node])) as ipr:
                self.cluster.program_node_routes(ipr, node, "add")
            self._routes_out.remove(node)
