"""The QoS studies' hands on a real cluster's nodes: ``NodeLinks`` through the node agent.

``AgentNodeLinks(cluster, node)`` implements ``netslo.qos.node_links.NodeLinks`` by running
``python -m netslo.agent qos ...`` (``netslo.qos.node_cli``) in the run's node agent DaemonSet pod on
``node`` (``KubeImpairer.run``: hostNetwork, NET_ADMIN + SYS_ADMIN), which uses the embedded provider's
own code on the node's namespace. The same on kind, minikube and existing clusters: nothing here
needs this host to see the node.

``Spawned(cluster, pod, argv, limit_s)`` is a helper process (a bulk flow, an iperf3 server) running in
a pod's network namespace on its node while the caller does something else: the node agent's
``netem exec`` in a thread, its PID written to the agent's /tmp (removed when it ends);
``signal("TERM")`` sends SIGTERM to that PID (``timeout`` passes it on: the helper reports and exits),
``limit_s`` bounds it (``timeout -s KILL``). ``poll``, ``communicate`` and ``signal`` are what
``netslo.qos.background.Background`` uses (as of its local ``subprocess.Popen``).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading

from ..errors import InfrastructureError
from ..qos import node_cli, node_links, priority, shaping
from . import kube_manifests as km

SPAWN_DIR = "/tmp"          # the agent container's memory-backed /tmp


class AgentNodeLinks(node_links.NodeLinks):
    """``NodeLinks`` of one node of a ``KubeCluster``, through its node agent."""

    def __init__(self, cluster, node: str):
        self.cluster, self.node = cluster, node
        where = self._run("describe")
        self.uplink, self.layer, self.tunnel_port = where["uplink"], where["layer"], where["tunnel_port"]
        self.tunnels = where.get("tunnels", [])

    def _run(self, action: str, pod=None, **spec) -> dict:
        args = [action, *(["--pod-ip", pod.ip] if pod is not None else []),
                *(["--spec", json.dumps(spec)] if spec else [])]
        return self.cluster.node_agent.run(self.node, args, command="qos")

    def install_priority(self, policy):
        out = self._run("priority", policy=node_cli.policy_doc(policy))
        filters = [{"flowid": f["flowid"], "match": {int(k): tuple(v) for k, v in f["match"].items()}}
                   for f in out["filters"]]
        return priority.Installed(f"node {self.node}", self.uplink, policy, self.layer, filters, self.tunnel_port)

    def clear(self, kind: str) -> None:
        self._run("clear", kind=kind)

    def class_counters(self) -> dict:
        return self._run("counters")["class_bytes"]

    def install_bottleneck(self, rate_bits, queue_s):
        out = self._run("bottleneck", rate_bits=rate_bits, queue_s=queue_s)
        return shaping.Bottleneck(f"node {self.node}", self.uplink, out["rate_bits"], out["limit_bytes"],
                                  out["burst_bytes"])

    def add_drop(self, probability, src, dst, dport):
        handle = {"probability": probability, "src": src, "dst": dst, "dport": dport}
        self._run("drop-add", **handle)
        return handle

    def drop_counts(self, handle):
        out = self._run("drop-counts", **handle)
        return out["dropped"], out["matched"]

    def remove_drop(self, handle):
        self._run("drop-remove", **handle)

    def _pod(self, pod) -> dict:
        if pod.node != self.node:
            raise InfrastructureError(f"pod {pod.name} runs on {pod.node}, not on {self.node}")
        return self._run("pod", pod)

    def pod_bandwidth(self, pod) -> dict:
        return self._pod(pod)["bandwidth"]

    def pod_link_mtu(self, pod) -> int:
        return self._pod(pod)["link_mtu"]

    def pod_mtu(self, pod) -> int:
        return self._pod(pod)["pod_mtu"]

    def reshape_pod(self, pod, egress_bits: float) -> None:
        self._run("reshape", pod, egress_bits=egress_bits)

    def root_qdisc(self, ifname: str) -> str | None:
        return self._run("root-qdisc", ifname=ifname)["root_qdisc"]


class Spawned:
    """A helper in a pod's network namespace, run by the node agent on the pod's node (see module doc)."""

    def __init__(self, cluster, pod, argv: list[str], limit_s: float):
        self.cluster, self.pod = cluster, pod
        agents = cluster.node_agent
        self.agent = agents.agent_pod(pod.node)
        self.pid_file = f"{SPAWN_DIR}/netslo-spawn-{secrets.token_hex(6)}.pid"
        argv = ["python", *argv[1:]] if argv[:1] == [sys.executable] else list(argv)
        inner = (f'timeout -s KILL {limit_s:.0f} "$@" & echo $! > {self.pid_file}; wait $!; rc=$?; '
                 f'rm -f {self.pid_file}; exit $rc')
        env = cluster._pod_env(pod)
        self.argv = ["python", "-m", "netslo.agent", "netem", "exec", "--pod-ip", pod.ip, "--",
                     *(["env", *env] if env else []), "sh", "-c", inner, "netslo-spawn", *argv]
        self.returncode = None
        self.pid = None
        self._out, self._err = b"", b""
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(limit_s + 30,), name=f"spawn:{pod.name}",
                                        daemon=True)
        self._thread.start()

    def _run(self, timeout: float) -> None:
        try:
            res = self.cluster.api.run(self.cluster.namespace, self.agent, km.IMPAIR_CONTAINER, self.argv, timeout)
            self._out, self._err, self.returncode = res.stdout, res.stderr, res.returncode
        except BaseException as e:   # reported by communicate()
            self._error, self.returncode = e, -1

    def poll(self):
        return None if self._thread.is_alive() else self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired(self.argv, timeout)
        if self._error is not None:
            return b"", str(self._error).encode()
        return self._out, self._err

    def signal(self, name: str) -> None:
        """Send SIGTERM/SIGKILL (``name``: TERM, KILL) to the helper by the PID it wrote; gone is fine."""
        if self._thread.is_alive():
            self.cluster.api.run(self.cluster.namespace, self.agent, km.IMPAIR_CONTAINER,
                                 ["sh", "-c", f'p=$(cat {self.pid_file} 2>/dev/null) && kill -{name} "$p"; true'], 30)
