"""The real cluster the Kubernetes provider tests run against, and how this host sees its nodes.

$NETSLO_KUBECONFIG names the cluster (any cluster: kind, minikube, a cloud one); without it, the kind
cluster ``netslo`` that ``pytest --netslo-provider kind --netslo-keep-cluster`` keeps (scripts/ci-kind.sh
runs these tests against it). Without a cluster the tests skip with the reason; a cluster named in
$NETSLO_KUBECONFIG that does not answer is an error (the user asked for it: a skip would hide it).

Where every node is a kind container of this host and we are root, node-side checks look at the real
datapath from here (``docker exec`` into the node: its own iproute2 and iptables): tc qdiscs on a pod's
host veth, kube-proxy's rule counters, the namespace the node agent found.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess

KIND_KUBECONFIG = "/tmp/netslo-kind-netslo/kubeconfig"   # the kept kind cluster "netslo"


def kubeconfig() -> str:
    return os.environ.get("NETSLO_KUBECONFIG", KIND_KUBECONFIG)


def kubectl() -> str | None:
    """The kubectl binary (only the exec-transport benchmark compares against it)."""
    env = os.environ.get("NETSLO_KUBECTL")
    if env:
        return env
    found = sorted(glob.glob("/var/cache/netslo/k8s/k8s-v*/bin/kubectl"))
    return found[-1] if found else shutil.which("kubectl")


@functools.cache
def why_not_up() -> str | None:
    """None when the cluster's apiserver answers, else the reason to skip. RuntimeError when
    $NETSLO_KUBECONFIG names a cluster that is missing or does not answer."""
    kc = kubeconfig()
    why = None
    if not os.path.exists(kc):
        why = (f"no Kubernetes cluster: {kc} missing (set NETSLO_KUBECONFIG, or keep a kind cluster: "
               f"scripts/ci-kind.sh, or pytest -m cni --netslo-provider kind --netslo-keep-cluster)")
    else:
        from netslo.core.errors import InfrastructureError
        from netslo.providers.kube.api import KubeApi
        try:
            KubeApi(kc).server_version()
        except InfrastructureError as e:
            why = f"cluster of {kc} does not answer ({e})"
    if why and "NETSLO_KUBECONFIG" in os.environ:
        raise RuntimeError(f"NETSLO_KUBECONFIG: {why}")
    return why


@functools.cache
def why_no_node_access() -> str | None:
    """None when every node of the cluster is a running kind container here and we are root."""
    if why_not_up() is not None:
        return why_not_up()
    if os.geteuid() != 0:
        return "needs root to look into the nodes from this host"
    if shutil.which("docker") is None:
        return "needs the docker CLI of the engine the kind nodes run in"
    from netslo.providers.kube.api import KubeApi
    nodes = [n["metadata"]["name"] for n in KubeApi(kubeconfig()).get("nodes")]
    for node in nodes:
        proc = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", node], capture_output=True,
                              text=True, timeout=30)
        if proc.stdout.strip() != "true":
            return f"node {node} is not a running container of this host's docker engine (not a local kind)"
    return None


def node_exec(node: str, *argv: str) -> str:
    """``argv`` in kind node ``node`` (root in the node container): its stdout."""
    return subprocess.run(["docker", "exec", node, *argv], capture_output=True, check=True,
                          timeout=30).stdout.decode()
