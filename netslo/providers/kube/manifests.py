"""Kubernetes objects netslo creates, as plain dicts (pure functions, no cluster needed).

Everything lives in one run-scoped namespace ``netslo-<run id>`` labelled ``netslo.io/run-id``; every
object carries that label and ``app.kubernetes.io/managed-by: netslo``, so teardown can prove it deletes
only what this run made.
"""

from __future__ import annotations

import re
import secrets
import time

from netslo import __version__
from netslo.agent.responder_set import PROTOCOLS, READY_PORT
from netslo.core.errors import SpecError
from netslo.core.netns_access import PROC_SYS_DIR
from netslo.providers.base import RESPONDER_PORTS
from netslo.providers.service_program import check_type

RUN_LABEL = "netslo.io/run-id"
POD_LABEL = "netslo.io/pod"
MANAGED_BY = {"app.kubernetes.io/managed-by": "netslo"}
DEFAULT_IMAGE = f"localhost/netslo-agent:{__version__}"   # python -m netslo image build tags it so
READY_DIR = "/run/netslo"
PULL_POLICIES = ("Never", "IfNotPresent", "Always")
BASIC_RESPONDERS = PROTOCOLS     # served by the agent container's process; other kinds (tls, proxy...) by exec
AGENT_CONTAINER = "agent"
# An agent pod's CPU request (a pod's CPU weight under contention, cgroup cpu.shares: 10 at 10m,
# beside calico-node's and kube-apiserver's 256), unless its maker asks for more (``cpu``).
AGENT_CPU = "10m"
_CPU = re.compile(r"^([0-9]+m|[0-9]+(\.[0-9]+)?)$")
TRAFFIC_POLICIES = ("Cluster", "Local")
# Bandwidth annotations the CNI bandwidth plugin (and Cilium's Bandwidth Manager) read, e.g. "10M".
BANDWIDTH_ANNOTATIONS = ("kubernetes.io/egress-bandwidth", "kubernetes.io/ingress-bandwidth")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(k|M|G|T|Ki|Mi|Gi|Ti)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Every agent container runs as nobody with no capabilities: probes and responders need none, and a
# non-root mosquitto (mqtt responder) does not try to drop privileges it could not drop.
SECURITY_CONTEXT = {"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": True,
                    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
# The agent's group may open ICMP "ping sockets" in its pod's network namespace (the icmp probe,
# without CAP_NET_RAW); a namespaced sysctl Kubernetes allows by default ("safe" since v1.18).
# Not for hostNetwork pods: there it would be the node's setting, and the kubelet refuses it.
PING_SYSCTL = {"name": "net.ipv4.ping_group_range",
               "value": f"{SECURITY_CONTEXT['runAsGroup']} {SECURITY_CONTEXT['runAsGroup']}"}
# The idle process of the exec target container: exits at once on SIGTERM.
IDLE_COMMAND = ["sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]


def new_run_id() -> str:
    """Short, sortable, unique: seconds since epoch (hex) + 8 random hex digits (4 digits let two of
    50 ids made in one second collide with probability ~2 %; 8 digits, ~3e-7)."""
    return f"{int(time.time()):x}{secrets.token_hex(4)}"


def namespace_name(run_id: str) -> str:
    name = f"netslo-{run_id}"
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise SpecError("run id", run_id, "lowercase letters, digits and '-', at most 56 characters")
    return name


def k8s_name(name: str) -> str:
    """A pod name from a test's name: lowercase DNS label, at most 63 characters."""
    out = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].strip("-")
    if not out:
        raise SpecError("pod name", name, "at least one letter or digit")
    return out


def labels(run_id: str, **extra) -> dict:
    return {RUN_LABEL: run_id, **MANAGED_BY, **extra}


def namespace_manifest(run_id: str, annotations: dict | None = None) -> dict:
    """The run's namespace; ``annotations``: its owner record (``kube_reap.owner_annotations``)."""
    meta = {"name": namespace_name(run_id), "labels": labels(run_id)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def check_annotations(annotations: dict) -> dict:
    """Validate bandwidth annotations (a Kubernetes quantity such as '10M'); others pass through."""
    out = {}
    for key, value in (annotations or {}).items():
        value = str(value)
        if key in BANDWIDTH_ANNOTATIONS and not _QUANTITY.match(value):
            raise SpecError(f"annotation {key}", value, "a bandwidth quantity such as '10M' or '1G'")
        out[str(key)] = value
    return out


def _agent_command(responders) -> dict:
    """The agent container's command, ports and startup probe: with ``responders``, the process that
    serves them (``netslo.agent.responder_set``: one container, one interpreter, a forked process per
    protocol), started once its ready port accepts (every responder serves: a TCP check the kubelet
    makes itself, no exec in the container); without, an idle process."""
    if not responders:
        return {"command": IDLE_COMMAND}
    # A startup probe only (no readiness/liveness probe): it stops once the responders serve, so no
    # periodic probe traffic or exec disturbs a measurement afterwards.
    return {
        "command": ["python", "-m", "netslo.agent", "responders", ",".join(responders), "--ready-dir", READY_DIR,
                    "--ready-port", str(READY_PORT)],
        "ports": [{"name": p, "containerPort": RESPONDER_PORTS[p], "protocol": "UDP" if p == "udp" else "TCP"}
                  for p in responders],
        "startupProbe": {"tcpSocket": {"port": READY_PORT}, "periodSeconds": 1, "failureThreshold": 600},
    }


def agent_pod_manifest(name: str, run_id: str, node: str, *, image: str = DEFAULT_IMAGE,
                       pull_policy: str = "Never", host_network: bool = False,
                       annotations: dict | None = None, responders=BASIC_RESPONDERS,
                       role: str = "agent", cpu: str = AGENT_CPU) -> dict:
    """An agent pod pinned to ``node`` (required node affinity on kubernetes.io/hostname).

    One container, ``agent``: probes are exec-ed into it; its own process serves ``responders``
    (``python -m netslo.agent responders``), or idles when there are none. ``host_network`` gives
    the hostNetwork baseline (the node's own network stack).
    """
    if pull_policy not in PULL_POLICIES:
        raise SpecError("imagePullPolicy", pull_policy, f"one of {', '.join(PULL_POLICIES)}")
    if not _CPU.match(str(cpu)):
        raise SpecError("cpu", cpu, "a CPU quantity such as 100m or 0.5")
    for p in responders:
        if p not in BASIC_RESPONDERS:
            raise SpecError("responders", p, f"some of {', '.join(BASIC_RESPONDERS)} (the other kinds start "
                            f"on demand: start_responders)")
    pod_name = k8s_name(name)
    containers = [{
        "name": AGENT_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        **_agent_command(responders),
        "resources": {"requests": {"cpu": cpu, "memory": f"{64 + 48 * len(responders)}Mi"}},
        "securityContext": SECURITY_CONTEXT,
        "volumeMounts": [{"name": "netslo-run", "mountPath": READY_DIR}],
    }]
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
        # kind/minikube single-node clusters taint nothing, multi-node ones taint the control plane.
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "restartPolicy": "Always",
        "containers": containers,
        "volumes": [{"name": "netslo-run", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
    }
    if host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    else:
        spec["securityContext"] = {"sysctls": [PING_SYSCTL]}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": namespace_name(run_id),
                     "labels": labels(run_id, **{POD_LABEL: pod_name,
                                                 "app.kubernetes.io/name": "netslo-agent",
                                                 "app.kubernetes.io/component": role}),
                     "annotations": check_annotations(annotations or {})},
        "spec": spec,
    }


def backend_deployment_manifest(name: str, run_id: str, node: str, *, image: str = DEFAULT_IMAGE,
                                pull_policy: str = "Never", responders=("udp", "tcp")) -> dict:
    """A Deployment of one agent pod serving ``responders``, that prefers ``node`` (preferred, not
    required, node affinity: drained, its replacement goes to another node). Its pods carry the
    ``POD_LABEL`` ``name``, so ``service_manifest(..., pod_name=name)`` selects whichever one runs."""
    pod = agent_pod_manifest(name, run_id, node, image=image, pull_policy=pull_policy, responders=responders,
                             role="backend")
    pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}}
    meta = pod["metadata"]
    select = {POD_LABEL: meta["name"], RUN_LABEL: run_id}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels(run_id)},
            "spec": {"replicas": 1, "selector": {"matchLabels": select},
                     "template": {"metadata": {"labels": meta["labels"], "annotations": meta["annotations"]},
                                  "spec": pod["spec"]}}}


def service_manifest(name: str, run_id: str, pod_name: str, *, type: str = "ClusterIP",
                     external_traffic_policy: str | None = None,
                     protocols=("udp", "tcp", "http"), ports: list | None = None) -> dict:
    """A Service selecting one agent pod's responders (same port numbers as the pod, or ``ports``:
    a list of Service port dicts with name/port/targetPort/protocol)."""
    check_type(type)
    if external_traffic_policy is not None:
        if type != "NodePort":
            raise SpecError("externalTrafficPolicy", external_traffic_policy, "only with type NodePort")
        if external_traffic_policy not in TRAFFIC_POLICIES:
            raise SpecError("externalTrafficPolicy", external_traffic_policy,
                            f"one of {', '.join(TRAFFIC_POLICIES)}")
    spec = {
        "type": type,
        "selector": {POD_LABEL: k8s_name(pod_name), RUN_LABEL: run_id},
        "ports": ports or [{"name": p, "port": RESPONDER_PORTS[p], "targetPort": RESPONDER_PORTS[p],
                            "protocol": "UDP" if p == "udp" else "TCP"} for p in protocols],
    }
    if external_traffic_policy:
        spec["externalTrafficPolicy"] = external_traffic_policy
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": k8s_name(name), "namespace": namespace_name(run_id),
                         "labels": labels(run_id)},
            "spec": spec}


# ---- the impairment DaemonSet (netslo.providers.kube.impair) ---------------------------------------

IMPAIR_NAME = "netslo-impair"
IMPAIR_CONTAINER = "impair"
IMPAIR_COMPONENT = "impairment"
NETNS_DIR = "/var/run/netns"      # where the agent looks (netslo.impair.podns), inside the container
# The host side of the mount: containerd makes pod namespaces in /var/run/netns, a symlink to /run on
# every systemd/Debian node. The real path, because containerd (1.6) checks that a HostToContainer
# source is a shared/slave mount without resolving symlinks ("/var/run/netns" would match "/").
HOST_NETNS_DIR = "/run/netns"
# DirectoryOrCreate, not Directory: containerd makes /run/netns with a node's first pod namespace, so a
# node that has run only hostNetwork pods (a kind worker running calico-node and kube-proxy) has none
# yet, and "Directory" left the DaemonSet's pod there in ContainerCreating ("hostPath type check
# failed: /run/netns is not a directory") until a non-hostNetwork pod came. Created by kubelet (root,
# 0755), it is where containerd puts the namespaces later; they appear through HostToContainer.
HOST_NETNS_TYPE = "DirectoryOrCreate"
# Root, because the pod namespaces under /var/run/netns belong to the host's root user; but only three
# capabilities: NET_ADMIN (qdiscs, filters, the ifb link, netfilter rules), SYS_ADMIN (setns into a pod's
# network namespace) and NET_RAW (the QoS module's per-hop DSCP capture: AF_PACKET sockets on the node's
# and pods' interfaces, and the raw socket that sends the marked packets). Not privileged, no privilege
# escalation, read-only root filesystem, the runtime's seccomp
# profile (it allows setns/unshare only to holders of SYS_ADMIN).
IMPAIR_CAPABILITIES = ("NET_ADMIN", "SYS_ADMIN", "NET_RAW")
IMPAIR_SECURITY_CONTEXT = {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "privileged": False,
                           "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                           "capabilities": {"drop": ["ALL"], "add": list(IMPAIR_CAPABILITIES)},
                           "seccompProfile": {"type": "RuntimeDefault"}}


def impairment_daemonset_manifest(run_id: str, *, image: str = DEFAULT_IMAGE,
                                  pull_policy: str = "Never") -> dict:
    """The DaemonSet that applies netem inside pods' network namespaces, one pod per node.

    hostNetwork (the node's namespace: where pod veths have their peers), tolerates every taint (a
    pod can be impaired on any node), mounts the host's /var/run/netns read-only with HostToContainer
    propagation (namespaces of pods created later appear), and the host's /proc/sys writable at
    PROC_SYS_DIR (the container's own /proc/sys is read-only; ``net.*`` entries there are those of the
    namespace of the task that opens them, so ``netem exec`` binds it over /proc/sys in a mount
    namespace of its own to write a pod's sysctls); gets its node name from the downward API.
    Its container idles; an exec runs ``python -m netslo.agent netem ...`` in it."""
    if pull_policy not in PULL_POLICIES:
        raise SpecError("imagePullPolicy", pull_policy, f"one of {', '.join(PULL_POLICIES)}")
    select = {"app.kubernetes.io/name": IMPAIR_NAME, RUN_LABEL: run_id}
    meta_labels = labels(run_id, **{"app.kubernetes.io/name": IMPAIR_NAME,
                                    "app.kubernetes.io/component": IMPAIR_COMPONENT})
    container = {
        "name": IMPAIR_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": IDLE_COMMAND,
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
        "securityContext": IMPAIR_SECURITY_CONTEXT,
        "volumeMounts": [{"name": "netns", "mountPath": NETNS_DIR, "readOnly": True,
                          "mountPropagation": "HostToContainer"},
                         {"name": "tmp", "mountPath": "/tmp"},
                         {"name": "proc-sys", "mountPath": PROC_SYS_DIR}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": IMPAIR_NAME, "namespace": namespace_name(run_id), "labels": meta_labels},
        "spec": {
            "selector": {"matchLabels": select},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(meta_labels)},
                "spec": {
                    "hostNetwork": True,
                    "tolerations": [{"operator": "Exists"}],
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container],
                    "volumes": [{"name": "netns", "hostPath": {"path": HOST_NETNS_DIR, "type": HOST_NETNS_TYPE}},
                                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                                {"name": "proc-sys", "hostPath": {"path": "/proc/sys", "type": "Directory"}}],
                },
            },
        },
    }
