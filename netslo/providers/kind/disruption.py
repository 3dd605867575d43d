"""Disruption actions of a kind cluster: the Kubernetes ones (``netslo.providers.kube.disruption``) and,
because every node is a container of this host, a partition done from here.

* ``partition-<duration>``: the server's node cut off the underlay for that long: every IPv4 packet
  into and out of its container's eth0 dropped (``netslo.impair.drop``, in the node container's
  network namespace, from this process), so paths to the other nodes lose their packets (encapsulated
  or routed alike) and same-node ones do not. Everything else on that node loses them too: its
  kubelet's and agents' connections to the API server, as in a real partition; they are TCP and resume.
  A partition of at most ``PARTITION_MAX_S`` (beyond it the node's lease would expire and the cluster
  would start evicting, which is another action).
"""

from __future__ import annotations

from netslo.core.errors import SpecError
from netslo.impair.drop import Drops
from netslo.providers.base import Pod
from netslo.providers.disruption import Action, drop_spec
from netslo.providers.kube.disruption import KubeDisruptions

CLEAN_WINDOW_S = 3.0     # after a partition: TCP's retransmission (1 s after a loss, doubling) and a clean second
PARTITION_MAX_S = 30.0


class KindDisruptions(KubeDisruptions):
    """``KubeDisruptions`` plus ``partition-<duration>`` (module doc)."""

    def __init__(self, cluster):
        super().__init__(cluster)
        self._drops = Drops()

    def action(self, name: str, client: Pod, server: Pod) -> Action:
        if not name.startswith("partition-"):
            return super().action(name, client, server)
        _, seconds, direction = drop_spec(name)
        if direction != "both" or seconds > PARTITION_MAX_S:
            raise SpecError("action", name, f"partition-<duration> of at most {PARTITION_MAX_S:g} s, both ways")
        ns = self.cluster.node_netns(server.node)
        return Action(name, lambda: self._drops.hold(ns, "eth0", seconds, "both"),
                      f"node {server.node} partitioned: IPv4 dropped both ways at its container's eth0 for "
                      f"{seconds * 1e3:g} ms (tc u32 -> mirred to a down ifb)", seconds + CLEAN_WINDOW_S)

    def close(self) -> None:
        """Remove the partitions' qdiscs and sink devices (the node containers' namespaces)."""
        self._drops.close()
        super().close()
