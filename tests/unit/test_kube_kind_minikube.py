"""kind and minikube providers: the configs they write and the exact commands they would run.

kind and minikube cannot start on this machine (their node images come from a registry), so these
tests check what would run, not a running cluster; the code that runs after the cluster exists is
the KubeCluster the integration tests exercise against a real cluster.
"""

import yaml
import pytest

from netslo.errors import InfrastructureError, SpecError
from netslo.providers import kind as kind_mod
from netslo.providers import minikube as mk_mod
from netslo.providers.kind import KIND_NODE_IMAGE, KindProvider
from netslo.providers.minikube import MinikubeProvider


@pytest.fixture
def kind_calico(tmp_path):
    return KindProvider(cni="calico", nodes=2, name="netslo", workdir=str(tmp_path))


def test_kind_config_would_have_n_workers_no_default_cni_and_cni_subnets(kind_calico):
    cfg = yaml.safe_load(kind_calico.config_yaml())
    assert cfg["kind"] == "Cluster" and cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert cfg["networking"] == {"disableDefaultCNI": True, "podSubnet": "192.168.0.0/16",
                                 "serviceSubnet": "10.96.0.0/12", "kubeProxyMode": "iptables"}
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane", "worker", "worker"]
    assert all(n["image"] == KIND_NODE_IMAGE for n in cfg["nodes"])
    assert all(n["labels"] == {"netslo.io/cni": "calico"} for n in cfg["nodes"])


@pytest.mark.parametrize("cni,subnet", [("cilium", "10.244.0.0/16"), ("antrea", "10.244.0.0/16")])
def test_kind_config_would_use_each_cnis_pod_subnet(tmp_path, cni, subnet):
    cfg = KindProvider(cni=cni, nodes=1, workdir=str(tmp_path)).config()
    assert cfg["networking"]["podSubnet"] == subnet
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane"]  # one node: the untainted control plane


def test_kind_node_image_is_pinned_by_digest():
    assert KIND_NODE_IMAGE.startswith("kindest/node:v1.34.")
    assert len(KIND_NODE_IMAGE.split("@sha256:")[1]) == 64
    assert kind_mod.KIND_VERSION == "v0.33.0"


def test_kind_commands_would_run_create_then_load(kind_calico, tmp_path):
    cfg, kc = str(tmp_path / "kind-config.yaml"), str(tmp_path / "kubeconfig")
    assert kind_calico.plan(exists=False) == [
        ["kind", "get", "clusters"],
        ["kind", "create", "cluster", "--name", "netslo", "--config", cfg, "--image", KIND_NODE_IMAGE,
         "--kubeconfig", kc, "--wait", "0s"],
        ["kind", "load", "docker-image", "localhost/netslo-agent:dev", "--name", "netslo"],
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


@pytest.mark.parametrize("kw,msg", [({"nodes": 0}, "--nodes: value 0"), ({"nodes": 9}, "--nodes: value 9"),
                                    ({"cni": "flannel"}, "--cni: value 'flannel'"),
                                    ({"name": "Net_SLO"}, "kind cluster name: value 'Net_SLO'"),
                                    ({"cni": "calico", "encapsulation": "geneve"},
                                     "calico encapsulation: value 'geneve'")])
def test_kind_bad_options_are_one_line_spec_errors(tmp_path, kw, msg):
    with pytest.raises(SpecError, match=msg):
        KindProvider(workdir=str(tmp_path), **kw)


def test_kind_without_the_binary_is_unsupported(tmp_path):
    from netslo.errors import Unsupported
    with pytest.raises(Unsupported, match="kind not found"):
        KindProvider(kind="kind-not-installed-here", workdir=str(tmp_path)).up()


def test_minikube_commands_would_start_with_bundled_calico(tmp_path):
    p = MinikubeProvider(cni="calico", nodes=2, profile="netslo", workdir=str(tmp_path))
    assert p.plan(exists=False) == [
        ["minikube", "status", "-p", "netslo", "-o", "json"],
        ["minikube", "start", "-p", "netslo", "--driver=docker", "--nodes=2",
         f"--kubernetes-version={mk_mod.MINIKUBE_K8S_VERSION}", "--container-runtime=containerd",
         "--cni=calico", "--extra-config=kubeadm.pod-network-cidr=192.168.0.0/16",
         "--service-cluster-ip-range=10.96.0.0/12", "--wait=apiserver,system_pods,node_ready",
         "--wait-timeout=900s"],
        ["minikube", "image", "load", "localhost/netslo-agent:dev", "-p", "netslo"],
    ]
    assert p.delete_command() == ["minikube", "delete", "-p", "netslo"]


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
def test_committed_kind_configs_match_what_the_provider_writes(cni):
    from pathlib import Path
    committed = (Path(__file__).resolve().parents[2] / "manifests" / "kind" / f"kind-{cni}.yaml").read_text()
    written = KindProvider(cni=cni, nodes=2, workdir="/nonexistent").config_yaml()
    assert yaml.safe_load(committed) == yaml.safe_load(written)
