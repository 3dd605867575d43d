"""A real Kubernetes cluster as a netslo ``Cluster``: shared by the kind, minikube and existing providers.

What a run creates lives in one namespace ``netslo-<run id>`` (labelled ``netslo.io/run-id``, annotated
with its owner for ``kube_reap``): agent pods pinned to nodes (required node affinity), optional
hostNetwork baseline pods, Services. Everything goes through ``KubeApi`` (the kubernetes client):
readiness and deletion are watched, and probes run as ``python -m netslo.agent probe ... --out -`` in
the pod's ``agent`` container through the exec stream, coming back as npz bytes on stdout. ``open()``
first removes namespaces of dead runs (``kube_reap``); ``close()`` deletes this run's namespace (after
checking its run-id label) and watches until it is gone; it never touches anything else. Timeouts are
seconds.
"""

from __future__ import annotations

import io
import logging
import os
import secrets
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from netslo.agent.responder_set import ready_file
from netslo.core import progress
from netslo.core.errors import InfrastructureError, SpecError
from netslo.core.families import IPV4, IPV6, family_of
from netslo.core.phase_times import scheduled, timed_call
from netslo.providers.base import RESPONDER_PORTS, Cluster, Pod, probe_argv, probe_budget
from netslo.providers.kube import manifests as km
from netslo.providers.kube import reap as kube_reap
from netslo.providers.kube.api import KubeApi, tail
from netslo.providers.kube.session import AgentSessions
from netslo.providers.kube.wait import (
    Hopeless,
    node_ready,
    pod_summary,
    wait_deleted,
    wait_endpoints,
    wait_nodes_ready,
    wait_pods,
    watch_until,
)
from netslo.stats.samples import SampleSet
from netslo.traffic.probes import ProbeSpec

log = logging.getLogger("netslo.kube")

# kube-system workloads that name the CNI in use (first match wins).
CNI_SIGNATURES = (("calico-node", "calico"), ("cilium", "cilium"), ("antrea-agent", "antrea"),
                  ("kindnet", "kindnet"), ("kube-flannel-ds", "flannel"))
CNI_NODE_LABEL = "netslo.io/cni"  # a node label naming the CNI where its DaemonSet names do not
TLS_ENV = "NETSLO_TLS_DIR"                      # see netslo.traffic.tlsca: the run's CA + server certificate
POD_TLS_DIR = f"{km.READY_DIR}/tls"             # where a pod gets a copy of that directory
ON_DEMAND_KINDS = ("ws", "tls", "mqtt", "proxy")   # responders started on demand inside the agent container
DNS_SERVICE = ("kube-system", "kube-dns")       # (namespace, name) of the cluster DNS Service
POLL_DETACHED_S = 0.5    # s between looks for a detached probe's samples
DNS_ALL_READY_S = 30.0   # await_cluster_dns: how long to wait for every DNS endpoint, once one is ready


@dataclass
class KubeService:
    """A Service in front of one agent pod's responders."""

    name: str
    type: str
    cluster_ip: str
    ports: dict                                   # protocol -> service port
    node_ports: dict = field(default_factory=dict)  # protocol -> nodePort (NodePort only)
    external_traffic_policy: str | None = None


def pod_addresses(status: dict) -> tuple[str, str]:
    """(IPv4, IPv6) address of a pod from its status: ``podIPs`` (every family, dual-stack) or the
    single ``podIP``; on an IPv6-only cluster the first is the IPv6 one too (``Pod.ip`` is the primary)."""
    ips = [a.get("ip", "") for a in status.get("podIPs") or []] or [status.get("podIP", "")]
    v4 = next((a for a in ips if a and family_of(a) == IPV4), "")
    v6 = next((a for a in ips if family_of(a) == IPV6), "")
    return v4 or v6, v6

class KubeCluster(Cluster):
    """Agent pods in a run-scoped namespace of any reachable Kubernetes cluster."""

    def __init__(self, api: KubeApi, *, provider: str = "existing", image: str = km.DEFAULT_IMAGE,
                 pull_policy: str = "Never", datapath: str | None = None, run_id: str | None = None,
                 pod_timeout: float = 120.0, delete_timeout: float = 120.0,
                 single_kernel: bool | None = None):
        self.api = api
        self.provider = provider
        self.image = image
        self.pull_policy = pull_policy
        self.run_id = run_id or km.new_run_id()
        self.namespace = km.namespace_name(self.run_id)
        self.pod_timeout = pod_timeout
        self.delete_timeout = delete_timeout
        self._datapath = datapath
        self._single_kernel = single_kernel
        self._pods: dict[str, Pod] = {}
        self._responders: dict[str, tuple] = {}
        self._services: dict[str, KubeService] = {}
        self._nodes: list[str] | None = None
        self._node_objs: dict[str, dict] = {}
        self._created = False
        self._closed = False
        self._tls_synced: dict[str, str] = {}   # pod name -> host TLS dir copied into it
        self._node_agent = None                 # KubeImpairer, made on first use (node_agent)
        self._sessions = AgentSessions(api, self.namespace, km.AGENT_CONTAINER)   # warm agents, one stream each
        self._deferred: list[tuple[str, object]] = []   # bring-up still to await (``defer``)
        self.reaped: list[str] = []             # what open() removed of dead runs (one line each)

    # ---- lifecycle --------------------------------------------------------------------------
    def open(self, ready_timeout: float = 60.0) -> "KubeCluster":
        """Check the cluster answers and has Ready nodes; remove what dead runs left; create the run
        namespace (with its owner record) and wait for its default ServiceAccount."""
        self._load_nodes(ready_timeout)
        self.reaped = self.reap_dead_runs()
        self.api.create(km.namespace_manifest(self.run_id, annotations=kube_reap.owner_annotations()),
                        what=f"create namespace {self.namespace}")
        self._created = True
        # Pods can be created only once the namespace's default ServiceAccount exists.
        watch_until(self.api, "serviceaccount", f"namespace {self.namespace}", ready_timeout,
                    lambda objs: ("default" in objs, "no default ServiceAccount yet"),
                    namespace=self.namespace, name="default")
        log.info("kube: namespace %s on nodes %s", self.namespace, ", ".join(self.nodes))
        return self

    def defer(self, what: str, wait) -> None:
        """A wait of the provider's bring-up (``wait()``, raising InfrastructureError) that nothing
        before the run's first pods needs: ``settle`` calls it once those pods are made."""
        self._deferred.append((what, wait))

    def settle(self) -> None:
        """The deferred bring-up waits, each once, in order; the first error ends it."""
        while self._deferred:
            what, wait = self._deferred.pop(0)
            with progress.phase(what):
                wait()

    def reap_dead_runs(self) -> list[str]:
        """Delete namespaces of netslo runs on this cluster whose owner is gone (``kube_reap``); one
        progress line per namespace. A cluster that does not let us list namespaces is told, not fatal."""
        try:
            said = kube_reap.reap(self.api)
        except InfrastructureError as e:
            said = [f"kube reap: skipped ({e})"]
        for line in said:
            progress.note(line)
        return said

    def close(self, wait: bool = True) -> None:
        """Delete the run namespace (only if it carries this run's label) and, with ``wait``, wait until
        it is gone: at least 5 s, for kube-controller-manager's namespace controller waits that long
        before it acts on a deletion (``namespaceDeletionGracePeriod``), then ends the pods."""
        if self._closed or not self._created:
            self._closed = True
            return
        self._closed = True
        self.end_sessions()
        ns = self.api.get("namespace", self.namespace, missing_ok=True)
        if ns is None:
            return
        if ns.get("metadata", {}).get("labels", {}).get(km.RUN_LABEL) != self.run_id:
            raise InfrastructureError(f"namespace {self.namespace}: label {km.RUN_LABEL} is not "
                                      f"{self.run_id!r}; not deleting what this run did not create")
        self.api.delete("namespace", self.namespace)
        if wait:
            wait_deleted(self.api, "namespace", self.namespace, None, self.delete_timeout)
        else:
            progress.note(f"kube: namespace {self.namespace} deleted, not waited for (Terminating: its pods end "
                          "within seconds; a later run's reap skips it)")

    def end_sessions(self) -> None:
        """End the warm agent sessions of the run's pods and node agents."""
        self._sessions.close()
        if self._node_agent is not None:
            self._node_agent.close_sessions()

    # ---- nodes ------------------------------------------------------------------------------
    def _load_nodes(self, timeout: float) -> None:
        items = wait_nodes_ready(self.api, "cluster nodes", timeout)
        self._node_objs = objs = {n["metadata"]["name"]: n for n in items}
        # Pods go to schedulable worker nodes; a control-plane node only when it is all there is.
        def workload(n):
            taints = n.get("spec", {}).get("taints", []) or []
            return not n.get("spec", {}).get("unschedulable") and not any(
                t.get("effect") in ("NoSchedule", "NoExecute")
                and t.get("key") != "node-role.kubernetes.io/control-plane" for t in taints)
        usable = sorted(k for k, n in objs.items() if workload(n))
        workers = [k for k in usable if not any(
            t.get("key") == "node-role.kubernetes.io/control-plane" for t in objs[k].get("spec", {}).get("taints", []) or [])]
        self._nodes = workers or usable
        if not self._nodes:
            raise InfrastructureError("cluster nodes: none schedulable (all tainted or cordoned)")

    @property
    def nodes(self) -> list[str]:
        if self._nodes is None:
            self._load_nodes(60.0)
        return list(self._nodes)

    def node_labels(self, node: str) -> dict[str, str]:
        """The node's labels, as the API gave them when the nodes were listed (one list call)."""
        if self._nodes is None:
            self._load_nodes(60.0)
        return dict(self._node_objs.get(node, {}).get("metadata", {}).get("labels") or {})

    def node_ip(self, node: str) -> str:
        """The node's InternalIP (for NodePort and hostNetwork targets)."""
        for a in self._node_objs.get(node, {}).get("status", {}).get("addresses", []):
            if a.get("type") == "InternalIP":
                return a["address"]
        raise InfrastructureError(f"node {node}: no InternalIP address")

    def control_ports(self, node: str) -> tuple:
        """TCP ports of the cluster's control traffic leaving ``node`` (``netslo.impair.shaping.priority``'s
        ``control``): the kubelet's API as the source port (the node's daemonEndpoints, 10250 when it
        says none) and the API server's as the destination (the ``kubernetes`` Service's
        EndpointSlices, 6443 when they list none)."""
        status = self._node_objs.get(node, {}).get("status", {})
        kubelet = (status.get("daemonEndpoints", {}).get("kubeletEndpoint", {}) or {}).get("Port") or 10250
        server = self.api.server_endpoint()
        return (("sport", int(kubelet)), ("dport", server[1] if server else 6443))

    @property
    def datapath(self) -> str:  # type: ignore[override]
        if self._datapath is None:
            self._datapath = self._detect_cni()
        return self._datapath

    def _detect_cni(self) -> str:
        for n in self._node_objs.values():
            label = n.get("metadata", {}).get("labels", {}).get(CNI_NODE_LABEL)
            if label:
                return label
        try:
            names = [d["metadata"]["name"] for d in self.api.get("daemonsets", namespace="kube-system")]
        except InfrastructureError:
            return "unknown"
        for prefix, cni in CNI_SIGNATURES:
            if any(n.startswith(prefix) for n in names):
                return cni
        return "unknown"

    # ---- pods -------------------------------------------------------------------------------
    def add_pod(self, name: str, node: str, *, host_network: bool = False,
                annotations: dict | None = None, responders=None, cpu: str | None = None) -> Pod:
        """Create an agent pod on ``node`` and wait until it is Ready (all responders listening).

        ``responders`` defaults to udp/tcp/http for pod-network pods and none for hostNetwork pods
        (those share the node's ports). Placement uses the node's ``kubernetes.io/hostname`` label,
        which is not always its name (cloud providers).
        """
        return self.add_pods([dict(name=name, node=node, host_network=host_network, annotations=annotations,
                                   responders=responders, cpu=cpu)])[0]

    @timed_call("pods")
    def add_pods(self, requests: list[dict]) -> list[Pod]:
        """Create several agent pods together (each request: ``add_pod``'s arguments as a dict) and
        wait for all of them with one watch of the run's pods; the pods, in the order asked."""
        if self._closed:
            raise InfrastructureError(f"cluster of run {self.run_id} is closed")
        manifests = []
        for r in requests:
            name, node = r["name"], r["node"]
            if node not in self.nodes:
                raise SpecError("node", node, f"one of {', '.join(self.nodes)}")
            if name in self._pods or any(m[0]["name"] == name for m in manifests):
                raise SpecError("pod name", name, "a name not used before in this run")
            responders = r.get("responders")
            if responders is None:
                responders = () if r.get("host_network") else km.BASIC_RESPONDERS
            hostname = self._node_objs.get(node, {}).get("metadata", {}).get("labels", {}).get(
                "kubernetes.io/hostname", node)
            manifests.append((r, tuple(responders), km.agent_pod_manifest(
                name, self.run_id, hostname, image=self.image, pull_policy=self.pull_policy,
                host_network=bool(r.get("host_network")), annotations=r.get("annotations"),
                responders=responders, **({"cpu": r["cpu"]} if r.get("cpu") else {}))))
        names = [m["metadata"]["name"] for _, _, m in manifests]
        with progress.phase(f"pod{'s' if len(names) > 1 else ''} {', '.join(r['name'] for r in requests)}"), \
                ThreadPoolExecutor(4, thread_name_prefix="session-open") as opening:
            for _, _, manifest in manifests:
                self.api.create(manifest, what=f"create pod {self.namespace}/{manifest['metadata']['name']}")
            # A pod's warm session opens once its container runs, while the others still start.
            objs = wait_pods(self.api, self.namespace, names, f"{km.RUN_LABEL}={self.run_id}", self.pod_timeout,
                             on_running=lambda name: opening.submit(self._sessions.warm, name))
        pods = []
        for (r, responders, manifest), obj in zip(manifests, objs):
            st = obj.get("status", {})
            if st.get("hostIP") and obj["spec"].get("nodeName") != r["node"]:
                raise InfrastructureError(f"pod {manifest['metadata']['name']}: scheduled on "
                                          f"{obj['spec'].get('nodeName')}, not {r['node']}")
            ip, ip6 = pod_addresses(st)
            pod = Pod(name=r["name"], node=r["node"], ip=ip, ip6=ip6, host_network=bool(r.get("host_network")),
                      annotations=dict(manifest["metadata"]["annotations"]))
            self._pods[pod.name] = pod
            self._responders[pod.name] = responders
            pods.append(pod)
        self.settle()
        label = f"agent session{'s' if len(names) > 1 else ''} in {', '.join(r['name'] for r in requests)}"
        with progress.phase(label):
            # Every pod's session answers before the first measurement: a first probe beside 14 pods'
            # starting agents measured their CPU load (2026-11-28 kind: 7-17 s for 1.6 s of sending).
            self._sessions.await_warm(names, self.pod_timeout)
        return pods

    def k8s_pod_name(self, pod: Pod) -> str:
        return km.k8s_name(pod.name)

    def pod_object(self, pod: Pod) -> dict:
        return self.api.get("pod", self.k8s_pod_name(pod), self.namespace)

    @timed_call("responders")
    def start_responders(self, pod: Pod, protocols=("udp", "tcp", "http"), *,
                         upstream: str | None = None) -> dict[str, int]:
        """protocol -> port once each responder listens.

        udp/tcp/http run in the agent container from the pod's creation (checked here); ws/tls/mqtt are started
        on demand inside the agent container (forked by its warm session, left running) with the run's
        TLS directory ($NETSLO_TLS_DIR) copied into the pod first; ``proxy`` needs ``upstream`` (HOST:PORT).
        """
        have = self._responders.get(pod.name, ())
        unknown = [p for p in protocols if p not in have and p not in ON_DEMAND_KINDS]
        if unknown:
            raise InfrastructureError(f"pod {pod.name}: created without responders {unknown} "
                                      f"(add_pod(..., responders=...))")
        ports = {}
        served = [p for p in protocols if p in have]
        if served:      # the agent container serves them; started = its startup probe saw them all ready
            obj = self.pod_object(pod)
            agent = next((cs for cs in obj.get("status", {}).get("containerStatuses", [])
                          if cs["name"] == km.AGENT_CONTAINER), {})
            if not (agent.get("started") and "running" in agent.get("state", {})):
                raise InfrastructureError(f"pod {pod.name}: responders {served} not running; "
                                          f"last status: {self._summary(obj)}")
            ports.update({p: RESPONDER_PORTS[p] for p in served})
        if "proxy" in protocols and not upstream:
            raise SpecError("upstream", upstream, "HOST:PORT of the HTTP responder the proxy forwards to")
        starts = [p for p in protocols if p not in have]
        for p in starts:   # one after another through the pod's warm session (a second session would be an exec)
            ports[p] = self._start_on_demand(pod, p, extra=["--upstream", upstream] if p == "proxy" else [])
        return ports

    def _start_on_demand(self, pod: Pod, kind: str, timeout: float = 30.0, extra=()) -> int:
        """Start responder ``kind`` in ``pod`` and wait for it; its port. The pod's warm agent session
        forks it (``exec_agent`` of ``netslo.agent.detach``: no exec, no interpreter start; the session
        imports the responders once) and answers once its ready file exists. Called by
        ``start_responders``, whose time it is (the outermost timer counts)."""
        port = RESPONDER_PORTS[kind]
        ready = ready_file(km.READY_DIR, kind)
        self.exec_agent(pod, ["detach", "--ready-file", ready, "--log", f"/tmp/netslo-{kind}.log",
                              "--timeout", f"{timeout:g}", "--", "serve", kind, "--port", str(port),
                              "--ready-file", ready, *extra], timeout + 30)
        return port

    def _pod_env(self, pod: Pod) -> list[str]:
        """NAME=VALUE settings the agent needs in ``pod`` (the run's TLS directory, copied over once,
        its files in one tar stream)."""
        host_dir = os.environ.get(TLS_ENV)
        if not host_dir or not Path(host_dir).is_dir():
            return []
        if self._tls_synced.get(pod.name) != host_dir:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                for f in sorted(Path(host_dir).iterdir()):
                    if f.is_file():
                        tar.add(f, arcname=f.name)
            self._exec(pod, ["sh", "-c", f"mkdir -p {POD_TLS_DIR} && tar -x -f - -C {POD_TLS_DIR}"], 30,
                       input=buf.getvalue())
            self._tls_synced[pod.name] = host_dir
        return [f"{TLS_ENV}={POD_TLS_DIR}"]

    @timed_call("bulk flows and pod commands")
    def _exec(self, pod: Pod, command: list[str], timeout: float, input: bytes | None = None) -> bytes:
        return self._exec_untimed(pod, command, timeout, input)

    def _exec_untimed(self, pod: Pod, command: list[str], timeout: float, input: bytes | None = None) -> bytes:
        return self.api.exec(self.namespace, self.k8s_pod_name(pod), km.AGENT_CONTAINER, command, timeout=timeout,
                             input=input)

    @staticmethod
    def _summary(obj: dict) -> str:
        return pod_summary(obj)

    @property
    def node_agent(self):
        """The run's privileged per-node agent (``KubeImpairer``: the impairment DaemonSet), made on
        first use and shared by everything that works on a pod's network namespace from its node."""
        if self._node_agent is None:
            from netslo.providers.kube.impair import KubeImpairer
            self._node_agent = KubeImpairer(self)
        return self._node_agent

    def node_links(self, node: str):
        """The QoS studies' ``NodeLinks`` of ``node``, through the node agent (``kube_links``)."""
        from netslo.providers.kube.links import AgentNodeLinks
        return AgentNodeLinks(self, node)

    def spawn_in(self, pod: Pod, argv: list[str], limit_s: float):
        """A helper in ``pod``'s network namespace running while the caller goes on (``kube_links.Spawned``)."""
        from netslo.providers.kube.links import Spawned
        return Spawned(self, pod, argv, limit_s)

    def capture_marked(self, client: Pod, server: Pod, plan: dict):
        """``netslo.studies.qos.dscp_check``'s per-hop capture through the node agents (``kube_links``)."""
        from netslo.providers.kube.links import capture_marked
        return capture_marked(self, client, server, plan)

    def exec_in(self, pod: Pod, argv: list[str], timeout: float = 60.0) -> bytes:
        """Run a helper program (a bulk flow, sysctl, ethtool, nstat) as root in the pod's network
        namespace, as every provider does (here through the node agent on the pod's node, since the
        pod's own container has no capabilities); stdout. A command naming this process's interpreter
        (``sys.executable``: a netslo helper such as ``-m netslo.studies.qos.tcpflow``) runs with the image's
        ``python``, which has the same netslo."""
        if argv[:1] == [sys.executable]:
            argv = ["python", *argv[1:]]
        env = self._pod_env(pod)
        return self.node_agent.exec_in(pod, (["env", *env] if env else []) + list(argv), timeout)

    @timed_call("bulk flows and pod commands")
    def exec_agent(self, pod: Pod, args: list[str], timeout: float) -> bytes:
        """``python -m netslo.agent ARGS`` in the pod, run by its warm agent session (``kube_session``:
        no new exec, no interpreter start); stdout, InfrastructureError with stderr's tail unless exit 0."""
        env = dict(word.split("=", 1) for word in self._pod_env(pod))
        try:
            res = self._sessions.call(self.k8s_pod_name(pod), list(args), env, timeout)
        except InfrastructureError as e:   # the session ended or stalled: say what became of the pod
            raise InfrastructureError(f"{e}; {self.pod_evidence(pod)}") from e
        if res.returncode != 0:
            raise InfrastructureError(f"python -m netslo.agent {' '.join(args[:3])} in pod "
                                      f"{self.namespace}/{self.k8s_pod_name(pod)}: exit {res.returncode}: "
                                      f"{tail(res.stderr)}")
        return res.stdout

    def probe_detached(self, pod: Pod, spec: ProbeSpec):
        """The probe started by the pod's agent as a process of its own (``python -m netslo.agent detach``),
        writing its samples to a file in the pod; ``collect(timeout_s)`` polls for that file with new
        execs (an API server that restarted meanwhile refuses them until it is back: retried), reads it
        and removes it. The pod's warm sessions, opened before and perhaps broken since, are ended then,
        so the next command opens a new one."""
        out = f"/tmp/netslo-detached-{secrets.token_hex(6)}.npz"
        name = self.k8s_pod_name(pod)
        scheduled(spec.count * spec.interval, "probing")
        pid = self.exec_agent(pod, ["detach", "--ready-file", out + ".tmp", "--log", out + ".log", "--",
                                    *probe_argv(spec, out)], timeout=60.0).decode().strip()
        # exit 3 with the log: the probe ended without writing its samples (crashed, killed)
        poll = (f"if [ -f {out} ]; then cat {out}; elif ! kill -0 {pid} 2>/dev/null; then "
                f"tail -c 400 {out}.log >&2; exit 3; fi")

        def collect(timeout_s: float) -> SampleSet:
            budget = max(timeout_s, probe_budget(spec))
            deadline = time.monotonic() + budget
            last = "none"
            while True:
                try:
                    res = self.api.run(self.namespace, name, km.AGENT_CONTAINER, ["sh", "-c", poll], timeout=60.0)
                except InfrastructureError as e:
                    last = str(e)       # the API server (or the pod) not reachable yet
                else:
                    if res.returncode == 3:
                        raise InfrastructureError(f"detached probe {spec.protocol} in pod {self.namespace}/{name} "
                                                  f"(pid {pid}) ended without its samples: {tail(res.stderr)}")
                    if res.returncode == 0 and res.stdout:
                        data = res.stdout
                        break
                    last = f"exit {res.returncode}: {tail(res.stderr)}" if res.returncode else "not written yet"
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"detached probe {spec.protocol} in pod {self.namespace}/{name}: no "
                                              f"samples within {budget:.0f} s "
                                              f"(last error: {last}); {self.pod_evidence(pod)}")
                time.sleep(POLL_DETACHED_S)
            self._exec(pod, ["rm", "-f", out, out + ".log"], timeout=60.0)
            self._sessions.forget(name)
            return self.samples_of(pod, data)
        return collect

    def pod_evidence(self, pod: Pod) -> str:
        """One line on what became of ``pod``: its state (or that it is gone or being deleted), its
        node's Ready condition and the pod's last events; what could not be read says so."""
        name = self.k8s_pod_name(pod)
        try:
            obj = self.api.get("pod", name, self.namespace, missing_ok=True)
            node = self.api.get("node", pod.node, missing_ok=True)
        except InfrastructureError as e:
            return f"pod {self.namespace}/{name}: state unreadable ({e})"
        if obj is None:
            state = "gone (deleted)"
        else:
            state = pod_summary(obj) + ("; being deleted" if obj["metadata"].get("deletionTimestamp") else "")
        where = f"node {pod.node}: " + (node_ready(node)[1] if node is not None else "gone")
        events = self.api.events(self.namespace, name)
        return f"pod {self.namespace}/{name}: {state}; {where}; events: {'; '.join(events) or 'none'}"

    # ---- services ---------------------------------------------------------------------------
    def add_service(self, name: str, pod: Pod, *, type: str = "ClusterIP",
                    external_traffic_policy: str | None = None,
                    protocols=("udp", "tcp", "http"), ports: list | None = None,
                    timeout: float = 60.0) -> KubeService:
        """A Service in front of ``pod``'s responders; returns once its endpoints are ready."""
        manifest = km.service_manifest(name, self.run_id, pod.name, type=type,
                                       external_traffic_policy=external_traffic_policy,
                                       protocols=protocols, ports=ports)
        svc_name = manifest["metadata"]["name"]
        self.api.create(manifest, what=f"create service {self.namespace}/{svc_name}")
        wait_endpoints(self.api, self.namespace, svc_name, f"service {self.namespace}/{svc_name} endpoints",
                       timeout)
        obj = self.api.get("service", svc_name, self.namespace)
        spec = obj["spec"]
        ports = {p["name"]: p["port"] for p in spec["ports"]}
        node_ports = {p["name"]: p["nodePort"] for p in spec["ports"] if p.get("nodePort")}
        svc = KubeService(svc_name, type, spec.get("clusterIP", ""), ports, node_ports,
                          spec.get("externalTrafficPolicy") if type == "NodePort" else None)
        self._services[name] = svc
        return svc

    def await_cluster_dns(self, timeout: float = 120.0, all_within: float = DNS_ALL_READY_S) -> str | None:
        """Until the cluster DNS Service (kube-system/kube-dns, the name kubeadm, kind and most
        distributions give CoreDNS's Service) has a ready endpoint, and for at most ``all_within`` s
        until each endpoint it lists is ready (a new cluster's CoreDNS pods start after its CNI, not
        all at once). The endpoints' status, for the notes; None, at once, when the cluster has no
        such Service (nothing to wait for). No ready endpoint after ``timeout`` s: InfrastructureError."""
        if self.api.get("service", DNS_SERVICE[1], DNS_SERVICE[0], missing_ok=True) is None:
            return None
        component = f"cluster DNS: service {'/'.join(DNS_SERVICE)} endpoints"
        t0 = time.monotonic()
        try:
            return wait_endpoints(self.api, *DNS_SERVICE, component, min(all_within, timeout), every=True)
        except InfrastructureError:   # not all ready yet (a replica may never be): one is enough to go on
            return wait_endpoints(self.api, *DNS_SERVICE, component, max(timeout - (time.monotonic() - t0), 1.0))

    def disruptions(self):
        """CNI agent and kube-proxy restarts through the API (``netslo.providers.kube.disruption``)."""
        from netslo.providers.kube.disruption import KubeDisruptions
        return KubeDisruptions(self)

    def policies(self):
        """networking.k8s.io/v1 NetworkPolicy objects, enforced by the CNI (``kube_policy``)."""
        from netslo.providers.kube.policy import KubePolicies
        return KubePolicies(self)

    def service_program(self, backend: Pod, port: int, type: str, client: Pod, change: str = "service"):
        """A real Service with a requested address (``kube_service_program``)."""
        from netslo.providers.kube.service_program import KubeServiceProgram
        return KubeServiceProgram(self, backend, port, type, client, change)

    # ---- report -----------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        env = {"provider": self.provider, "emulated": "false", "namespace": self.namespace,
               "run_id": self.run_id, "image": self.image, "datapath": self.datapath,
               "nodes": str(len(self.nodes))}
        try:
            env["kubernetes"] = self.api.server_version()
        except InfrastructureError as e:
            env["kubernetes"] = f"unknown ({e})"
        if self._node_objs:
            info = next(iter(self._node_objs.values())).get("status", {}).get("nodeInfo", {})
            env["kernel"] = info.get("kernelVersion", "?")
            env["container_runtime"] = info.get("containerRuntimeVersion", "?")
            env["kubelet"] = info.get("kubeletVersion", "?")
        env["shared_clock"] = str(self.shared_clock).lower()
        return env

    @property
    def shared_clock(self) -> bool:  # type: ignore[override]
        """One kernel for every pod: one node, or a provider whose nodes share a kernel (kind)."""
        if self._single_kernel is not None:
            return self._single_kernel
        return len(self._node_objs) == 1


__all__ = ["KubeCluster", "KubeService", "Hopeless"]
