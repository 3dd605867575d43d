"""CNI data files, checksum policy, our overlays and the Helm command line.

The overlay tests use small documents written here (shaped like the upstream objects they touch),
not copies of upstream manifests, which are fetched at install time only.
"""

import hashlib
import json

import pytest
import yaml

from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers import cni
from netslo.providers.cni.install import antrea_overlay, calico_overlay, cilium_values, helm_command, render


@pytest.mark.parametrize("name", cni.CNIS)
def test_every_cni_data_file_is_pinned_and_valid(name):
    spec = cni.load(name)
    assert spec.name == name and spec.version[0] in "v1"
    assert spec.url.startswith("https://") and spec.version.lstrip("v") in spec.url
    assert spec.ready and all(w.kind in ("DaemonSet", "Deployment") for w in spec.ready)
    assert spec.default_encapsulation in spec.encapsulations and "none" in spec.encapsulations
    assert spec.bandwidth in ("cni-plugin", "calico-qos-controls", "bandwidth-manager")


def test_unknown_cni_and_bad_data_files_are_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="--netslo-cni: value 'weave'"):
        cni.load("weave")
    good = yaml.safe_load((cni.pins_dir() / "calico.yaml").read_text())
    good["source"]["url"] = "http://example.invalid/calico.yaml"
    (tmp_path / "calico.yaml").write_text(yaml.safe_dump(good))
    with pytest.raises(SpecError, match="source.url: value 'http://example.invalid/calico.yaml'"):
        cni.load("calico", tmp_path)
    good["source"]["url"] = "https://example.invalid/calico.yaml"
    good["source"]["sha256"] = "abc"
    (tmp_path / "calico.yaml").write_text(yaml.safe_dump(good))
    with pytest.raises(SpecError, match="source.sha256: value 'abc'"):
        cni.load("calico", tmp_path)


def _spec_with(sha):
    import dataclasses
    return dataclasses.replace(cni.load("antrea"), sha256=sha)


def test_checksum_is_enforced_when_recorded():
    data = b"kind: List\n"
    good = hashlib.sha256(data).hexdigest()
    assert cni.verify(_spec_with(good), data) == good
    with pytest.raises(InfrastructureError, match=f"has sha256 {good}, expected {'0' * 64}"):
        cni.verify(_spec_with("0" * 64), data)


def test_unrecorded_checksum_is_refused_unless_allowed(monkeypatch):
    data = b"x"
    monkeypatch.delenv(cni.ALLOW_UNRECORDED_ENV, raising=False)
    with pytest.raises(InfrastructureError, match=f"no sha256 recorded .* has sha256 {hashlib.sha256(data).hexdigest()}"):
        cni.verify(_spec_with(""), data)
    monkeypatch.setenv(cni.ALLOW_UNRECORDED_ENV, "1")
    assert cni.verify(_spec_with(""), data) == hashlib.sha256(data).hexdigest()


def test_a_mirror_file_built_from_source_is_used_only_with_its_matching_record(tmp_path, monkeypatch):
    """A local pack (not the published file) passes through its .local-build record, never around the
    recorded digest silently; a tampered file or a broken record stops the install."""
    spec = _spec_with("1" * 64)            # the published file's digest: the local pack never has it
    monkeypatch.setenv(cni.MIRROR_ENV, str(tmp_path))
    monkeypatch.delenv(cni.ALLOW_UNRECORDED_ENV, raising=False)
    where = cni.mirror_path(spec)
    where.parent.mkdir(parents=True)
    where.write_bytes(b"packed here")
    with pytest.raises(InfrastructureError, match=r"mirror file .* expected 1111.*needs its \.local-build record"):
        cni.fetch(spec)
    record = tmp_path / "antrea" / spec.version / ("antrea.yml" + cni.LOCAL_BUILD_SUFFIX)
    record.write_text(f"sha256 {hashlib.sha256(b'packed here').hexdigest()}\nbuilt from the tag's source\n")
    assert cni.fetch(spec)[1] == hashlib.sha256(b"packed here").hexdigest()
    assert cni.digest_status(spec) == "local build" and "built from the tag's source" in cni.source(spec)
    where.write_bytes(b"tampered")
    with pytest.raises(InfrastructureError, match="local-build record says"):
        cni.fetch(spec)
    record.write_text("md5 abc\n")
    with pytest.raises(SpecError, match="sha256 <64 hex digits>"):
        cni.fetch(spec)


def test_fetch_uses_the_cache_and_still_verifies(tmp_path):
    spec = _spec_with(hashlib.sha256(b"cached").hexdigest())
    key = hashlib.sha256(spec.url.encode()).hexdigest()[:16]
    (tmp_path / f"antrea-{spec.version}-{key}").write_bytes(b"cached")
    assert cni.fetch(spec, directory=tmp_path)[0] == b"cached"
    (tmp_path / f"antrea-{spec.version}-{key}").write_bytes(b"tampered")
    with pytest.raises(InfrastructureError, match="has sha256"):
        cni.fetch(spec, directory=tmp_path)


def test_fetch_reads_the_mirror_never_the_network_and_still_verifies(tmp_path, monkeypatch):
    spec = _spec_with(hashlib.sha256(b"mirrored").hexdigest())
    monkeypatch.setenv(cni.MIRROR_ENV, str(tmp_path / "mirror"))
    where = tmp_path / "mirror" / "antrea" / spec.version / "antrea.yml"
    assert cni.mirror_path(spec) == where and cni.source(spec) == str(where)
    with pytest.raises(SpecError, match=f"NETSLO_CNI_MIRROR: .*missing: {where}"):
        cni.check_source(spec)
    with pytest.raises(InfrastructureError, match="mirror file .* nothing is downloaded"):
        cni.fetch(spec, directory=tmp_path / "cache")
    where.parent.mkdir(parents=True)
    where.write_bytes(b"mirrored")
    cni.check_source(spec)
    assert cni.fetch(spec, directory=tmp_path / "cache") == (b"mirrored", spec.sha256)
    where.write_bytes(b"tampered")
    with pytest.raises(InfrastructureError, match="has sha256"):
        cni.fetch(spec, directory=tmp_path / "cache")
    monkeypatch.delenv(cni.MIRROR_ENV)
    assert cni.mirror_path(spec) is None and cni.source(spec) == spec.url


def test_cilium_digest_is_recorded_so_no_workflow_needs_the_opt_out():
    import pathlib
    assert cni.load("cilium").sha256 == "b2afd87b7f75f875f92a14559f14f59b7babbb479d968e3fd625a20bf30ec20e"
    root = pathlib.Path(__file__).resolve().parents[2]
    for f in [root / "action.yml", *(root / ".github" / "workflows").glob("*.yml"), root / "scripts" / "ci-kind.sh"]:
        assert cni.ALLOW_UNRECORDED_ENV not in f.read_text(), f


def test_calico_digest_is_recorded_and_its_default_encapsulation_is_vxlan():
    spec = cni.load("calico")
    assert spec.sha256 == "4b2e4053abc87427c214128f0e1b065d2f0dbadeb6be4ca3bdc6754e33af0ca7"
    assert spec.default_encapsulation == "vxlan"   # ipip needs the kernel's IPIP tunnel


def test_digest_cli_checks_a_local_copy(tmp_path, capsys):
    from netslo.providers.cni.__main__ import main
    f = tmp_path / "calico.yaml"
    f.write_bytes(b"not the release file")
    assert main(["digest", "calico", "--file", str(f)]) == 1
    assert "DIFFERS from the recorded 4b2e4053" in capsys.readouterr().out


CALICO_LIKE = """
kind: ConfigMap
apiVersion: v1
metadata: {name: calico-config, namespace: kube-system}
data:
  calico_backend: bird
  cni_network_config: |-
    {
      "name": "k8s-pod-network",
      "cniVersion": "0.3.1",
      "plugins": [
        {"type": "calico", "mtu": __CNI_MTU__},
        {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}
      ]
    }
---
kind: DaemonSet
apiVersion: apps/v1
metadata: {name: calico-node, namespace: kube-system}
spec:
  template:
    spec:
      containers:
      - name: calico-node
        env:
        - {name: CALICO_IPV4POOL_IPIP, value: Always}
        - {name: CALICO_IPV4POOL_VXLAN, value: Never}
        livenessProbe: {exec: {command: [/bin/calico-node, -felix-live, -bird-live]}}
        readinessProbe: {exec: {command: [/bin/calico-node, -felix-ready, -bird-ready]}}
---
kind: Deployment
apiVersion: apps/v1
metadata: {name: calico-kube-controllers, namespace: kube-system}
spec:
  template:
    spec:
      containers:
      - name: calico-kube-controllers
        readinessProbe: {exec: {command: [/usr/bin/check-status, -r]}, periodSeconds: 10}
"""


def test_calico_overlay_sets_pool_encapsulation_and_leaves_the_cni_chain_alone():
    docs = calico_overlay(list(yaml.safe_load_all(CALICO_LIKE)), "vxlan", "192.168.0.0/16")
    env = {e["name"]: e["value"] for e in docs[1]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env == {"CALICO_IPV4POOL_IPIP": "Never", "CALICO_IPV4POOL_VXLAN": "Always",
                   "CALICO_IPV4POOL_CIDR": "192.168.0.0/16"}
    assert docs[0]["data"]["calico_backend"] == "vxlan"
    node = docs[1]["spec"]["template"]["spec"]["containers"][0]
    assert node["livenessProbe"]["exec"]["command"] == ["/bin/calico-node", "-felix-live"]
    assert node["readinessProbe"]["exec"]["command"] == ["/bin/calico-node", "-felix-ready"]
    conf = docs[0]["data"]["cni_network_config"]
    parsed = json.loads(conf.replace("__CNI_MTU__", "1450"))
    # felix shapes annotated pods itself (QoS controls): a chained bandwidth plugin would race it
    assert [p["type"] for p in parsed["plugins"]] == ["calico", "portmap"]


def test_calico_overlay_dual_stack_turns_on_ipv6_as_calicos_guide_says():
    like = CALICO_LIKE.replace('"mtu": __CNI_MTU__}', '"mtu": __CNI_MTU__, "ipam": {"type": "calico-ipam"}}')
    docs = calico_overlay(list(yaml.safe_load_all(like)), "vxlan", "192.168.0.0/16,fd00:10:244::/56")
    env = {e["name"]: e["value"] for e in docs[1]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CALICO_IPV4POOL_CIDR"] == "192.168.0.0/16" and env["CALICO_IPV6POOL_CIDR"] == "fd00:10:244::/56"
    assert env["IP6"] == "autodetect" and env["FELIX_IPV6SUPPORT"] == "true"
    assert env["CALICO_IPV6POOL_VXLAN"] == env["CALICO_IPV4POOL_VXLAN"] == "Always"
    parsed = json.loads(docs[0]["data"]["cni_network_config"].replace("__CNI_MTU__", "1450"))
    assert parsed["plugins"][0]["ipam"] == {"type": "calico-ipam", "assign_ipv4": "true", "assign_ipv6": "true"}
    # IPv6 only: no IPv4 pool, no IPv4 node address, IPAM assigns IPv6 alone
    docs = calico_overlay(list(yaml.safe_load_all(like)), "vxlan", "fd00:10:244::/56")
    env = {e["name"]: e["value"] for e in docs[1]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["IP"] == "none" and "CALICO_IPV4POOL_CIDR" not in env
    parsed = json.loads(docs[0]["data"]["cni_network_config"].replace("__CNI_MTU__", "1450"))
    assert parsed["plugins"][0]["ipam"]["assign_ipv4"] == "false"
    # a manifest whose CNI config has no calico-ipam entry cannot be given IPv6: said, not half-applied
    with pytest.raises(InfrastructureError, match="no calico-ipam entry"):
        calico_overlay(list(yaml.safe_load_all(CALICO_LIKE)), "vxlan", "192.168.0.0/16,fd00:10:244::/56")


def test_calico_overlay_ipip_keeps_bird():
    docs = calico_overlay(list(yaml.safe_load_all(CALICO_LIKE)), "ipip", "192.168.0.0/16")
    node = docs[1]["spec"]["template"]["spec"]["containers"][0]
    assert docs[0]["data"]["calico_backend"] == "bird"
    assert "-bird-ready" in node["readinessProbe"]["exec"]["command"]
    assert {e["name"]: e["value"] for e in node["env"]}["CALICO_IPV4POOL_IPIP"] == "Always"


def test_calico_overlay_refuses_a_manifest_it_does_not_fit():
    with pytest.raises(InfrastructureError, match="overlay does not fit"):
        calico_overlay([{"kind": "ConfigMap", "metadata": {"name": "other"}, "data": {}}], "ipip", "x")


ANTREA_LIKE = """
kind: ConfigMap
apiVersion: v1
metadata: {name: antrea-config, namespace: kube-system}
data:
  antrea-agent.conf: |
    featureGates:
    #  AntreaProxy: true
    #trafficEncapMode: encap
    #tunnelType: geneve
---
kind: DaemonSet
apiVersion: apps/v1
metadata: {name: antrea-agent, namespace: kube-system}
spec:
  template:
    spec:
      initContainers: [{name: install-cni, image: "antrea/antrea-agent-ubuntu:latest"}]
      containers: [{name: antrea-agent, image: "antrea/antrea-agent-ubuntu:latest"}, {name: other, image: "busybox:latest"}]
"""


@pytest.mark.parametrize("enc,mode,tunnel", [("none", "noEncap", None), ("vxlan", "encap", "vxlan"),
                                             ("geneve", "encap", "geneve")])
def test_antrea_overlay_sets_encap_mode(enc, mode, tunnel):
    conf = antrea_overlay(list(yaml.safe_load_all(ANTREA_LIKE)), enc, "v2.4.3")[0]["data"]["antrea-agent.conf"]
    parsed = yaml.safe_load(conf)
    assert parsed["trafficEncapMode"] == mode
    assert parsed.get("tunnelType") == tunnel


def test_antrea_overlay_sets_antreas_images_to_the_pinned_version_and_nothing_else():
    """The pinned file is Antrea's checked-in manifest (images :latest); its release asset is the same
    rendering with the tag set to the version: the overlay makes that, or refuses a file it does not fit."""
    docs = antrea_overlay(list(yaml.safe_load_all(ANTREA_LIKE)), "geneve", "v2.4.3")
    pod = docs[1]["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"] + pod["containers"]] == [
        "antrea/antrea-agent-ubuntu:v2.4.3", "antrea/antrea-agent-ubuntu:v2.4.3", "busybox:latest"]
    other = ANTREA_LIKE.replace("antrea-agent-ubuntu:latest", "antrea-agent-ubuntu:v2.2.0")
    with pytest.raises(InfrastructureError, match="v2.2.0 in DaemonSet antrea-agent is not of the pinned v2.4.3"):
        antrea_overlay(list(yaml.safe_load_all(other)), "geneve", "v2.4.3")
    with pytest.raises(InfrastructureError, match="no antrea/antrea-\\* container image"):
        antrea_overlay(list(yaml.safe_load_all(ANTREA_LIKE.split("---")[0])), "geneve", "v2.4.3")


def test_every_cni_data_file_records_a_digest_and_antreas_is_the_tags_checked_in_manifest():
    for name in cni.CNIS:
        assert len(cni.load(name).sha256) == 64, name
    antrea = cni.load("antrea")
    assert antrea.sha256 == "68cf798efc7ef6fe2f9c49aaf6bf33ece571f2b5064274f80f0960cd8ab68452"
    assert antrea.url == "https://raw.githubusercontent.com/antrea-io/antrea/v2.4.3/build/yamls/antrea.yml"


def test_cilium_values_bandwidth_manager_and_routing():
    spec = cni.load("cilium")
    tunnel = cilium_values(spec, "vxlan", "10.244.0.0/16")
    assert tunnel["bandwidthManager.enabled"] == "true" and tunnel["routingMode"] == "tunnel"
    assert tunnel["tunnelProtocol"] == "vxlan"
    native = cilium_values(spec, "none", "10.244.0.0/16")
    assert native["routingMode"] == "native" and native["ipv4NativeRoutingCIDR"] == "10.244.0.0/16"
    assert "ipv6.enabled" not in tunnel and "ipv6.enabled" not in native
    dual = cilium_values(spec, "none", "10.244.0.0/16,fd00:10:244::/56")
    assert dual["ipv6.enabled"] == "true" and "ipv4.enabled" not in dual
    assert dual["ipv6NativeRoutingCIDR"] == "fd00:10:244::/56" and dual["ipv4NativeRoutingCIDR"] == "10.244.0.0/16"
    v6 = cilium_values(spec, "vxlan", "fd00:10:244::/56")
    assert v6["ipv6.enabled"] == "true" and v6["ipv4.enabled"] == "false"


def test_cilium_helm_command_would_install_the_fetched_chart():
    spec = cni.load("cilium")
    argv = helm_command(spec, "/tmp/c.tgz", {"b": "2", "a": "1"}, "/k/config", None)
    assert argv == ["helm", "upgrade", "--install", "cilium", "/tmp/c.tgz", "--namespace", "kube-system",
                    "--kubeconfig", "/k/config", "--set", "a=1", "--set", "b=2"]


def test_render_passes_manifests_through_the_right_overlay():
    docs = render(cni.load("antrea"), ANTREA_LIKE.encode(), "none", "10.244.0.0/16")
    assert "trafficEncapMode: noEncap" in docs[0]["data"]["antrea-agent.conf"]


def test_calico_node_and_kube_controllers_get_a_startup_probe_running_their_readiness_check_every_second():
    for enc, cmd in (("vxlan", ["/bin/calico-node", "-felix-ready"]),
                     ("ipip", ["/bin/calico-node", "-felix-ready", "-bird-ready"])):
        node = calico_overlay(list(yaml.safe_load_all(CALICO_LIKE)), enc, "192.168.0.0/16")[1][
            "spec"]["template"]["spec"]["containers"][0]
        assert node["startupProbe"]["exec"]["command"] == cmd == node["readinessProbe"]["exec"]["command"]
        assert node["startupProbe"]["periodSeconds"] == 1 and node["startupProbe"]["failureThreshold"] >= 300
        assert "periodSeconds" not in node["readinessProbe"]      # upstream's own probes as they were
    no_probe = CALICO_LIKE.replace("        readinessProbe: {exec: {command: [/bin/calico-node, -felix-ready, -bird-ready]}}\n", "")
    with pytest.raises(InfrastructureError, match="calico-node has no exec readinessProbe"):
        calico_overlay(list(yaml.safe_load_all(no_probe)), "vxlan", "192.168.0.0/16")
    kc = calico_overlay(list(yaml.safe_load_all(CALICO_LIKE)), "vxlan", "192.168.0.0/16")[2][
        "spec"]["template"]["spec"]["containers"][0]
    assert kc["startupProbe"]["exec"]["command"] == ["/usr/bin/check-status", "-r"]
    assert kc["startupProbe"]["periodSeconds"] == 1 and kc["readinessProbe"]["periodSeconds"] == 10


def _pod(name, phase="Pending", sandbox="False", host_network=False, owned=True):
    return {"metadata": {"name": name, "uid": f"uid-{name}",
                         "ownerReferences": [{"kind": "ReplicaSet", "controller": True}] if owned else []},
            "spec": {"nodeName": "n1", **({"hostNetwork": True} if host_network else {})},
            "status": {"phase": phase, "conditions": [{"type": "PodReadyToStartContainers", "status": sandbox}]}}


class StagingApi:
    """Records applies, list calls and deletions; a workload is listed ready once it has been applied,
    nodes are Ready, kube-system holds ``pods``."""

    def __init__(self, pods=(), proxy=True, sandbox_failed=()):
        self.calls, self.applied, self.pods = [], set(), list(pods)
        self.sandbox_failed = list(sandbox_failed)   # pod names with a FailedCreatePodSandBox event
        if proxy:   # kubeadm's kube-proxy DaemonSet, running on every node
            self.applied.add(("daemonset", "kube-proxy"))

    def apply(self, docs, what=None, server_side=True):
        self.calls.append(("apply", [d["metadata"]["name"] for d in docs]))
        self.applied.update((d["kind"].lower(), d["metadata"]["name"]) for d in docs)

    def list(self, kind, namespace=None, *, name=None, selector=None, field_selector=None):
        self.calls.append(("list", kind, name))
        if kind == "event":
            assert (namespace, field_selector) == ("kube-system", "reason=FailedCreatePodSandBox")
            return [{"involvedObject": {"kind": "Pod", "name": n, "uid": f"uid-{n}"}} for n in self.sandbox_failed], "1"
        if kind == "node":
            return [{"metadata": {"name": "n1", "resourceVersion": "1"},
                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}}], "1"
        if (kind, name) not in self.applied:
            return [], "1"
        st = {"desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2,
              "availableReplicas": 1, "updatedReplicas": 1}
        return [{"metadata": {"name": name, "resourceVersion": "1"}, "spec": {"replicas": 1}, "status": st}], "1"

    def get(self, kind, name=None, namespace=None, selector=None, missing_ok=False):
        if kind == "daemonset":
            self.calls.append(("get", kind, name))
            return {"metadata": {"name": name}} if (kind, name) in self.applied else None
        assert (kind, namespace) == ("pods", "kube-system")
        return self.pods

    def delete(self, kind, name, namespace=None):
        self.calls.append(("delete", kind, name, namespace))


def test_the_cni_configuration_goes_first_its_workloads_once_kube_proxy_runs_the_staged_ones_last(monkeypatch):
    from netslo.providers.cni import install as inst
    spec = cni.load("calico")
    assert [(w.name, w.staged) for w in spec.ready] == [("calico-node", False), ("calico-kube-controllers", True)]
    docs = [{"kind": "ConfigMap", "metadata": {"name": "calico-config", "namespace": "kube-system"}},
            {"kind": "Deployment", "metadata": {"name": "calico-kube-controllers", "namespace": "kube-system"}},
            {"kind": "DaemonSet", "metadata": {"name": "calico-node", "namespace": "kube-system"}},
            {"kind": "CustomResourceDefinition", "metadata": {"name": "ippools.crd.projectcalico.org"}}]
    monkeypatch.setattr(inst, "fetch", lambda spec, allow_unrecorded=None: (b"", "ab" * 32))
    monkeypatch.setattr(inst, "render", lambda spec, data, enc, subnet: docs)
    api = StagingApi()
    installing = inst.prepare(api, spec)
    assert api.calls == [("apply", ["calico-config", "ippools.crd.projectcalico.org"])]
    api.calls.clear()
    inst.apply_workloads(api, installing, timeout=5)
    assert api.calls == [("get", "daemonset", "kube-proxy"), ("list", "daemonset", "kube-proxy"),
                         ("apply", ["calico-node"])]
    api.calls.clear()
    inst.await_datapath(api, installing, timeout=5)
    assert ("list", "daemonset", "calico-node") in api.calls and not any(c[0] == "apply" for c in api.calls)
    api.calls.clear()
    inst.apply_staged(api, installing)
    assert api.calls == [("apply", ["calico-kube-controllers"])]
    inst.await_staged(api, installing, timeout=5)
    assert api.calls[1:] == [("list", "deployment", "calico-kube-controllers")]


def test_a_cluster_without_kube_proxy_gets_the_cni_workloads_at_once(monkeypatch):
    from netslo.providers.cni import install as inst
    api = StagingApi(proxy=False)
    inst.apply_workloads(api, inst.Installing(cni.load("calico"), {}, workloads=[
        {"kind": "DaemonSet", "metadata": {"name": "calico-node"}}]), timeout=5)
    assert api.calls == [("get", "daemonset", "kube-proxy"), ("apply", ["calico-node"])]


def _calico_node(env_from=True):
    c = {"name": "calico-node"}
    if env_from:
        c["envFrom"] = [{"configMapRef": {"name": "kubernetes-services-endpoint", "optional": True}}]
    return {"kind": "DaemonSet", "metadata": {"name": "calico-node", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"initContainers": [], "containers": [c]}}}}


@pytest.mark.parametrize("reads_it", [True, False], ids=["manifest reads the ConfigMap", "manifest does not"])
def test_calico_given_the_api_servers_address_gets_its_configmap_and_its_agents_at_once(monkeypatch, reads_it):
    """With the API server's own address, Calico's kubernetes-services-endpoint ConfigMap goes in with
    its configuration and its agents need no kube-proxy: applied without waiting for it. A manifest
    whose containers do not read that ConfigMap is installed as before (agents after kube-proxy)."""
    from netslo.providers.cni import install as inst
    docs = [{"kind": "ConfigMap", "metadata": {"name": "calico-config", "namespace": "kube-system"}},
            _calico_node(reads_it)]
    monkeypatch.setattr(inst, "fetch", lambda spec, allow_unrecorded=None: (b"", "ab" * 32))
    monkeypatch.setattr(inst, "render", lambda spec, data, enc, subnet: docs)
    api = StagingApi(proxy=False)
    seen = []
    monkeypatch.setattr(api, "apply", lambda d, what=None, server_side=True: seen.append(d))
    installing = inst.prepare(api, cni.load("calico"), api_endpoint=("198.19.200.3", 6443))
    names = [d["metadata"]["name"] for d in seen[0]]
    assert names == (["calico-config", "kubernetes-services-endpoint"] if reads_it else ["calico-config"])
    if reads_it:
        assert seen[0][1]["data"] == {"KUBERNETES_SERVICE_HOST": "198.19.200.3", "KUBERNETES_SERVICE_PORT": "6443"}
    assert installing.api_endpoint == (("198.19.200.3", 6443) if reads_it else None)
    inst.apply_workloads(api, installing, timeout=5)
    assert installing.applied
    assert (("get", "daemonset", "kube-proxy") in api.calls) == (not reads_it)


def test_cilium_given_the_api_servers_address_gets_it_as_helm_values(monkeypatch):
    from netslo.providers.cni import install as inst
    monkeypatch.setattr(inst, "fetch", lambda spec, allow_unrecorded=None: (b"chart", "ab" * 32))
    installing = inst.prepare(StagingApi(), cni.load("cilium"), api_endpoint=("198.19.200.3", 6443))
    assert installing.values["k8sServiceHost"] == "198.19.200.3" and installing.values["k8sServicePort"] == "6443"
    assert "k8sServiceHost" not in inst.prepare(StagingApi(), cni.load("cilium")).values


def test_the_api_servers_address_is_its_endpointslices_ipv4_one_first():
    from netslo.providers.kube.api import KubeApi

    class Api:
        def __init__(self, slices):
            self.slices = slices

        def get(self, kind, name=None, namespace=None, selector=None, missing_ok=False):
            assert (kind, namespace, selector) == ("endpointslice", "default", "kubernetes.io/service-name=kubernetes")
            return self.slices
    v6 = {"addressType": "IPv6", "endpoints": [{"addresses": ["2001:2:0:c8::3"]}], "ports": [{"port": 6443}]}
    v4 = {"addressType": "IPv4", "endpoints": [{"addresses": ["198.19.200.3"]}], "ports": [{"port": 6443}]}
    assert KubeApi.server_endpoint(Api([v6, v4])) == ("198.19.200.3", 6443)
    assert KubeApi.server_endpoint(Api([v6])) == ("2001:2:0:c8::3", 6443)
    assert KubeApi.server_endpoint(Api([{"addressType": "IPv4", "endpoints": [], "ports": [{"port": 6443}]}])) is None
    assert KubeApi.server_endpoint(Api([])) is None


def test_pods_scheduled_before_the_pod_network_ran_are_made_again_once_it_does():
    """CoreDNS's pods, scheduled once the CNI's config file made the nodes Ready and failed by the
    kubelet before the CNI's agent ran, are deleted (their ReplicaSet makes them anew at once);
    one whose sandbox is still being made (no FailedCreatePodSandBox event) and the rest are not touched."""
    from netslo.providers.cni import install as inst
    pods = [_pod("coredns-a"), _pod("coredns-b"), _pod("coredns-adding"), _pod("running", phase="Running", sandbox="True"),
            _pod("starting", sandbox="True"), _pod("hostnet", host_network=True), _pod("bare", owned=False)]
    failed = ["coredns-a", "coredns-b", "running", "starting", "hostnet", "bare", "gone-before"]
    api = StagingApi(pods, sandbox_failed=failed)
    assert inst.restart_unplaced(api, cni.load("calico")) == ["coredns-a", "coredns-b"]
    assert api.calls == [("list", "event", None), ("delete", "pod", "coredns-a", "kube-system"),
                         ("delete", "pod", "coredns-b", "kube-system")]
    api = StagingApi(pods)   # every sandbox still being made (Cilium's CNI call waits for its agent)
    assert inst.restart_unplaced(api, cni.load("cilium")) == []
    api = StagingApi([_pod("running", phase="Running", sandbox="True")], sandbox_failed=["running"])
    assert inst.restart_unplaced(api, cni.load("calico")) == [] and api.calls == []   # nothing waits: no events read


def test_staged_is_a_boolean_on_a_manifest_workload_after_the_first(tmp_path):
    for name, bad in (("calico", "yes"), ("calico", None), ("cilium", True)):
        d = yaml.safe_load((cni.pins_dir() / f"{name}.yaml").read_text())
        if bad is None:
            d["ready"][0]["staged"] = True        # nothing before it to wait for
        else:
            d["ready"][-1]["staged"] = bad
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(d))
        with pytest.raises(SpecError, match="ready\\[\\].staged"):
            cni.load(name, tmp_path)
