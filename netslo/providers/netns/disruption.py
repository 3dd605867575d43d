"""Disruption actions of the embedded provider (``netslo.providers.disruption``).

* ``drop-<duration>[-up|-down]``: the server pod's IPv4 packets dropped for that long, at its eth0:
  arriving (up: the client's requests), leaving (down: the answers), or both (``netslo.impair.drop``:
  tc from this process, so the true outage is known to about the send interval: the controls that show
  the probes measure an outage they were given).
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

from netslo.core import netns_access
from netslo.impair.drop import Drops
from netslo.providers.base import Pod
from netslo.providers.disruption import Action, Disruptions, drop_spec

CLEAN_WINDOW_S = 1.5     # after an action: its recovery and a clean second (stats.disruption.CLEAN_S)
AGENT_RESTART = "agent-restart"
AGENT_ROLL = "agent-roll"
ROLL_GAP_S = 0.2         # between two nodes' emulated agent restarts in a roll


class NetnsDisruptions(Disruptions):
    """The embedded provider's actions (module doc); what they put in place goes on ``close()``."""

    def __init__(self, cluster):
        self.cluster = cluster
        self._drops = Drops()
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
        return Action(name, lambda: self._drops.hold(ns, "eth0", seconds, direction),
                      f"IPv4 dropped {direction} at {where} for {seconds * 1e3:g} ms (tc u32 -> mirred to a down ifb)",
                      seconds + CLEAN_WINDOW_S)

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
        """Remove the drops' qdiscs and sink devices, and program the routes an interrupted action left out."""
        self._drops.close()
        for node in list(self._routes_out):
            with netns_access.rtnl(self.cluster.node_netns(self.cluster.nodes[node])) as ipr:
                self.cluster.program_node_routes(ipr, node, "add")
            self._routes_out.remove(node)
