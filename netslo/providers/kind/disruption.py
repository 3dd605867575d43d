"""Disruption actions of a kind cluster: the Kubernetes ones (``netslo.providers.kube.disruption``) and,
because every node is a container of this host, a partition done from here.

* ``partition-<duration>``: the server's node cut off the underlay for that long: every IPv4 packet
  into and out of its container's eth0 dropped (``netslo.impair.drop``, in the node container's
  network namespace, from this process), so paths to the other nodes lose their packets (encapsulated
  or routed alike) and same-node ones do not. Everything else on that node loses them too: its
  kubelet's and agents' connections to the API server, as in a real partition; they are TCP and resume.
  A partition of at most ``PARTITION_MAX_S`` (beyond it the node's lease would expire and the cluster
  would start evicting, which is another action).
* ``api-server-restart``: the kube-apiserver static pod of the control-plane node restarted the way a
  control-plane upgrade restarts it: its manifest rewritten in place with a new
  ``netslo.io/restarted-at`` annotation (written beside ``/etc/kubernetes/manifests`` and moved into it),
  so the kubelet sees a new pod and replaces the old one, and no crash-loop back-off applies (a
  container stopped with ``crictl stop`` is a failed container to the kubelet, restarted after 10 s,
  20 s, 40 s, …). Until ``/readyz`` answers 200 three looks in a row from a new container (marks:
  ``on_start``/``on_end`` the rewrite, ``off_end`` ready). Control plane only: the data plane is
  expected to carry on, and the trial's loss and outage say whether it did. Every exec stream ends
  with the server, so the study's probes run detached.
"""

from __future__ import annotations

import subprocess
import time

import yaml

from netslo.core.errors import InfrastructureError, SpecError
from netslo.impair.drop import Drops
from netslo.providers.base import Pod
from netslo.providers.disruption import Action, drop_spec
from netslo.providers.kind import host as kind_host
from netslo.providers.kube.api import tail
from netslo.providers.kube.disruption import KubeDisruptions

# s: the kubelet replacing the kube-apiserver pod (the old one's graceful end: the new container ran
# 36-41 s after the rewrite, ready 39-43 s, on kind v1.34 here), its readiness and a clean stretch
API_READY_TIMEOUT_S = 75.0
API_WINDOW_S = 80.0
APISERVER_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
RESTART_ANNOTATION = "netslo.io/restarted-at"
CLEAN_WINDOW_S = 3.0     # after a partition: TCP's retransmission (1 s after a loss, doubling) and a clean second
PARTITION_MAX_S = 30.0


class KindDisruptions(KubeDisruptions):
    """``KubeDisruptions`` plus ``partition-<duration>`` (module doc)."""

    def __init__(self, cluster):
        super().__init__(cluster)
        self._drops = Drops()

    def action(self, name: str, client: Pod, server: Pod) -> Action:
        if name == "api-server-restart":
            return Action(name, self._restart_api_server, f"kube-apiserver on {self._control_plane()} restarted "
                          "(its static pod manifest rewritten) until /readyz answers again; control plane only", API_WINDOW_S,
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

    def _node_exec(self, node: str, *argv: str, stdin: str | None = None,
                   timeout: float = 30) -> subprocess.CompletedProcess:
        """``argv`` run in ``node``'s container (``docker exec``, ``stdin`` fed when given)."""
        return subprocess.run([kind_host.DOCKER_CLI, "exec", *(["-i"] if stdin is not None else []), node, *argv],
                              input=stdin, capture_output=True, text=True, timeout=timeout)

    def _apiserver_id(self, node: str) -> str:
        r = self._node_exec(node, "crictl", "ps", "--name", "kube-apiserver", "-q")
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

    def _rewrite_manifest(self, node: str) -> None:
        """The static pod manifest with a new ``RESTART_ANNOTATION`` (module doc), moved in atomically."""
        r = self._node_exec(node, "cat", APISERVER_MANIFEST)
        if r.returncode != 0:
            raise InfrastructureError(f"cat {APISERVER_MANIFEST} on {node}: exit {r.returncode}: {tail(r.stderr)}")
        pod = yaml.safe_load(r.stdout)
        pod.setdefault("metadata", {}).setdefault("annotations", {})[RESTART_ANNOTATION] = str(time.time_ns())
        staged = APISERVER_MANIFEST.replace("/manifests/", "/.netslo-")   # beside the directory the kubelet reads
        r = self._node_exec(node, "sh", "-c", 'cat > "$1" && mv "$1" "$2"', "sh", staged, APISERVER_MANIFEST,
                            stdin=yaml.safe_dump(pod, sort_keys=False))
        if r.returncode != 0:
            raise InfrastructureError(f"rewriting {APISERVER_MANIFEST} on {node}: exit {r.returncode}: {tail(r.stderr)}")

    def _restart_api_server(self) -> dict:
        node = self._control_plane()
        old = self._settled(node, time.monotonic() + API_READY_TIMEOUT_S)
        marks = {"on_start": time.monotonic_ns()}
        self._rewrite_manifest(node)
        marks["on_end"] = time.monotonic_ns()
        deadline = time.monotonic() + API_READY_TIMEOUT_S
        while time.monotonic() < deadline:
            new = self._apiserver_id(node)
            if new and new != old:
                new = self._settled(node, deadline)
                self.cluster.end_sessions()   # every exec stream, to any pod, went with the old server
                marks["off_start"] = marks["off_end"] = time.monotonic_ns()
                marks["container"] = new[:13]
                return marks
            time.sleep(0.2)
        raise InfrastructureError(f"kube-apiserver on {node} not ready within {API_READY_TIMEOUT_S:.0f} s of its "
                                  f"manifest's rewrite (container {old[:13]} before, now: "
                                  f"{self._apiserver_id(node)[:13] or 'none'})")

    def close(self) -> None:
        """Remove the partitions' qdiscs and sink devices (the node containers' namespaces)."""
        self._drops.close()
        super().close()
