"""Disruption actions of a kind cluster: the Kubernetes ones (``netslo.providers.kube.disruption``) and,
because every node is a container of this host, a partition done from here.

* ``partition-<duration>``: the server's node cut off the underlay for that long: every IPv4 packet
  into and out of its container's eth0 dropped (``netslo.impair.drop``, in the node container's
  network namespace, from this process), so paths to the other nodes lose their packets (encapsulated
  or routed alike) and same-node ones do not. Everything else on that node loses them too: its
  kubelet's and agents' connections to the API server, as in a real partition; they are TCP and resume.
  A partition of at most ``PARTITION_MAX_S`` (beyond it the node's lease would expire and the cluster
  would start evicting, which is another action).
* ``api-server-restart``: the kube-apiserver container of the control-plane node stopped (``crictl
  stop``, SIGTERM and the kubelet starts a new one, as an upgrade's static-pod restart does), until
  ``/readyz`` answers 200 again (marks: ``on_start``/``on_end`` the stop, ``off_end`` ready). Control
  plane only: the data plane is expected to carry on, and the trial's loss and outage say whether it
  did. Every exec stream ends with the server, so the study's probes run detached.
"""

from __future__ import annotations

import subprocess
import time

from netslo.core.errors import InfrastructureError, SpecError
from netslo.impair.drop import Drops
from netslo.providers.base import Pod
from netslo.providers.disruption import Action, drop_spec
from netslo.providers.kind import host as kind_host
from netslo.providers.kube.disruption import KubeDisruptions

# s: the stop, the kubelet starting a new kube-apiserver container, its readiness and a clean stretch
API_WINDOW_S = 45.0
API_READY_TIMEOUT_S = 40.0
CLEAN_WINDOW_S = 3.0     # after a partition: TCP's retransmission (1 s after a loss, doubling) and a clean second
PARTITION_MAX_S = 30.0


class KindDisruptions(KubeDisruptions):
    """``KubeDisruptions`` plus ``partition-<duration>`` (module doc)."""

    def __init__(self, cluster):
        super().__init__(cluster)
        self._drops = Drops()

    def action(self, name: str, client: Pod, server: Pod) -> Action:
        if name == "api-server-restart":
            return Action(name, self._restart_api_server, f"kube-apiserver on {self._control_plane()} stopped "
                          "(crictl stop) until /readyz answers again; control plane only", API_WINDOW_S,
                          detached_probes=True)
        if not name.startswith("partition-"):
            return super().action(name, client, server)
        _, seconds, direction = drop_spec(name)
        if direction != "both" or seconds > PARTITION_MAX_S:
            raise SpecError("action", name, f"partition-<duration> of at most {PARTITION_MAX_S:g} s, both ways")
        ns = self.cluster.node_netns(server.node)
        return Action(name, lambda: self._drops.hold(ns, "eth0", seconds, "both"),
                      f"node {server.node} partitioned: IPv4 dropped both ways at its container's eth0 for "
                      f"{seconds * 1e3:g} ms (tc u32 -> mirred to a down ifb)", seconds + CLEAN_WINDOW_S)

    def _control_plane(self) -> str:
        return self.cluster.kind_provider.node_names()[0]   # <name>-control-plane

    def _apiserver_id(self, node: str) -> str:
        r = subprocess.run([kind_host.DOCKER_CLI, "exec", node, "crictl", "ps", "--name", "kube-apiserver", "-q"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""

    def _settled(self, node: str, deadline: float) -> str:
        """The running kube-apiserver container once /readyz answers 200 three looks in a row (a restart
        before may still be settling: the kubelet replaces a static pod's container more than once)."""
        good = 0
        cid = ""
        while time.monotonic() < deadline:
            cid = self._apiserver_id(node)
            good = good + 1 if cid and self.cluster.api.ready() else 0
            if good >= 3:
                return cid
            time.sleep(0.2)
        raise InfrastructureError(f"kube-apiserver on {node} not running and ready within {API_READY_TIMEOUT_S:.0f} s "
                                  f"(container: {cid[:13] or 'none'})")

    def _restart_api_server(self) -> dict:
        node = self._control_plane()
        old = self._settled(node, time.monotonic() + API_READY_TIMEOUT_S)
        marks = {"on_start": time.monotonic_ns()}
        r = subprocess.run([kind_host.DOCKER_CLI, "exec", node, "crictl", "stop", old], capture_output=True,
                           text=True, timeout=60)
        marks["on_end"] = time.monotonic_ns()
        if r.returncode != 0:
            raise InfrastructureError(f"crictl stop {old} on {node}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        deadline = time.monotonic() + API_READY_TIMEOUT_S
        while time.monotonic() < deadline:
            new = self._apiserver_id(node)
            if new and new != old:
                new = self._settled(node, deadline)
                marks["off_start"] = marks["off_end"] = time.monotonic_ns()
                marks["container"] = new[:13]
                return marks
            time.sleep(0.2)
        raise InfrastructureError(f"kube-apiserver on {node} not ready within {API_READY_TIMEOUT_S:.0f} s of its "
                                  f"stop (container {old[:13]} stopped, new: {self._apiserver_id(node)[:13] or 'none'})")

    def close(self) -> None:
        """Remove the partitions' qdiscs and sink devices (the node containers' namespaces)."""
        self._drops.close()
        super().close()
