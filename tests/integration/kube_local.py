"""Where the local single-node cluster of scripts/local-k8s.sh is, and whether it answers.

Tests of the Kubernetes providers run against it (``existing`` provider); without it they skip with
the reason. $NETSLO_KUBECONFIG points them at another cluster instead.
"""

from __future__ import annotations

import glob
import os
import shutil

LOCAL_KUBECONFIG = "/run/netslo-k8s/pki/admin.kubeconfig"
NODE_NETNS = "/var/run/netns/netslo-k8s-node"   # the local node's network namespace


def kubeconfig() -> str:
    return os.environ.get("NETSLO_KUBECONFIG", LOCAL_KUBECONFIG)


def kubectl() -> str | None:
    """The kubectl binary (only the exec-transport benchmark compares against it)."""
    env = os.environ.get("NETSLO_KUBECTL")
    if env:
        return env
    found = sorted(glob.glob("/var/cache/netslo/k8s/k8s-v*/bin/kubectl"))
    return found[-1] if found else shutil.which("kubectl")


def why_not_up() -> str | None:
    """None when the cluster's apiserver answers, else the reason to skip."""
    kc = kubeconfig()
    if not os.path.exists(kc):
        return f"no Kubernetes cluster up: {kc} missing (run scripts/local-k8s.sh up)"
    from netslo.errors import InfrastructureError
    from netslo.providers.kubeapi import KubeApi
    try:
        KubeApi(kc).server_version()
    except InfrastructureError as e:
        return f"cluster of {kc} does not answer ({e})"
    return None


def is_local_node() -> bool:
    """True when the cluster is the local one and its node's network namespace is reachable."""
    return kubeconfig() == LOCAL_KUBECONFIG and os.path.exists(NODE_NETNS)
