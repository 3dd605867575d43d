"""The impairment DaemonSet's manifest (security-relevant fields), its hand-run template, and the
node agent's command line (``python -m netslo.agent netem``: bad input -> one JSON line, exit 2)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netslo.core.errors import SpecError, Unsupported
from netslo.impair import node_cli
from netslo.providers.base import Pod
from netslo.providers.kube import manifests as km
from netslo.providers.kube.impair import KubeImpairer

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "netslo" / "providers" / "kube" / "templates" / "impairment-daemonset.yaml"


def _pod_spec(ds):
    return ds["spec"]["template"]["spec"]


def test_daemonset_has_only_the_privileges_it_needs():
    ds = km.impairment_daemonset_manifest("r1")
    spec = _pod_spec(ds)
    assert spec["hostNetwork"] is True
    assert spec["automountServiceAccountToken"] is False
    assert "hostPID" not in spec and "hostIPC" not in spec
    [c] = spec["containers"]
    sc = c["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sorted(sc["capabilities"]["add"]) == ["NET_ADMIN", "NET_RAW", "SYS_ADMIN"]  # exactly these three
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["runAsUser"] == 0  # the host's netns files are root's
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "securityContext" not in spec or "privileged" not in spec["securityContext"]


def test_daemonset_mounts_only_the_host_netns_directory_read_only_and_proc_sys():
    spec = _pod_spec(km.impairment_daemonset_manifest("r1"))
    host_paths = [v for v in spec["volumes"] if "hostPath" in v]
    # /run/netns = the host's /var/run/netns without the symlink (containerd's propagation check)
    # DirectoryOrCreate: a node that has run only hostNetwork pods has no /run/netns yet (kind worker
    # with Calico: "hostPath type check failed: /run/netns is not a directory" with type Directory)
    # /proc/sys: writable, for a pod namespace's sysctls (the container's own /proc/sys is read-only)
    assert host_paths == [{"name": "netns", "hostPath": {"path": "/run/netns", "type": "DirectoryOrCreate"}},
                          {"name": "proc-sys", "hostPath": {"path": "/proc/sys", "type": "Directory"}}]
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["netns"] == {"name": "netns", "mountPath": "/var/run/netns", "readOnly": True,
                               "mountPropagation": "HostToContainer"}
    assert mounts["proc-sys"] == {"name": "proc-sys", "mountPath": "/host/proc-sys"}
    assert all("hostPath" not in v for v in spec["volumes"] if v["name"] not in ("netns", "proc-sys"))


def test_daemonset_is_labelled_with_the_run_id_and_runs_on_every_node():
    ds = km.impairment_daemonset_manifest("r1", image="img:2", pull_policy="IfNotPresent")
    assert ds["kind"] == "DaemonSet" and ds["metadata"]["namespace"] == "netslo-r1"
    for labels in (ds["metadata"]["labels"], ds["spec"]["template"]["metadata"]["labels"]):
        assert labels[km.RUN_LABEL] == "r1" and labels["app.kubernetes.io/managed-by"] == "netslo"
    sel = ds["spec"]["selector"]["matchLabels"]
    assert sel[km.RUN_LABEL] == "r1"
    assert all(ds["spec"]["template"]["metadata"]["labels"][k] == v for k, v in sel.items())
    spec = _pod_spec(ds)
    assert spec["tolerations"] == [{"operator": "Exists"}]
    c = spec["containers"][0]
    assert c["image"] == "img:2" and c["imagePullPolicy"] == "IfNotPresent"
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
    with pytest.raises(SpecError, match="imagePullPolicy: value 'Sometimes'"):
        km.impairment_daemonset_manifest("r1", pull_policy="Sometimes")


def test_hand_run_template_is_the_generated_manifest():
    template = yaml.safe_load(TEMPLATE.read_text())
    generated = km.impairment_daemonset_manifest("manual", pull_policy="IfNotPresent")
    assert template == generated, "netslo/providers/kube/templates/impairment-daemonset.yaml differs from the generated DaemonSet"
    sc = _pod_spec(template)["containers"][0]["securityContext"]
    assert sorted(sc["capabilities"]["add"]) == ["NET_ADMIN", "NET_RAW", "SYS_ADMIN"] and sc["privileged"] is False


def _agent(*args):
    return subprocess.run([sys.executable, "-m", "netslo.agent", "netem", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("args,field", [
    (["apply", "--pod-ip", "10.0.0.300", "--direction", "egress", "--spec", "{}"], "--pod-ip"),
    (["read", "--pod-ip", "10.0.0.3", "--direction", "up"], "--direction"),
    (["apply", "--pod-ip", "10.0.0.3", "--direction", "egress"], "--spec"),
    (["apply", "--pod-ip", "10.0.0.3", "--direction", "egress", "--spec", "{delay"], "--spec"),
    (["apply", "--pod-ip", "10.0.0.3", "--direction", "egress", "--spec", '{"delay": "5"}'], "--spec.delay"),
    (["frobnicate"], "action"),
])
def test_bad_input_is_one_json_line_naming_the_field(args, field):
    p = _agent(*args)
    assert p.returncode == node_cli.EXIT_USAGE, p
    assert p.stdout == ""
    [line] = p.stderr.strip().splitlines()
    err = json.loads(line)
    assert err["error"] == "usage" and err["message"].startswith(f"{field}: value "), err
    assert "expected" in err["message"] and err["kernel"] and err["node"]


def test_spec_direction_must_agree_with_the_direction_option():
    with pytest.raises(SpecError, match=r"--spec direction: value 'ingress' — expected egress"):
        node_cli.impairment('{"delay": "5ms", "direction": "ingress"}', "egress")
    assert node_cli.impairment('{"delay": "5ms"}', "ingress").direction == "ingress"


class _NoCluster:
    run_id, image, pull_policy, namespace, nodes = "r1", km.DEFAULT_IMAGE, "Never", "netslo-r1", ["n1"]


def test_impairer_refuses_what_it_cannot_do_before_touching_the_cluster():
    imp = KubeImpairer(_NoCluster())
    pod = Pod(name="c", node="n1", ip="10.244.0.9")
    with pytest.raises(Unsupported, match="host-egress"):
        imp.read(pod, "host-egress")
    with pytest.raises(SpecError, match="direction: value 'sideways'"):
        imp.read(pod, "sideways")
    with pytest.raises(Exception, match="hostNetwork pod"):
        imp.read(Pod(name="h", node="n1", ip="10.0.0.1", host_network=True), "egress")
    assert imp.manifest() == km.impairment_daemonset_manifest("r1")
