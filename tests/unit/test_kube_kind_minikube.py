"""kind and minikube providers: the configs they write, the exact commands they would run, and
their control flow with a kind stand-in (a shell script that logs its argv). A real kind cluster runs
through scripts/kind-offline.sh (tests/integration/test_kind_offline.py, and the gate on kind +
Calico in docs/kubernetes.md); minikube runs here only without a registry (scripts/minikube-offline.sh:
a base image derived from the kind node image, netslo's own CNI installer).
"""

import io
import json
import os
import subprocess
import tarfile

import pytest
import yaml

from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers import minikube as mk_mod
from netslo.providers.kind import cluster as kind_mod
from netslo.providers.kind.cluster import KIND_NODE_IMAGE, KindProvider
from netslo.providers.kube import manifests as km
from netslo.providers.kube.api import KubeApi
from netslo.providers.minikube import MinikubeProvider


@pytest.fixture(autouse=True)
def _default_kind(monkeypatch, tmp_path):
    """The defaults, not the offline toolchain's exports (scripts/kind-offline.sh env) of this shell;
    kind owner records in a directory of the test's own (a record left in the real one would make a
    later run reap a cluster of that name)."""
    for var in (kind_mod.KIND_ENV, kind_mod.NODE_IMAGE_ENV, kind_mod.ARCHIVE_ENV, "NETSLO_CNI_MIRROR",
                "NETSLO_AGENT_IMAGE", mk_mod.MINIKUBE_ENV, mk_mod.BASE_IMAGE_ENV, mk_mod.KUBERNETES_VERSION_ENV, mk_mod.NETWORK_ENV):
        monkeypatch.delenv(var, raising=False)
    _owner_dir(tmp_path, monkeypatch)
    # no docker engine in these tests (kind is a stand-in): the engine runs cgroup v2, as GitHub's
    # runners do (tests/integration/test_kind_offline.py asks a real engine)
    monkeypatch.setattr(kind_mod.kind_host, "engine_cgroup_version", lambda *a, **kw: 2)


@pytest.fixture
def kind_calico(tmp_path):
    return KindProvider(cni="calico", nodes=2, name="netslo", workdir=str(tmp_path))


def test_kind_config_would_have_n_nodes_no_default_cni_and_cni_subnets(kind_calico):
    cfg = yaml.safe_load(kind_calico.config_yaml())
    assert cfg["kind"] == "Cluster" and cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    # dual-stack by default (--netslo-ip-family dual): the CNI's IPv4 subnets and kind's IPv6 defaults
    assert cfg["networking"] == {"disableDefaultCNI": True, "ipFamily": "dual",
                                 "podSubnet": "192.168.0.0/16,fd00:10:244::/56",
                                 "serviceSubnet": "10.96.0.0/12,fd00:10:96::/112", "kubeProxyMode": "iptables"}
    # --netslo-nodes 2: two nodes pods run on = the control plane (untainted by a kubeadm patch) + 1 worker
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane", "worker"]
    patch = yaml.safe_load(cfg["kubeadmConfigPatches"][0])
    assert patch == {"kind": "InitConfiguration", "nodeRegistration": {"taints": []}}
    assert all(n["image"] == KIND_NODE_IMAGE for n in cfg["nodes"])
    assert all(n["labels"] == {"netslo.io/cni": "calico"} for n in cfg["nodes"])


@pytest.mark.parametrize("cni,subnet", [("cilium", "10.244.0.0/16"), ("antrea", "10.244.0.0/16")])
def test_kind_config_would_use_each_cnis_pod_subnet(tmp_path, cni, subnet):
    cfg = KindProvider(cni=cni, nodes=1, workdir=str(tmp_path), ip_family="ipv4").config()
    assert cfg["networking"]["podSubnet"] == subnet and "ipFamily" not in cfg["networking"]
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane"]  # one node: the untainted control plane
    assert "kubeadmConfigPatches" not in cfg                        # kind untaints a single node itself


def test_kind_config_dual_stack_and_ipv6(tmp_path):
    dual = KindProvider(cni="calico", nodes=2, workdir=str(tmp_path), ip_family="dual").config()["networking"]
    assert dual["ipFamily"] == "dual"
    assert dual["podSubnet"] == "192.168.0.0/16,fd00:10:244::/56"
    assert dual["serviceSubnet"] == "10.96.0.0/12,fd00:10:96::/112"
    v6 = KindProvider(cni="cilium", nodes=1, workdir=str(tmp_path), ip_family="ipv6").config()["networking"]
    assert (v6["ipFamily"], v6["podSubnet"], v6["serviceSubnet"]) == ("ipv6", "fd00:10:244::/56", "fd00:10:96::/112")
    with pytest.raises(SpecError, match="--netslo-ip-family: value 'v6'"):
        KindProvider(cni="calico", ip_family="v6")


def test_pod_addresses_from_the_pod_status():
    from netslo.providers.kube.cluster import pod_addresses
    assert pod_addresses({"podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}]}) == ("10.1.0.5", "fd00::5")
    assert pod_addresses({"podIP": "10.1.0.5"}) == ("10.1.0.5", "")
    assert pod_addresses({"podIP": "fd00::5", "podIPs": [{"ip": "fd00::5"}]}) == ("fd00::5", "fd00::5")
    assert pod_addresses({}) == ("", "")


def test_kind_node_image_is_pinned_by_digest():
    assert KIND_NODE_IMAGE.startswith("kindest/node:v1.37.")
    assert len(KIND_NODE_IMAGE.split("@sha256:")[1]) == 64
    assert kind_mod.KIND_VERSION == "v0.33.0"


def test_kind_tells_kubelet_to_run_on_a_cgroup_v1_engine_only_there(kind_calico):
    """kubelet >= 1.35 exits on a cgroup v1 host unless its configuration says failCgroupV1: false."""
    assert kind_calico.config()["kubeadmConfigPatches"] == [kind_mod.UNTAINT_PATCH]   # not asked yet
    kind_calico.cgroup_v1 = False
    assert kind_calico.config()["kubeadmConfigPatches"] == [kind_mod.UNTAINT_PATCH]
    kind_calico.cgroup_v1 = True
    patches = kind_calico.config()["kubeadmConfigPatches"]
    assert [yaml.safe_load(p) for p in patches[1:]] == [{"kind": "KubeletConfiguration", "failCgroupV1": False}]
    one = KindProvider(cni="calico", nodes=1)
    one.cgroup_v1 = True
    assert one.config()["kubeadmConfigPatches"] == [kind_mod.CGROUP_V1_PATCH]


def test_kind_commands_would_run_create_then_load(kind_calico, tmp_path):
    cfg, kc = str(tmp_path / "kind-config.yaml"), str(tmp_path / "kubeconfig")
    assert kind_calico.plan(exists=False) == [
        ["kind", "get", "clusters"],
        ["kind", "create", "cluster", "--name", "netslo", "--config", cfg, "--image", KIND_NODE_IMAGE,
         "--kubeconfig", kc, "--wait", "0s"],
        ["kind", "load", "docker-image", km.DEFAULT_IMAGE, "--name", "netslo"],
    ]
    assert kind_calico.delete_command() == ["kind", "delete", "cluster", "--name", "netslo", "--kubeconfig", kc]


def test_kind_commands_would_reuse_a_kept_cluster_without_creating_or_deleting(tmp_path):
    p = KindProvider(cni="cilium", name="ci", keep_cluster=True, image="reg/agent:1", workdir=str(tmp_path))
    assert p.plan(exists=True) == [
        ["kind", "get", "clusters"],
        ["kind", "export", "kubeconfig", "--name", "ci", "--kubeconfig", str(tmp_path / "kubeconfig")],
        ["kind", "load", "docker-image", "reg/agent:1", "--name", "ci"],
    ]
    p.teardown()  # created nothing: deletes nothing (would fail: there is no kind binary here)


def test_kind_commands_would_refuse_to_clobber_an_existing_cluster(kind_calico):
    with pytest.raises(InfrastructureError, match="exists and keep_cluster is off"):
        kind_calico.plan(exists=True)


@pytest.mark.parametrize("kw,msg", [({"nodes": 0}, "--netslo-nodes: value 0"), ({"nodes": 9}, "--netslo-nodes: value 9"),
                                    ({"cni": "flannel"}, "--netslo-cni: value 'flannel'"),
                                    ({"name": "Net_SLO"}, "kind cluster name: value 'Net_SLO'"),
                                    ({"cni": "calico", "encapsulation": "geneve"},
                                     "calico encapsulation: value 'geneve'")])
def test_kind_bad_options_are_one_line_spec_errors(tmp_path, kw, msg):
    with pytest.raises(SpecError, match=msg):
        KindProvider(workdir=str(tmp_path), **kw)


def test_kind_without_the_binary_is_unsupported(tmp_path):
    from netslo.core.errors import Unsupported
    with pytest.raises(Unsupported, match="kind not found"):
        KindProvider(kind="kind-not-installed-here", workdir=str(tmp_path)).up()
    with pytest.raises(Unsupported, match="kind not found"):
        KindProvider(kind="kind-not-installed-here", workdir=str(tmp_path)).preflight()


def test_kind_binary_and_node_image_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(kind_mod.KIND_ENV, "/opt/kind-offline/bin/kind")
    monkeypatch.setenv(kind_mod.NODE_IMAGE_ENV, "localhost/netslo-kind-node:v1.37.0")
    p = KindProvider(cni="calico", nodes=2, workdir=str(tmp_path))
    assert p.create_command()[:3] == ["/opt/kind-offline/bin/kind", "create", "cluster"]
    assert "localhost/netslo-kind-node:v1.37.0" in p.create_command()
    assert {n["image"] for n in p.config()["nodes"]} == {"localhost/netslo-kind-node:v1.37.0"}


def _archive(tmp_path, tags):
    path = tmp_path / "agent.tar"
    with tarfile.open(path, "w") as tar:
        data = json.dumps([{"Config": "c.json", "RepoTags": tags, "Layers": []}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_kind_loads_a_new_cluster_from_the_agent_archive_and_a_kept_one_from_the_engine(tmp_path, monkeypatch):
    """A new cluster's nodes see the archive through a read-only bind mount and their containerd
    imports it from there (with the snapshotter their CRI plugin uses); a kept cluster gets the
    engine's image."""
    archive = _archive(tmp_path, ["reg/agent:1"])
    monkeypatch.setenv("NETSLO_AGENT_ARCHIVE", archive)
    p = KindProvider(cni="calico", nodes=3, image="reg/agent:1", workdir=str(tmp_path / "w"))
    assert [a[1] for a in p.plan(exists=False)] == ["get", "create"]          # no kind load
    assert p.node_names() == ["netslo-control-plane", "netslo-worker", "netslo-worker2"]
    mount = {"hostPath": archive, "containerPath": kind_mod.ARCHIVE_IN_NODE, "readOnly": True}
    assert [n["extraMounts"] for n in p.config()["nodes"]] == [[mount]] * 3
    assert p.import_command("netslo-worker", "overlayfs") == [
        "docker", "exec", "netslo-worker", "ctr", "--namespace=k8s.io", "images", "import", "--all-platforms",
        "--digests", "--snapshotter=overlayfs", kind_mod.ARCHIVE_IN_NODE]
    kept = KindProvider(cni="calico", image="reg/agent:1", keep_cluster=True, workdir=str(tmp_path / "k"))
    assert kept.plan(exists=True)[-1] == [kept.kind, "load", "docker-image", "reg/agent:1", "--name", "netslo"]
    monkeypatch.delenv("NETSLO_AGENT_ARCHIVE")
    assert "extraMounts" not in KindProvider(cni="calico", workdir=str(tmp_path / "n")).config()["nodes"][0]


@pytest.mark.parametrize("config,want", [
    ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "overlayfs"\n', "overlayfs"),
    ('version = 3\n[plugins."io.containerd.cri.v1.images"]\nsnapshotter = "native"\n', "native"),
    ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "pause"\n', None),
    ('version = 9\n', None), ("not = toml = at all", None)])
def test_kind_node_snapshotter_is_read_from_its_containerd_config(config, want):
    from netslo.providers.kind.host import snapshotter_of
    if want:
        assert snapshotter_of(config) == want
    else:
        with pytest.raises(InfrastructureError, match="containerd config"):
            snapshotter_of(config)


def _oci_archive(tmp_path, name):
    path = tmp_path / "agent-oci.tar"
    with tarfile.open(path, "w") as tar:
        for member, doc in (("oci-layout", {"imageLayoutVersion": "1.0.0"}),
                            ("index.json", {"schemaVersion": 2, "manifests": [
                                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "0" * 64,
                                 "size": 1, "annotations": {"io.containerd.image.name": name}}]})):
            data = json.dumps(doc).encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_kind_agent_archive_may_be_an_oci_layout_named_for_containerd(tmp_path):
    """kind-offline's archive without the base layer is an OCI layout: the image is the one its index
    names with containerd's annotation (what ``ctr images import`` tags it as)."""
    KindProvider(cni="calico", image="reg/agent:1", archive=_oci_archive(tmp_path, "reg/agent:1"),
                 workdir=str(tmp_path / "w"))
    with pytest.raises(SpecError, match=r"an archive of reg/agent:1 \(it holds reg/agent:0\)"):
        KindProvider(cni="calico", image="reg/agent:1", archive=_oci_archive(tmp_path, "reg/agent:0"),
                     workdir=str(tmp_path / "w"))


@pytest.mark.parametrize("what", ["missing", "other tag", "not a tar"])
def test_kind_agent_archive_that_is_not_the_image_is_one_line(tmp_path, what):
    path = {"missing": str(tmp_path / "nope.tar"), "other tag": _archive(tmp_path, ["reg/other:2"]),
            "not a tar": str(tmp_path / "x.tar")}[what]
    (tmp_path / "x.tar").write_text("not a tarball")
    with pytest.raises(SpecError) as e:
        KindProvider(cni="calico", image="reg/agent:1", archive=path, workdir=str(tmp_path / "w"))
    assert "NETSLO_AGENT_ARCHIVE" in str(e.value) and path in str(e.value) and "\n" not in str(e.value)
    assert what != "other tag" or "reg/other:2" in str(e.value)


def _calls(log) -> list[list[str]]:
    """The fake kind's commands (first two words), without bring-up's polls for the kubeconfig."""
    calls = [line.split()[:2] for line in log.read_text().splitlines()]
    return [c for c in calls if c != ["get", "kubeconfig"]]


def _fake_cni(monkeypatch, on_apply=None, on_workloads=None):
    """The CNI's install steps stood in for: ``on_apply(api)`` is called by its ``prepare``,
    ``on_workloads(api, installing)`` by its ``apply_workloads``."""
    from netslo.providers.cni.install import Installing

    def prepare(api, spec, api_endpoint=None, **kw):
        if on_apply:
            on_apply(api)
        return Installing(spec, {"cni": "calico", "cni_version": "v3.31.3"}, api_endpoint=api_endpoint)

    def apply_workloads(api, installing, *a, **kw):
        if on_workloads:
            on_workloads(api, installing)
        installing.applied = True
    monkeypatch.setattr(kind_mod, "prepare", prepare)
    monkeypatch.setattr(kind_mod, "apply_workloads", apply_workloads)
    for name in ("await_datapath", "apply_staged", "await_staged"):
        monkeypatch.setattr(kind_mod, name, lambda *a, **kw: None)


def _fake_kind(tmp_path, create_rc=0, create_sleep=0, kubeconfig=""):
    """A kind stand-in that logs its argv; "get clusters" lists nothing, "create" may fail or hang,
    "get kubeconfig" prints ``kubeconfig``."""
    log = tmp_path / "kind.log"
    script = tmp_path / "kind"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$1 $2" in
  "get clusters") exit 0 ;;
  "get kubeconfig") printf '%s' "{kubeconfig}"; exit 0 ;;
  "create cluster") sleep {create_sleep}; [ {create_rc} = 0 ] && echo "create done" >> {log}; exit {create_rc} ;;
  *) exit 0 ;;
esac
""")
    script.chmod(0o755)
    return str(script), log


@pytest.mark.parametrize("rc,sleep,timeout", [(1, 0, 30), (0, 5, 0.5)], ids=["create fails", "create times out"])
def test_kind_create_that_fails_or_times_out_deletes_the_half_made_cluster(tmp_path, monkeypatch, rc, sleep, timeout):
    """Also the kubeconfig bring-up read while the create ran goes (a Ctrl-C during the create left it
    behind, and with it the work directory)."""
    kind, log = _fake_kind(tmp_path, create_rc=rc, create_sleep=sleep, kubeconfig="apiVersion: v1")
    monkeypatch.setattr(_EarlyApi, "ready_now", False)
    monkeypatch.setattr(kind_mod, "KubeApi", _EarlyApi)
    p = KindProvider(cni="calico", kind=kind, workdir=str(tmp_path / "w"), timeout=timeout)
    with pytest.raises(InfrastructureError, match="kind create cluster"):
        p.up()
    assert _calls(log) == [["get", "clusters"], ["create", "cluster"], ["delete", "cluster"]]
    assert not (tmp_path / "w").exists()    # its kind config and kubeconfig went with the cluster


def test_kind_up_returns_its_cluster_once_kind_and_the_cni_succeed(tmp_path, monkeypatch):
    """The step after a successful create + CNI install: the cluster object (a real run failed here with
    "KindCluster.__init__() got multiple values for argument 'provider'")."""
    kind, log = _fake_kind(tmp_path)
    _fake_cni(monkeypatch)
    monkeypatch.setattr(kind_mod, "KubeApi", lambda *a, **kw: object())
    monkeypatch.setattr(kind_mod.KubeCluster, "open", lambda self, timeout: self)
    p = KindProvider(cni="calico", kind=kind, workdir=str(tmp_path / "w"), run_id="r1")
    c = p.up()
    assert isinstance(c, kind_mod.KindCluster) and c._kind is p
    assert (c.provider, c.pull_policy, c.run_id) == ("kind", "Never", "r1")
    assert _calls(log) == [["get", "clusters"], ["create", "cluster"], ["create", "done"], ["load", "docker-image"]]


@pytest.mark.parametrize("runtimes", [True, False], ids=["nodes' containerd answers", "never answers"])
def test_kind_loads_the_agent_image_while_create_still_runs_once_the_nodes_runtime_answers(
        tmp_path, monkeypatch, runtimes):
    kind, log = _fake_kind(tmp_path, create_sleep=2)
    asked = []
    monkeypatch.setattr(kind_mod.kind_host, "runtimes_up", lambda name, nodes: asked.append((name, nodes)) or runtimes)
    _fake_cni(monkeypatch)
    monkeypatch.setattr(kind_mod, "KubeApi", lambda *a, **kw: object())
    monkeypatch.setattr(kind_mod.KubeCluster, "open", lambda self, timeout: self)
    KindProvider(cni="calico", nodes=2, kind=kind, workdir=str(tmp_path / "w")).up()
    calls = _calls(log)
    assert asked and asked[0] == ("netslo", 2)
    # the fake writes "create done" when its 2 s create ends (the load may even log before the create)
    assert sorted(calls) == sorted([["get", "clusters"], ["create", "cluster"], ["create", "done"],
                                    ["load", "docker-image"]])
    assert (calls.index(["load", "docker-image"]) < calls.index(["create", "done"])) == runtimes
    assert runtimes or len(asked) >= 2     # asked again and again while create ran


class _EarlyApi:
    """The new cluster's API as bring-up sees it while kind create runs."""
    ready_now = True
    endpoint_now = True

    def __init__(self, kubeconfig):
        self.kubeconfig = kubeconfig

    def ready(self):
        return self.ready_now

    def get(self, kind, name=None, namespace=None, selector=None, missing_ok=False):
        if kind == "endpointslice":   # the API server's own address, as kube-apiserver lists it
            return [{"addressType": "IPv4", "endpoints": [{"addresses": ["198.19.200.3"]}],
                     "ports": [{"name": "https", "port": 6443}]}] if self.endpoint_now else []
        return {"metadata": {"name": name}}

    server_endpoint = KubeApi.server_endpoint   # the real reading of what get() returns


@pytest.mark.parametrize("api_ready,apply_fails,endpoint", [(True, False, True), (False, False, True),
                                                             (True, True, True), (True, False, False)],
                         ids=["API ready during create", "API never ready before create ends", "early apply fails",
                              "no API server address yet"])
def test_kind_applies_the_cni_configuration_while_create_still_runs_once_the_api_server_is_ready(
        tmp_path, monkeypatch, api_ready, apply_fails, endpoint):
    """The CNI's configuration goes in beside kind create, on kind's own kubeconfig read from the
    control plane, as soon as the API server is ready; otherwise (or when that fails: said) after
    the create. Its agents go in with it when they can be given the API server's own address (from
    its EndpointSlice), else after the create."""
    kind, log = _fake_kind(tmp_path, create_sleep=2, kubeconfig="apiVersion: v1")
    monkeypatch.setattr(kind_mod.kind_host, "runtimes_up", lambda name, nodes: True)
    monkeypatch.setattr(_EarlyApi, "ready_now", api_ready)
    monkeypatch.setattr(_EarlyApi, "endpoint_now", endpoint)
    monkeypatch.setattr(kind_mod, "KubeApi", _EarlyApi)
    applies, agents = [], []

    def on_workloads(api, installing):
        agents.append((api, installing.api_endpoint))
        with open(log, "a") as f:
            f.write("agents applied\n")

    def on_apply(api):
        applies.append(api)
        with open(log, "a") as f:
            f.write("cni applied\n")
        if apply_fails and len(applies) == 1:
            raise InfrastructureError("apply CRD: 503 the server is currently unable to handle the request")
    _fake_cni(monkeypatch, on_apply, on_workloads)
    monkeypatch.setattr(kind_mod, "KubeApi",   # the early kubeconfig's API, else the final one's
                        lambda path, *a: _EarlyApi(path) if path.endswith(kind_mod.EARLY_KUBECONFIG) else "final api")
    monkeypatch.setattr(kind_mod.KubeCluster, "open", lambda self, timeout: self)
    notes = []
    monkeypatch.setattr(kind_mod.progress, "note", notes.append)
    p = KindProvider(cni="calico", nodes=2, kind=kind, workdir=str(tmp_path / "w"))
    p.up()
    calls = _calls(log)
    early = api_ready and not apply_fails
    assert calls.count(["cni", "applied"]) == (2 if apply_fails else 1)
    assert (calls.index(["cni", "applied"]) < calls.index(["create", "done"])) == api_ready
    assert ["get", "kubeconfig"] in [line.split()[:2] for line in log.read_text().splitlines()]
    assert isinstance(applies[0], _EarlyApi) == api_ready and (applies[-1] == "final api") == (not early)
    if api_ready:
        assert applies[0].kubeconfig == str(tmp_path / "w" / kind_mod.EARLY_KUBECONFIG)
    assert not (tmp_path / "w" / kind_mod.EARLY_KUBECONFIG).exists()
    assert any("configuration beside kind create failed" in n and "503" in n for n in notes) == apply_fails
    assert len(agents) == 1
    agents_early = early and endpoint
    assert (calls.index(["agents", "applied"]) < calls.index(["create", "done"])) == agents_early
    assert agents[0] == ((applies[0], ("198.19.200.3", 6443)) if agents_early else ("final api", None))


def test_kind_create_that_fails_before_the_nodes_answer_never_loads_the_image(tmp_path, monkeypatch):
    kind, log = _fake_kind(tmp_path, create_rc=1)
    monkeypatch.setattr(kind_mod.kind_host, "runtimes_up", lambda name, nodes: False)
    with pytest.raises(InfrastructureError, match="kind create cluster"):
        KindProvider(cni="calico", kind=kind, workdir=str(tmp_path / "w")).up()
    assert _calls(log) == [["get", "clusters"], ["create", "cluster"], ["delete", "cluster"]]


def test_minikube_up_returns_its_cluster(tmp_path, monkeypatch):
    """Same keyword clash as kind's: MinikubeCluster(owner, api, provider="minikube", ...)."""
    p = MinikubeProvider(cni="calico", nodes=2, profile="netslo", workdir=str(tmp_path))
    monkeypatch.setattr(p, "exists", lambda: True)
    monkeypatch.setattr(p, "plan", lambda exists: [["minikube", "status"]])
    monkeypatch.setattr(mk_mod, "KubeApi", lambda *a, **kw: object())
    monkeypatch.setattr(mk_mod.KubeCluster, "open", lambda self, timeout: self)
    c = p.up()
    assert isinstance(c, mk_mod.MinikubeCluster) and c._mk is p and c.provider == "minikube"


class _FakeKubectl:
    def __init__(self, labels, daemonsets):
        self.labels, self.daemonsets = labels, daemonsets

    def get(self, kind, name=None, namespace=None, missing_ok=False):
        if kind == "nodes":
            return [{"metadata": {"name": f"n{i}", "labels": self.labels}} for i in range(2)]
        image = self.daemonsets.get(name)
        return None if image is None else {"spec": {"template": {"spec": {"containers": [{"image": image}]}}}}


def test_kind_kept_cluster_reports_the_installed_cni_and_refuses_another(tmp_path):
    p = KindProvider(cni="calico", keep_cluster=True, workdir=str(tmp_path))
    info = p.installed_cni(_FakeKubectl({"netslo.io/cni": "calico"}, {"calico-node": "docker.io/calico/node:v3.28.5"}))
    assert (info["cni"], info["cni_version"]) == ("calico", "v3.28.5")
    with pytest.raises(InfrastructureError, match="runs CNI cilium, not the requested calico"):
        p.installed_cni(_FakeKubectl({"netslo.io/cni": "cilium"}, {"cilium": "quay.io/cilium/cilium:v1.18.6"}))
    with pytest.raises(InfrastructureError, match="runs no CNI netslo knows"):
        p.installed_cni(_FakeKubectl({}, {}))


def test_minikube_commands_would_start_with_bundled_calico(tmp_path, monkeypatch):
    monkeypatch.setattr(mk_mod.os, "geteuid", lambda: 1000)   # as root minikube also needs --force
    p = MinikubeProvider(cni="calico", nodes=2, profile="netslo", workdir=str(tmp_path))
    assert p.plan(exists=False) == [
        ["minikube", "status", "-p", "netslo", "-o", "json"],
        ["minikube", "start", "-p", "netslo", "--driver=docker", "--nodes=2",
         f"--kubernetes-version={mk_mod.MINIKUBE_K8S_VERSION}", "--container-runtime=containerd",
         "--cni=calico", "--extra-config=kubeadm.pod-network-cidr=192.168.0.0/16",
         "--service-cluster-ip-range=10.96.0.0/12", "--wait=apiserver,system_pods,node_ready",
         "--wait-timeout=900s"],
        ["minikube", "image", "load", km.DEFAULT_IMAGE, "-p", "netslo"],
    ]
    assert p.delete_command() == ["minikube", "delete", "-p", "netslo"]


def test_minikube_as_root_would_force(tmp_path, monkeypatch):
    """minikube refuses the docker driver as root ("should not be used with root privileges") without it."""
    monkeypatch.setattr(mk_mod.os, "geteuid", lambda: 0)
    assert MinikubeProvider(workdir=str(tmp_path)).start_command()[-1] == "--force"


@pytest.mark.parametrize("image,asks", [
    (KIND_NODE_IMAGE, True), ("localhost/netslo-kind-node:v1.37.0", True), ("kindest/node:v1.35.1", True),
    ("localhost/netslo-kind-node:v1.34.4", False), ("kindest/node:v1.34.11@sha256:" + "4" * 64, False),
    ("localhost/my-node:latest", True)])
def test_kind_asks_the_engine_only_for_a_kubelet_that_may_refuse_cgroup_v1(image, asks):
    assert kind_mod.refuses_cgroup_v1(image) is asks


def test_minikube_tells_kubelet_to_run_on_a_cgroup_v1_engine_only_there(tmp_path):
    p = MinikubeProvider(workdir=str(tmp_path))
    flag = "--extra-config=kubelet.fail-cgroupv1=false"
    assert flag not in p.start_command()
    p.cgroup_v1 = True
    assert flag in p.start_command()


def test_minikube_without_a_registry_would_pull_nothing_and_install_the_cni_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(mk_mod.os, "geteuid", lambda: 1000)
    monkeypatch.setenv(mk_mod.MINIKUBE_ENV, "/opt/mk/minikube")
    monkeypatch.setenv(mk_mod.BASE_IMAGE_ENV, "localhost/netslo-minikube-base:v1.37.0")
    monkeypatch.setenv(mk_mod.KUBERNETES_VERSION_ENV, "v1.37.0")
    monkeypatch.setenv(mk_mod.NETWORK_ENV, "netslo-minikube")
    p = MinikubeProvider(cni="calico", nodes=2, profile="netslo", workdir=str(tmp_path))
    assert p.installs_cni
    assert p.start_command() == [
        "/opt/mk/minikube", "start", "-p", "netslo", "--driver=docker", "--nodes=2",
        "--kubernetes-version=v1.37.0", "--container-runtime=containerd", "--cni=false",
        "--extra-config=kubeadm.pod-network-cidr=192.168.0.0/16", "--service-cluster-ip-range=10.96.0.0/12",
        "--wait=apiserver", "--wait-timeout=900s",
        "--base-image=localhost/netslo-minikube-base:v1.37.0", "--preload=false", "--cache-images=false",
        "--install-addons=false", "--network=netslo-minikube", "--force"]
    p.write_cni_manifest()                    # nothing for minikube to apply: netslo installs it
    assert not any(tmp_path.iterdir())


def test_minikube_without_a_registry_installs_the_cni_between_start_and_image_load(tmp_path, monkeypatch):
    monkeypatch.setenv(mk_mod.BASE_IMAGE_ENV, "localhost/netslo-minikube-base:v1.37.0")
    p = MinikubeProvider(cni="calico", nodes=1, profile="mk", minikube="/opt/mk/minikube", workdir=str(tmp_path))
    steps = []
    monkeypatch.setattr(p, "exists", lambda: False)
    monkeypatch.setattr(p, "_run", lambda argv, timeout, check=True: steps.append(argv[1]))
    monkeypatch.setattr(mk_mod, "KubeApi", lambda *a, **kw: ("api", kw.get("context")))

    def fake_install(api, spec, **kw):
        steps.append(("cni", api, spec.name, kw["encapsulation"], kw["pod_subnet"]))
        return {"cni": "calico", "cni_version": "v3.31.3", "encapsulation": "vxlan", "cni_sha256": "ab" * 32,
                "cni_source": "/mirror/calico/v3.31.3/calico.yaml"}
    monkeypatch.setattr(mk_mod, "install_cni", fake_install)
    monkeypatch.setattr(mk_mod.KubeCluster, "open", lambda self, timeout: self)
    monkeypatch.setattr(mk_mod.KubeCluster, "environment", lambda self: {"provider": "minikube"})
    c = p.up()
    assert steps == ["start", ("cni", ("api", "mk"), "calico", "vxlan", "192.168.0.0/16"), "image"]
    env = c.environment()
    assert (env["cni"], env["cni_version"], env["encapsulation"]) == ("calico", "v3.31.3", "vxlan")
    assert env["minikube_base_image"] == "localhost/netslo-minikube-base:v1.37.0"
    assert env["cni_source"] == "/mirror/calico/v3.31.3/calico.yaml"


def test_minikube_commands_would_pass_the_pinned_antrea_manifest_as_a_file(tmp_path):
    p = MinikubeProvider(cni="antrea", nodes=1, profile="mk", driver="kvm2", workdir=str(tmp_path))
    start = p.start_command()
    assert f"--cni={tmp_path}/antrea-v2.4.3.yaml" in start
    assert "--driver=kvm2" in start and "--nodes=1" in start


def test_minikube_commands_would_reuse_a_kept_profile(tmp_path):
    p = MinikubeProvider(cni="cilium", keep_cluster=True, workdir=str(tmp_path))
    plan = p.plan(exists=True)
    assert [a[1] for a in plan] == ["status", "image"]


def test_minikube_bad_driver(tmp_path):
    with pytest.raises(SpecError, match="minikube driver: value 'virtualbox'"):
        MinikubeProvider(driver="virtualbox", workdir=str(tmp_path))


@pytest.mark.parametrize("cni", ["calico", "cilium", "antrea"])
def test_committed_kind_configs_match_what_the_provider_writes(cni, monkeypatch):
    monkeypatch.delenv("NETSLO_AGENT_ARCHIVE", raising=False)   # (its bind mount is the run's, not committed)
    from pathlib import Path
    committed = (Path(__file__).resolve().parents[2] / "netslo" / "providers" / "kind" / f"kind-{cni}.yaml").read_text()
    written = KindProvider(cni=cni, nodes=2, workdir="/nonexistent").config_yaml()
    assert yaml.safe_load(committed) == yaml.safe_load(written)


def _owner_dir(tmp_path, monkeypatch):
    from netslo.providers.kube import reap as kube_reap
    d = tmp_path / "owners"
    monkeypatch.setattr(kube_reap, "kind_owner_dir", lambda: d)
    return d


def test_kind_cluster_carries_an_owner_record_while_it_lives(tmp_path, monkeypatch):
    """Written before ``kind create`` (a killed run leaves it for the next run's reap), removed once
    the cluster is deleted."""
    owners = _owner_dir(tmp_path, monkeypatch)
    kind, log = _fake_kind(tmp_path)
    seen = {}

    _fake_cni(monkeypatch, on_apply=lambda api: seen.setdefault("record", json.loads((owners / "netslo.json").read_text())))
    monkeypatch.setattr(kind_mod, "KubeApi", lambda *a, **kw: object())
    monkeypatch.setattr(kind_mod.KubeCluster, "open", lambda self, timeout: self)
    p = KindProvider(cni="calico", kind=kind, workdir=str(tmp_path / "w"), run_id="r1")
    p.up()
    assert seen["record"]["cluster"] == "netslo" and seen["record"]["pid"] == str(os.getpid())
    p.teardown()
    assert not (owners / "netslo.json").exists()
    assert _calls(log)[-1] == ["delete", "cluster"]


def test_kind_up_deletes_the_cluster_a_killed_run_left(tmp_path, monkeypatch):
    owners = _owner_dir(tmp_path, monkeypatch)
    owners.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    from netslo.providers.kube.reap import owner_record
    (owners / "old.json").write_text(json.dumps({"cluster": "old", **owner_record(dead.pid)}))
    log = tmp_path / "kind.log"
    kind = tmp_path / "kind"
    kind.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$1 $2" in
  "get clusters") echo old ;;
  "create cluster") exit 1 ;;
esac
""")
    kind.chmod(0o755)
    p = KindProvider(cni="calico", kind=str(kind), workdir=str(tmp_path / "w"))
    with pytest.raises(InfrastructureError):
        p.up()                                   # its own create fails; the reap came first
    calls = [line.split()[:4] for line in log.read_text().splitlines()]
    assert ["delete", "cluster", "--name", "old"] in calls and not (owners / "old.json").exists()


def test_deferred_bring_up_waits_run_once_in_order_and_the_first_error_ends_settle():
    """What bring-up leaves for later (kind: the CNI's staged workloads) is awaited by ``settle``
    (``add_pods`` calls it once the run's pods are made); an error is the caller's, the rest stays."""
    c = kind_mod.KubeCluster(object(), run_id="r1")
    seen = []

    def broken():
        raise InfrastructureError("CNI calico: Deployment kube-system/calico-kube-controllers: not ready after 5s")
    c.defer("a", lambda: seen.append("a"))
    c.defer("b", broken)
    c.defer("c", lambda: seen.append("c"))
    with pytest.raises(InfrastructureError, match="calico-kube-controllers"):
        c.settle()
    assert seen == ["a"]
    c.settle()
    c.settle()
    assert seen == ["a", "c"]


@pytest.mark.parametrize("cni_name,encapsulation,made", [("cilium", "vxlan", True), ("cilium", "geneve", False),
                                                          ("cilium", "none", False), ("calico", "vxlan", False)])
def test_cilium_in_vxlan_mode_gets_its_tunnel_device_on_every_node_before_its_agents(
        monkeypatch, tmp_path, cni_name, encapsulation, made):
    from netslo.providers import cni
    from netslo.providers.cni.install import Installing
    made_on = []
    monkeypatch.setattr(kind_mod.kind_host, "node_netns", lambda node: f"/proc/{node}/ns/net")
    monkeypatch.setattr(kind_mod.kind_host, "add_external_vxlan",
                        lambda netns, name, port: made_on.append((netns, name, port)) or True)
    p = KindProvider(cni=cni_name, nodes=3, workdir=str(tmp_path))
    p._cilium_tunnel_first(Installing(cni.load(cni_name), {"encapsulation": encapsulation}))
    assert made_on == ([(f"/proc/netslo-{n}/ns/net", "cilium_vxlan", 8472)
                        for n in ("control-plane", "worker", "worker2")] if made else [])


@pytest.mark.parametrize("encapsulation", ["none", "ipip"])
def test_calico_without_vxlan_is_refused_on_the_offline_node_image(tmp_path, encapsulation):
    """Its Calico has no BIRD: calico-node would wait for one until the bring-up's timeout."""
    image = kind_mod.OFFLINE_NODE_IMAGE + "v1.34.4"
    with pytest.raises(SpecError, match=f"encapsulation: value '{encapsulation}' — expected vxlan with the offline"):
        KindProvider(cni="calico", encapsulation=encapsulation, node_image=image, workdir=str(tmp_path))
    assert KindProvider(cni="calico", encapsulation="vxlan", node_image=image, workdir=str(tmp_path))
    assert KindProvider(cni="calico", encapsulation=encapsulation, node_image=KIND_NODE_IMAGE,   # upstream's
                        workdir=str(tmp_path))
