"""A timed IPv4 drop on one interface of a network namespace: the disruption studies' DROP and partition.

A tc u32 filter on a clsact qdisc redirects every IPv4 packet to an ifb device that is down, which drops
it (act_mirred drops what it cannot deliver; this kernel has no gact). The filters are added and the
qdisc deleted by netlink from this process (well under a millisecond each), so the true length of the
drop is known to about the probes' send interval. ARP and IPv6 pass.

    drops = Drops()
    marks = drops.hold(netns, "eth0", 0.2, "both")   # returns once the drop is over
    drops.close()                                     # whatever an interrupted hold left: gone
    reap(netns, "eth0")                               # ... also one a killed process left

``hold`` returns CLOCK_MONOTONIC ns marks (``time.monotonic_ns``): ``on_start``/``on_end`` around the
filters' insertion, ``off_start``/``off_end`` around the qdisc's deletion (``netslo.providers.disruption``).
"""

from __future__ import annotations

import time

from pyroute2.netlink.exceptions import NetlinkError

from netslo.core import netns_access
from netslo.core.errors import InfrastructureError

ETH_P_IP = 0x0800
CLSACT_INGRESS, CLSACT_EGRESS = 0xFFFFFFF2, 0xFFFFFFF3
SINK = "nsl-drop"        # the ifb device, down, that dropped packets are redirected to
PARENTS = {"both": (CLSACT_INGRESS, CLSACT_EGRESS), "up": (CLSACT_INGRESS,), "down": (CLSACT_EGRESS,)}


class Drops:
    """Timed drops (module doc); remembers where it left a sink device so ``close()`` removes it."""

    def __init__(self):
        self._where: set[tuple[str, str]] = set()    # (namespace, interface) with a sink device beside it

    def hold(self, ns: str, ifname: str, seconds: float, direction: str) -> dict:
        """Drop IPv4 arriving at (``up``), leaving (``down``) or both ways through ``ifname`` of
        namespace ``ns`` for ``seconds``; its clock marks. InfrastructureError when tc refuses."""
        try:
            with netns_access.rtnl(ns) as ipr:
                dev = netns_access.link_index(ipr, ns, ifname, "DROP: ")
                if not ipr.link_lookup(ifname=SINK):
                    ipr.link("add", ifname=SINK, kind="ifb")     # stays down: what it is given is dropped
                self._where.add((ns, ifname))
                sink = ipr.link_lookup(ifname=SINK)[0]
                marks = {"on_start": time.monotonic_ns()}
                ipr.tc("add", "clsact", dev)
                for parent in PARENTS[direction]:
                    ipr.tc("add-filter", "u32", dev, parent=parent, prio=1, protocol=ETH_P_IP, target=0x10001,
                           keys=["0x0/0x0+0"],
                           action=[{"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": sink}])
                marks["on_end"] = time.monotonic_ns()
                time.sleep(max(0.0, seconds - (marks["on_end"] - marks["on_start"]) * 1e-9))
                marks["off_start"] = time.monotonic_ns()
                ipr.tc("del", "clsact", dev)                     # its filters with it, both directions at once
                marks["off_end"] = time.monotonic_ns()
        except NetlinkError as e:
            self.close()
            raise InfrastructureError(f"DROP at {ifname} in {ns}: tc failed: {e}") from None
        return marks

    def close(self) -> None:
        """Remove the clsact qdiscs and sink devices this object made. Idempotent; a namespace that is
        gone (its cluster deleted) is skipped."""
        for ns, ifname in list(self._where):
            reap(ns, ifname)
            self._where.discard((ns, ifname))


def reap(ns: str, ifname: str) -> str | None:
    """Remove a drop from ``ifname`` of namespace ``ns`` if a sink device shows one was made there (by
    this process, or by a run killed while it held one: a kind node it left partitioned); what was
    removed, or None. A namespace that is gone is skipped."""
    try:
        with netns_access.rtnl(ns) as ipr:
            sinks = ipr.link_lookup(ifname=SINK)
            if not sinks:
                return None
            for dev in ipr.link_lookup(ifname=ifname):
                try:
                    ipr.tc("del", "clsact", dev)
                except NetlinkError:
                    pass    # none left
            for idx in sinks:
                ipr.link("del", index=idx)
    except (OSError, NetlinkError):
        return None   # its namespace went with the cluster
    return f"removed the DROP at {ifname} (its clsact qdisc and the {SINK} sink device)"
