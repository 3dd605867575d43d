"""netem on the pods of a real Kubernetes cluster, through a node-level impairment DaemonSet.

``KubeImpairer(cluster)`` has the interface of ``netslo.impair.netem.NetemController`` (``apply(pod,
imp) -> held``, ``read``, ``remove``, ``clear``), so ``fixtures/impair.py`` and the closed-loop
verification (``netslo.impair.verify``) work unchanged on kind, minikube and existing clusters.

On first use it creates the DaemonSet ``netslo-impair`` in the run's namespace (see
``kube_manifests.impairment_daemonset_manifest``: hostNetwork, root with only NET_ADMIN + SYS_ADMIN,
the host's /var/run/netns read-only), waits until it is ready on every node (an error names the
DaemonSet, its pods' last status and events) and then execs ``python -m netslo.agent netem ...``
(``netslo.impair.node_cli``) in the DaemonSet pod on the target pod's node, through that pod's warm
agent session (``kube_session``: one exec stream per node agent, opened when the DaemonSet is ready,
no interpreter start per command). That finds the pod's network namespace by the pod IP and runs the
embedded provider's netem code there.

The same agent is the cluster's hands on a pod's network namespace: ``KubeCluster.exec_in`` runs
helpers (sysctl, ethtool, nstat, bulk flows) there as the agent's root through ``exec_in`` below
(``python -m netslo.agent netem exec``), as the embedded provider runs them from its host.

Errors: the agent's exit code 3 (sch_netem or ifb missing) -> ``Unsupported`` (tests skip with the
reason), anything else -> ``InfrastructureError``; never an SLO failure. ``clear()`` removes everything
this impairer applied; deleting the run namespace removes the DaemonSet. Timeouts are seconds.
"""

from __future__ import annotations

import json

from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.core.phase_times import timed_call
from netslo.providers.kube import manifests as km
from netslo.providers.kube.api import tail
from netslo.providers.kube.session import AgentSessions
from netslo.providers.kube.wait import wait_workload

DIRECTIONS = ("egress", "ingress")
EXIT_UNSUPPORTED = 3
EXEC_TIMEOUT = 60.0


class KubeImpairer:
    """Impairments on a ``KubeCluster``'s pods via the run's impairment DaemonSet."""

    def __init__(self, cluster, ready_timeout: float = 120.0, exec_timeout: float = EXEC_TIMEOUT):
        self.cluster = cluster
        self.ready_timeout = ready_timeout
        self.exec_timeout = exec_timeout
        self.applied: dict[tuple[str, str], object] = {}   # (pod name, direction) -> Pod
        self._agents: dict[str, str] | None = None          # node name -> DaemonSet pod name
        self._caps: dict[str, dict] = {}
        self._agent_sessions: AgentSessions | None = None   # made on first use (_sessions)

    @property
    def name(self) -> str:
        return km.IMPAIR_NAME

    # ---- the DaemonSet ----------------------------------------------------------------------
    def manifest(self) -> dict:
        return km.impairment_daemonset_manifest(self.cluster.run_id, image=self.cluster.image,
                                                pull_policy=self.cluster.pull_policy)

    def create(self) -> None:
        """Create the DaemonSet unless it exists; no wait (``ensure`` waits): a session that will need
        the node agents starts them with its pods, so they come up together."""
        api, ns = self.cluster.api, self.cluster.namespace
        if api.get("daemonset", km.IMPAIR_NAME, ns, missing_ok=True) is None:
            api.create(self.manifest(), what=f"create DaemonSet {ns}/{km.IMPAIR_NAME}")

    def ensure(self) -> dict[str, str]:
        """Create the DaemonSet (once) and wait until it runs on every node; node -> its pod name."""
        if self._agents is not None:
            return self._agents
        api, ns = self.cluster.api, self.cluster.namespace
        self.create()
        wait_workload(api, "DaemonSet", ns, km.IMPAIR_NAME, "impairment DaemonSet", self.ready_timeout)
        pods = api.get("pods", namespace=ns,
                       selector=f"app.kubernetes.io/name={km.IMPAIR_NAME},{km.RUN_LABEL}={self.cluster.run_id}")
        self._agents = {p["spec"].get("nodeName"): p["metadata"]["name"] for p in pods
                        if p.get("status", {}).get("phase") == "Running"}
        for pod in self._agents.values():
            self._sessions.warm(pod)        # each node agent imports while the caller goes on
        return self._agents

    @property
    def _sessions(self) -> AgentSessions:
        """The node agents' warm sessions, one exec stream each (``kube_session``)."""
        if self._agent_sessions is None:
            self._agent_sessions = AgentSessions(self.cluster.api, self.cluster.namespace, km.IMPAIR_CONTAINER)
        return self._agent_sessions

    def close_sessions(self) -> None:
        """End the node agents' sessions (the run is ending)."""
        if self._agent_sessions is not None:
            self._agent_sessions.close()

    def agent_pod(self, node: str) -> str:
        agents = self.ensure()
        if node not in agents:
            raise InfrastructureError(f"impairment DaemonSet {self.cluster.namespace}/{km.IMPAIR_NAME}: no "
                                      f"running pod on node {node} (has {', '.join(sorted(agents)) or 'none'})")
        return agents[node]

    @timed_call("bulk flows and pod commands")
    def run(self, node: str, args: list[str], command: str = "netem") -> dict:
        """``python -m netslo.agent COMMAND ARGS`` (netem, qos) on ``node``; its JSON, or the error it reported."""
        pod = self.agent_pod(node)
        ns = self.cluster.namespace
        proc = self._sessions.call(pod, [command, *args], {}, self.exec_timeout)
        if proc.returncode == 0:
            try:
                return json.loads(proc.stdout)
            except ValueError:
                raise InfrastructureError(f"{command} {args[0]} on node {node}: not JSON on stdout: "
                                          f"{proc.stdout[:200]!r}") from None
        err = _last_json(proc.stderr)
        msg = err.get("message") or tail(proc.stderr)
        if proc.returncode == EXIT_UNSUPPORTED and err.get("error") == "unsupported":
            raise Unsupported(msg)
        raise InfrastructureError(f"{command} {args[0]} on node {node} (pod {ns}/{pod}): exit {proc.returncode}: {msg}")

    @timed_call("bulk flows and pod commands")
    def exec_in(self, pod, argv: list[str], timeout: float) -> bytes:
        """``argv`` as the node agent's root in ``pod``'s network namespace (``netem exec``; a
        hostNetwork pod: in the node's, where the agent already is); its stdout. InfrastructureError
        with the command's stderr when it fails or cannot start."""
        agent = self.agent_pod(pod.node)
        if getattr(pod, "host_network", False):
            proc = self.cluster.api.run(self.cluster.namespace, agent, km.IMPAIR_CONTAINER, list(argv), timeout=timeout)
        else:
            proc = self._sessions.call(agent, ["netem", "exec", "--pod-ip", pod.ip, "--", *argv], {}, timeout)
        if proc.returncode == 0:
            return proc.stdout
        err = _last_json(proc.stderr)
        raise InfrastructureError(f"{' '.join(argv[:4])} in the network namespace of pod {pod.name} (node agent "
                                  f"{agent} on {pod.node}): exit {proc.returncode}: "
                                  f"{err.get('message') or tail(proc.stderr)}")

    # ---- capability -------------------------------------------------------------------------
    def capability(self, node: str) -> dict:
        """What the node's kernel can do (``Capabilities.as_dict()`` + node), asked once per node."""
        if node not in self._caps:
            self._caps[node] = self.run(node, ["capability"])
        return self._caps[node]

    def require(self, *features: str, nodes=None) -> None:
        """Unsupported naming each node whose kernel lacks a feature ('netem', 'ifb', 'ingress_redirect')."""
        features = features or ("netem", "ifb", "ingress_redirect")
        missing = []
        for node in nodes or self.cluster.nodes:
            cap = self.capability(node)
            lacks = [f for f in features if not cap.get(f)]
            if lacks:
                why = "; ".join(cap.get("reasons", {}).get(f, "not available") for f in lacks)
                what = "has no sch_netem" if lacks == ["netem"] else f"lacks {', '.join(lacks)}"
                missing.append(f"node {node}: kernel {cap.get('kernel', '?')} {what} ({why})")
        if missing:
            raise Unsupported("; ".join(missing))

    # ---- NetemController's interface --------------------------------------------------------
    def _target_args(self, pod, direction: str) -> list[str]:
        if direction not in DIRECTIONS:
            if direction == "host-egress":
                raise Unsupported("host-egress impairments are not implemented on Kubernetes "
                                  "(the host-side veth); use egress or ingress")
            raise SpecError("direction", direction, "egress or ingress")
        if getattr(pod, "host_network", False):
            raise InfrastructureError(f"pod {pod.name} is a hostNetwork pod: netem would impair its whole "
                                      "node; impair a pod-network pod instead")
        if not pod.ip:
            raise InfrastructureError(f"pod {pod.name}: no pod IP known")
        return ["--pod-ip", pod.ip, "--direction", direction]

    def lookup(self, pod) -> dict:
        """Where the node agent finds ``pod``: {'netns', 'ifname', 'node', ...}."""
        return self.run(pod.node, ["lookup", "--pod-ip", pod.ip])

    def apply(self, pod, imp) -> dict:
        args = self._target_args(pod, imp.direction)
        self.applied[(pod.name, imp.direction)] = pod
        out = self.run(pod.node, ["apply", *args, "--spec", json.dumps(imp.to_doc())])
        return out["held"]

    def read(self, pod, direction: str) -> dict:
        return self.inspect(pod, direction)["held"]

    def inspect(self, pod, direction: str) -> dict:
        """The whole read answer: held netem plus the inventory (qdiscs of the interface, ifb present)."""
        return self.run(pod.node, ["read", *self._target_args(pod, direction)])

    def remove(self, pod, direction: str) -> None:
        self.applied.pop((pod.name, direction), None)
        self.run(pod.node, ["remove", *self._target_args(pod, direction)])

    def clear(self) -> None:
        """Remove everything applied; the first error is raised after trying every one."""
        first = None
        for (_, direction), pod in list(self.applied.items()):
            try:
                self.remove(pod, direction)   # forgets it first: tried once, whatever happens
            except (InfrastructureError, Unsupported) as e:
                first = first or e
        if first is not None:
            raise InfrastructureError(f"clearing impairments: {first}")


def _last_json(data: bytes) -> dict:
    for line in reversed(data.decode(errors="replace").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return {}
    return {}
