"""Where the local single-node cluster of scripts/local-k8s.sh is, and whether it answers.

Tests of the Kubernetes providers run against it (``--provider existing``); without it they skip
with the reason. $NETSLO_KUBECONFIG / $NETSLO_KUBECTL point them at another cluster instead.
"""

from __future__ import annotations

import glob
import os
import subprocess

LOCAL_KUBECONFIG = "/run/netslo-k8s/pki/admin.kubeconfig"
NODE_NETNS = "/var/run/netns/netslo-k8s-node"   # the local node's network namespace


def kubeconfig() -> str:
    return os.environ.get("NETSLO_KUBECONFIG", LOCAL_KUBECONFIG)


def kubectl() -> str | None:
    env = os.environ.get("NETSLO_KUBECTL")
    if env:
        return env
    found = sorted(glob.glob("/var/cache/netslo/k8s/k8s-v*/bin/kubectl"))
    if found:
        return found[-1]
    from shutil import which
    return which("kubectl")


def why_not_up() -> str | None:
    """None when the cluster answers /readyz, else the reason to skip."""
    kc, k = kubeconfig(), kubectl()
    if not k:
        return "no kubectl (build it with scripts/local-k8s.sh build, or set NETSLO_KUBECTL)"
    if not os.path.exists(kc):
        return f"no Kubernetes cluster up: {kc} missing (run scripts/local-k8s.sh up)"
    try:
        p = subprocess.run([k, "--kubeconfig", kc, "get", "--raw", "/readyz", "--request-timeout=5s"],
                           capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cluster of {kc} does not answer ({e})"
    if p.returncode:
        return f"cluster of {kc} not ready: {p.stderr.decode(errors='replace').strip()[-200:]}"
    return None


def is_local_node() -> bool:
    """True when the cluster is the local one and its node's network namespace is reachable."""
    return kubeconfig() == LOCAL_KUBECONFIG and os.path.exists(NODE_NETNS)
