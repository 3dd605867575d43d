"""Readiness failures of clusters this machine cannot run (kind + Calico), through a FAKE kubectl.

The fake is a small executable standing in for the kubectl binary at the process boundary: it answers
`get` with canned objects of a cluster whose CNI never comes up (what kind shows with
disableDefaultCNI and a CNI image that cannot be pulled). Everything above it is the real code.
The same waits run against a real cluster in tests/integration/test_kube_existing.py.
"""

import json
import os
import stat
import sys
import time

import pytest

from netslo.errors import InfrastructureError
from netslo.providers import cni
from netslo.providers.cni.install import wait_ready
from netslo.providers.existing import ExistingProvider
from netslo.providers.kubectl import Kubectl

NODE = {"metadata": {"name": "netslo-worker"}, "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                   "message": "container runtime network not ready: NetworkReady=false "
                                              "reason:NetworkPluginNotReady message:cni plugin not initialized"}]}}
CALICO_DS = {"metadata": {"name": "calico-node"}, "spec": {"selector": {"matchLabels": {"k8s-app": "calico-node"}}},
             "status": {"desiredNumberScheduled": 2, "numberReady": 0, "updatedNumberScheduled": 2}}
CALICO_POD = {"metadata": {"name": "calico-node-x7k2p"}, "status": {
    "phase": "Pending", "conditions": [],
    "initContainerStatuses": [{"name": "install-cni", "state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image \"docker.io/calico/cni:v3.31.3\""}}}]}}

FAKE = r'''#!{python}
"""FAKE kubectl (test boundary): canned answers of a cluster whose CNI never becomes ready."""
import json, sys
args = sys.argv[1:]
while args and args[0] in ("--kubeconfig", "--context"):
    args = args[2:]
log = open({log!r}, "a"); log.write(" ".join(args) + "\n"); log.close()
objs = json.loads({objs!r})
if args[:2] == ["get", "nodes"]:
    print(json.dumps({{"items": [objs["node"]]}}))
elif args[:3] == ["get", "daemonset", "calico-node"]:
    print(json.dumps(objs["ds"]))
elif args[:2] == ["get", "pods"] and "k8s-app=calico-node" in args:
    print(json.dumps({{"items": [objs["pod"]]}}))
else:
    sys.stderr.write("fake kubectl: unexpected " + " ".join(args) + "\n"); sys.exit(1)
'''


@pytest.fixture
def fake_kubectl(tmp_path):
    path = tmp_path / "kubectl"
    log = tmp_path / "calls.log"
    objs = json.dumps({"node": NODE, "ds": CALICO_DS, "pod": CALICO_POD})
    path.write_text(FAKE.format(python=sys.executable, log=str(log), objs=objs))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), log


def test_cni_never_ready_names_component_and_pod_status_with_fake_kubectl(fake_kubectl):
    binary, log = fake_kubectl
    spec = cni.load("calico")
    t0 = time.monotonic()
    with pytest.raises(InfrastructureError) as e:
        wait_ready(Kubectl(binary, "/dev/null"), spec, timeout=2)
    took = time.monotonic() - t0
    msg = str(e.value)
    assert msg.startswith("CNI calico: DaemonSet kube-system/calico-node: not ready after 2s; last status: "
                          "0/2 ready, 2 updated; pod calico-node-x7k2p: phase=Pending; install-cni: "
                          "waiting ImagePullBackOff"), msg
    assert 2 <= took < 10
    assert "get daemonset calico-node -n kube-system" in log.read_text()


def test_cluster_nodes_never_ready_fail_up_with_fake_kubectl(fake_kubectl):
    binary, _ = fake_kubectl
    t0 = time.monotonic()
    with pytest.raises(InfrastructureError) as e:
        ExistingProvider(kubeconfig=os.devnull, kubectl=binary, ready_timeout=1.5).up()
    msg = str(e.value)
    assert msg.startswith("cluster nodes: not ready after 2s; last status: netslo-worker: Ready=False "
                          "(KubeletNotReady: container runtime network not ready"), msg
    assert time.monotonic() - t0 < 10


def test_missing_kubectl_is_unsupported():
    from netslo.errors import Unsupported
    with pytest.raises(Unsupported, match="kubectl not found"):
        Kubectl("/nonexistent/kubectl")
