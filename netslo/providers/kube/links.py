"""The QoS studies' hands on a real cluster's nodes: ``NodeLinks`` through the node agent.

``AgentNodeLinks(cluster, node)`` implements ``netslo.impair.shaping.node_links.NodeLinks`` by running
``python -m netslo.agent qos ...`` (``netslo.impair.shaping.node_cli``) in the run's node agent DaemonSet pod on
``node`` (``KubeImpairer.run``: hostNetwork, NET_ADMIN + SYS_ADMIN), which uses the embedded provider's
own code on the node's namespace. The same on kind, minikube and existing clusters: nothing here
needs this host to see the node.

``capture_marked`` is ``netslo.studies.qos.dscp_check``'s per-hop capture done by the node agents (``qos capture``
on each node, ``qos send`` from the client pod).

``Spawned(cluster, pod, argv, limit_s)`` is a helper process (a bulk flow, an iperf3 server) running in
a pod's network namespace on its node while the caller does something else: started detached by the
node agent's ``netem exec`` (from its warm session), its PID, output and exit code in files of the
agent's /tmp (removed once collected); ``signal("TERM")`` sends SIGTERM to that PID (``timeout``
passes it on: the helper reports and exits), ``limit_s`` bounds it (``timeout -s KILL``). ``poll``,
``communicate`` and ``signal`` are what ``netslo.studies.qos.background.Background`` uses (as of its local
``subprocess.Popen``).
"""

from __future__ import annotations

import functools
import json
import secrets
import subprocess
import sys
import threading
import time

from netslo.core.errors import InfrastructureError
from netslo.impair.shaping import node_cli, node_links, priority, qdiscs
from netslo.providers.kube import manifests as km

SPAWN_DIR = "/tmp"          # the agent container's memory-backed /tmp


class AgentNodeLinks(node_links.NodeLinks):
    """``NodeLinks`` of one node of a ``KubeCluster``, through its node agent."""

    def __init__(self, cluster, node: str):
        self.cluster, self.node = cluster, node
        where = self._run("describe")
        self.uplink, self.layer, self.tunnel_port = where["uplink"], where["layer"], where["tunnel_port"]
        self.tunnels = where.get("tunnels", [])

    @functools.cached_property
    def control(self) -> tuple:
        """The cluster's control ports (``KubeCluster.control_ports``), asked when first needed: a
        priority policy's install, not every ``AgentNodeLinks`` (the DSCP capture makes two per test)."""
        return self.cluster.control_ports(self.node)

    def _run(self, action: str, pod=None, **spec) -> dict:
        args = [action, *(["--pod-ip", pod.ip] if pod is not None else []),
                *(["--spec", json.dumps(spec)] if spec else [])]
        return self.cluster.node_agent.run(self.node, args, command="qos")

    def install_priority(self, policy):
        out = self._run("priority", policy=node_cli.policy_doc(policy), control=[list(c) for c in self.control])
        filters = [{"flowid": f["flowid"], "match": {int(k): tuple(v) for k, v in f["match"].items()}}
                   for f in out["filters"]]
        return priority.Installed(f"node {self.node}", self.uplink, policy, self.layer, filters, self.tunnel_port,
                                  self.control)

    def clear(self, kind: str) -> None:
        self._run("clear", kind=kind)

    def class_counters(self) -> dict:
        return self._run("counters")["class_bytes"]

    def install_bottleneck(self, rate_bits, queue_s):
        out = self._run("bottleneck", rate_bits=rate_bits, queue_s=queue_s)
        return qdiscs.Bottleneck(f"node {self.node}", self.uplink, out["rate_bits"], out["limit_bytes"],
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

    def pod_info(self, pod) -> dict:
        """What the agent knows of a pod of this node: host_if, bandwidth, link_mtu, pod_mtu."""
        if pod.node != self.node:
            raise InfrastructureError(f"pod {pod.name} runs on {pod.node}, not on {self.node}")
        return self._run("pod", pod)

    def pod_bandwidth(self, pod) -> dict:
        return self.pod_info(pod)["bandwidth"]

    def pod_link_mtu(self, pod) -> int:
        return self.pod_info(pod)["link_mtu"]

    def pod_mtu(self, pod) -> int:
        return self.pod_info(pod)["pod_mtu"]

    def reshape_pod(self, pod, egress_bits: float) -> None:
        self._run("reshape", pod, egress_bits=egress_bits)

    def root_qdisc(self, ifname: str) -> str | None:
        return self._run("root-qdisc", ifname=ifname)["root_qdisc"]


class AgentCall:
    """``argv`` in the node agent's container on ``node``, run by a thread while the caller goes on;
    ``poll``/``communicate`` as ``subprocess.Popen``'s (an exec that could not run: returncode -1, its
    error on stderr)."""

    def __init__(self, cluster, node: str, argv: list[str], timeout: float):
        self.cluster, self.argv = cluster, argv
        self.agent = cluster.node_agent.agent_pod(node)
        self.returncode = None
        self._out, self._err = b"", b""
        self._thread = threading.Thread(target=self._run, args=(timeout,), name=f"agent:{node}", daemon=True)
        self._thread.start()

    def _run(self, timeout: float) -> None:
        try:
            res = self.cluster.api.run(self.cluster.namespace, self.agent, km.IMPAIR_CONTAINER, self.argv, timeout)
            self._out, self._err, self.returncode = res.stdout, res.stderr, res.returncode
        except BaseException as e:   # reported by communicate()
            self._err, self.returncode = str(e).encode(), -1

    def poll(self):
        return None if self._thread.is_alive() else self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired(self.argv, timeout)
        return self._out, self._err

    def shell(self, script: str) -> bytes:
        """A short ``sh -c`` in the same agent container (signals, files); its stdout."""
        return self.cluster.api.run(self.cluster.namespace, self.agent, km.IMPAIR_CONTAINER,
                                    ["sh", "-c", script], 30).stdout


class Spawned:
    """A helper in a pod's network namespace, started detached by the node agent on the pod's node
    (see the module doc). Every step is one short ``netem exec`` through the node agent's warm
    session (``KubeImpairer.exec_in``), so starting, signalling and collecting cost a fork each, not
    an exec stream and an interpreter (that took ~1.5 s per helper on kind): the start runs ``sh``,
    which puts ``timeout -s KILL LIMIT ARGV`` in the background with its stdout/stderr in files of
    the agent's /tmp and returns once its PID is written; when it ends its exit code is written
    too. ``poll``, ``communicate`` and ``signal`` read and use those files."""

    POLL_S = 0.1

    def __init__(self, cluster, pod, argv: list[str], limit_s: float):
        self.cluster, self.pod, self.limit_s = cluster, pod, limit_s
        self.dir = f"{SPAWN_DIR}/netslo-spawn-{secrets.token_hex(6)}"
        self.argv = ["python", *argv[1:]] if argv[:1] == [sys.executable] else list(argv)
        self.returncode = None
        self._out = self._err = None
        env = cluster._pod_env(pod)
        d = self.dir
        start = (f'mkdir {d} && (timeout -s KILL {limit_s:.0f} "$@" >{d}/out 2>{d}/err </dev/null & '
                 f'echo $! >{d}/pid.tmp; mv {d}/pid.tmp {d}/pid; wait $!; echo $? >{d}/rc.tmp; mv {d}/rc.tmp {d}/rc) '
                 f'</dev/null >/dev/null 2>&1 & until [ -e {d}/pid ]; do sleep 0.01; done')
        self._sh(start, "netslo-spawn", *(["env", *env] if env else []), *self.argv)

    def _sh(self, script: str, *args: str) -> bytes:
        return self.cluster.node_agent.exec_in(self.pod, ["sh", "-c", script, *args], 30)

    def poll(self):
        if self.returncode is None:
            rc = self._sh(f"cat {self.dir}/rc 2>/dev/null; true").strip()
            if rc:
                self.returncode = int(rc)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Wait until the helper ended (``subprocess.TimeoutExpired`` after ``timeout`` s; without
        one, its limit bounds the wait); its stdout and stderr, its files then removed."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.limit_s + 30)
        while self.poll() is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.argv, timeout)
            time.sleep(self.POLL_S)
        if self._out is None:
            self._out = self._sh(f"cat {self.dir}/out")
            self._err = self._sh(f"cat {self.dir}/err; rm -rf {self.dir}")
        return self._out, self._err

    def signal(self, name: str) -> None:
        """Send SIGTERM/SIGKILL (``name``: TERM, KILL) to the helper (``timeout`` passes it on); gone is fine."""
        if self.poll() is None:
            self._sh(f'kill -{name} "$(cat {self.dir}/pid)" 2>/dev/null; true')


# ---- per-hop DSCP capture (netslo.studies.qos.dscp_check) ------------------------------------------------------

def observation_points(cluster, client, server) -> list[tuple]:
    """(name, node, pod IP | None, ifname, encapsulated) from client pod to server pod, as
    ``KindCluster.observation_points`` names them: the pods' eth0, their host-side interfaces, across
    nodes the CNI's VXLAN device on each node and the nodes' uplinks."""
    cl, sl = AgentNodeLinks(cluster, client.node), AgentNodeLinks(cluster, server.node)
    chost, shost = cl.pod_info(client)["host_if"], sl.pod_info(server)["host_if"]
    points = [("client pod eth0", client.node, client.ip, "eth0", False),
              (f"{client.node} {chost}", client.node, None, chost, False)]
    if client.node != server.node:
        points += [(f"{client.node} {t}", client.node, None, t, False) for t in cl.tunnels]
        points += [(f"underlay {client.node} {cl.uplink}", client.node, None, cl.uplink, bool(cl.tunnels)),
                   (f"underlay {server.node} {sl.uplink}", server.node, None, sl.uplink, bool(sl.tunnels))]
        points += [(f"{server.node} {t}", server.node, None, t, False) for t in sl.tunnels]
    points += [(f"{server.node} {shost}", server.node, None, shost, False),
               ("server pod eth0", server.node, server.ip, "eth0", False)]
    return points


def capture_marked(cluster, client, server, plan: dict, start_timeout: float = 30.0):
    """``dscp_check`` through the node agents: sniffers on each node's points (``qos capture``), the
    crafted packets sent from the client pod (``qos send``) once every sniffer is open; returns
    (``PathPoint`` per point, rows seen per point)."""
    from netslo.providers.base import PathPoint
    points = observation_points(cluster, client, server)
    want = len(plan["dscps"]) * plan["per_mark"]
    calls, order = {}, {}
    for node in dict.fromkeys(p[1] for p in points):
        mine = [i for i, p in enumerate(points) if p[1] == node]
        ready = f"{SPAWN_DIR}/netslo-capture-{secrets.token_hex(6)}"
        spec = {"points": [[points[i][2], points[i][3]] for i in mine], "marker": plan["marker"], "want": want,
                "timeout": plan["timeout"] + start_timeout, "ready": ready}
        calls[node] = (AgentCall(cluster, node, ["python", "-m", "netslo.agent", "qos", "capture", "--spec",
                                                 json.dumps(spec)], plan["timeout"] + start_timeout + 30), ready)
        order[node] = mine
    try:
        deadline = time.monotonic() + start_timeout
        for node, (call, ready) in calls.items():
            while not call.shell(f"test -f {ready} && echo ready; true").strip():
                if call.poll() is not None or time.monotonic() > deadline:
                    _, err = call.communicate()
                    raise InfrastructureError(f"DSCP capture on node {node} did not start: "
                                              f"{err.decode(errors='replace').strip()[-300:] or 'no answer'}")
                time.sleep(0.2)
        cluster.node_agent.run(client.node, ["send", "--pod-ip", client.ip, "--spec", json.dumps(plan)], command="qos")
    finally:
        results = {node: call.communicate() for node, (call, _) in calls.items()}
        for node, (call, ready) in calls.items():
            call.shell(f"rm -f {ready}")
    seen = [None] * len(points)
    for node, (out, err) in results.items():
        call = calls[node][0]
        if call.returncode != 0:
            raise InfrastructureError(f"DSCP capture on node {node}: exit {call.returncode}: "
                                      f"{err.decode(errors='replace').strip()[-300:]}")
        for i, rows in zip(order[node], json.loads(out)["seen"]):
            seen[i] = rows
    return [PathPoint(name, f"node {node}", ifname, encap) for name, node, _, ifname, encap in points], seen
