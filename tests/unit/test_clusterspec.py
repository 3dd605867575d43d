"""Cluster specs of a comparison: kind and existing sides, one line per bad field, and A and B that
would be one cluster refused before anything is made."""

from __future__ import annotations

import pytest

from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers import clusterspec as cs

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: staging-a
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {}}]
contexts:
- {name: staging-a, context: {cluster: c, user: u}}
- {name: staging-b, context: {cluster: c, user: u}}
"""


def _err(text: str, option: str = "--b") -> str:
    with pytest.raises(SpecError) as e:
        cs.load(text, option)
    line = str(e.value)
    assert "\n" not in line
    return line


def test_a_kind_spec_takes_the_cni_its_encapsulation_and_a_manifests_directory(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "10-felix.yaml").write_text("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n---\n")
    spec = cs.load(f"provider=kind,cni=cilium,nodes=3,manifests={tmp_path / 'm'},rules=1000", "--b")
    assert (spec.provider, spec.datapath, spec.nodes, spec.rules) == ("kind", "cilium", 3, 1000)
    assert spec.encapsulation == "vxlan" and spec.manifests == str(tmp_path / "m")
    assert [p.name for p in cs.manifest_files(spec.manifests)] == ["10-felix.yaml"]
    assert "kind/cilium (vxlan), 3 nodes" in spec.describe() and not spec.keep
    assert cs.load("provider=kind,keep=true", "--a").keep


def test_a_spec_files_manifests_directory_is_relative_to_the_file(tmp_path):
    (tmp_path / "net" / "policies").mkdir(parents=True)
    (tmp_path / "net" / "policies" / "deny.yml").write_text("kind: NetworkPolicy\n")
    (tmp_path / "net" / "cluster.yaml").write_text("provider: kind\ncni: calico\nmanifests: policies\n")
    spec = cs.load(str(tmp_path / "net" / "cluster.yaml"), "--a")
    assert spec.manifests == str(tmp_path / "net" / "policies") and spec.source == str(tmp_path / "net" / "cluster.yaml")


@pytest.mark.parametrize("text, expected", [
    ("provider=kind,cni=flannel", "--b: cni: value 'flannel' — expected one of calico, cilium, antrea"),
    ("provider=kind,cni=calico,encapsulation=geneve", "--b: encapsulation: value 'geneve' — expected one of "),
    ("provider=kind,manifests=/nonexistent/netslo", "--b: manifests: value '/nonexistent/netslo' — expected a directory"),
    ("provider=kind,nodes=9", "--b: nodes: value '9' — expected a whole number 2..8"),
    ("provider=kind,name=Bad_Name", "--b: name: value 'Bad_Name' — expected a kind cluster name"),
    ("provider=kind,keep=maybe", "--b: keep: value 'maybe' — expected true or false"),
    ("provider=kind,datapath=routed", "--b: datapath: value 'routed' — expected one of the keys of a kind spec"),
    ("provider=minikube", "--b: provider: value 'minikube' — expected one of netns, kind, existing"),
    ("provider=netns,sysctl=x", "--b: sysctl: value 'x' — expected one of the keys of a netns spec: provider, "
                                "datapath, nodes, rules, mtu, sysctls, kernel, netem"),
    ("sysctl.kernel.pid_max=10", "--b: sysctls.kernel.pid_max: value '10' — expected a network sysctl (net.*)"),
    ("sysctl.net.core.busy_read=$(id)", "--b: sysctls.net.core.busy_read: value '$(id)' — expected a value of "),
    ("kernel=xen", "--b: kernel: value 'xen' — expected host (this machine's) or uml"),
    ("kernel=uml,rules=10", "--b: rules: value '10' — expected not set with kernel: uml"),
    ("provider=netns,mtu=1600", "--b: mtu: value '1600' — expected a whole number 1280..1500"),
    ("datapath=vxlan,mtu=1500", "--b: mtu: value '1500' — expected a whole number 1280..1450"),
    ("mtu=1450.0", "--b: mtu: value '1450.0' — expected a whole number 1280..1500"),
    ("provider=existing,kubeconfig=/nonexistent/kubeconfig", "--b: kubeconfig: value '/nonexistent/kubeconfig' — "
                                                             "expected an existing kubeconfig file"),
])
def test_a_bad_field_is_one_line_naming_it(text, expected):
    assert _err(text).startswith(expected)


def test_a_netns_spec_takes_the_pods_mtu():
    spec = cs.load("datapath=routed,mtu=1450", "--b")
    assert (spec.datapath, spec.mtu) == ("routed", 1450) and "MTU 1450" in spec.describe()
    assert cs.load("datapath=vxlan", "--a").mtu == 0      # the datapath's own (1450)


def test_a_netns_spec_takes_sysctls_a_kernel_and_netem_inline_or_in_a_file(tmp_path):
    inline = cs.load("kernel=uml,sysctl.net.ipv4.tcp_low_latency=1,netem.delay=100us,netem.jitter=10us", "--b")
    assert inline.kernel == "uml" and inline.sysctls == (("net.ipv4.tcp_low_latency", "1"),)
    assert dict(inline.netem) == {"delay": "100us", "jitter": "10us"}
    assert "user-mode-linux kernel, net.ipv4.tcp_low_latency=1, netem delay 100us jitter 10us" in inline.describe()
    (tmp_path / "b.yaml").write_text("kernel: uml\nsysctls: {net.ipv4.tcp_low_latency: 1}\n"
                                     "netem: {delay: 100us, jitter: 10us}\n")
    from_file = cs.load(str(tmp_path / "b.yaml"), "--b")
    assert (from_file.kernel, from_file.sysctls, dict(from_file.netem)) == (inline.kernel, inline.sysctls, dict(inline.netem))
    assert cs.load("datapath=bridge", "--a").kernel == "host"


@pytest.mark.parametrize("text, expected", [
    ("netem.delay=100", "--b: netem.delay: value '100' — expected"),
    ("netem.dealy=1ms", "--b: netem.dealy: value '1ms' — expected a known key: one of preset, name, direction, delay"),
])
def test_a_bad_netem_is_refused_before_a_side_is_brought_up(text, expected, monkeypatch):
    from netslo.studies import compare
    spec = cs.load(text, "--b")
    monkeypatch.setattr(cs.ClusterSpec, "up", lambda *a, **k: pytest.fail("brought up"))
    with pytest.raises(SpecError) as e:
        compare.check(spec)
    assert str(e.value).startswith(expected) and "\n" not in str(e.value)


def test_an_empty_manifests_directory_is_refused(tmp_path):
    assert _err(f"provider=kind,manifests={tmp_path}").startswith(
        f"--b: manifests: value '{tmp_path}' — expected a directory holding at least one *.yaml")


def test_an_existing_spec_names_a_context_of_its_kubeconfig(tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text(KUBECONFIG)
    spec = cs.load(f"provider=existing,kubeconfig={kc},context=staging-b,select=netslo.io/pool=b", "--b")
    assert (spec.context, spec.select) == ("staging-b", "netslo.io/pool=b")
    assert _err(f"provider=existing,kubeconfig={kc},context=prod") == (
        "--b: context: value 'prod' — expected a context of the kubeconfig (staging-a, staging-b)")
    assert _err(f"provider=existing,kubeconfig={kc},select=pool").startswith("--b: select: value 'pool' — expected")


def test_the_same_cluster_as_a_and_b_is_refused_and_two_netns_specs_alike_are_an_a_a(tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text(KUBECONFIG)
    a, b = cs.check_pair(cs.load("provider=kind", "--a"), cs.load("provider=kind", "--b"))
    assert (a.name, b.name) == ("netslo-a", "netslo-b")
    for text in ("provider=kind,name=staging", f"provider=existing,kubeconfig={kc},context=staging-a"):
        with pytest.raises(SpecError) as e:
            cs.check_pair(cs.load(text, "--a"), cs.load(text, "--b"), "--b", text)
        assert str(e.value).startswith(f"--b: value {text!r} — expected another cluster than A")
        assert str(e.value).endswith("the same cluster given as both A and B")
    pools = [cs.load(f"provider=existing,kubeconfig={kc},context=staging-a,select=pool={p}", f"--{p}") for p in "ab"]
    assert cs.check_pair(*pools)        # two node pools of one cluster
    netns = cs.load("datapath=bridge", "--a")
    assert cs.check_pair(netns, cs.load("datapath=bridge", "--b"))


class _Nodes:
    """The two members of a cluster that node selection reads (a stand-in: no cluster needed)."""

    nodes = ["n0", "n1", "n2", "n3"]

    def node_labels(self, node):
        return {"netslo.io/pool": "a" if node in ("n0", "n2") else "b"}


def test_select_picks_the_pool_and_fewer_than_two_nodes_is_an_infrastructure_error(tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text(KUBECONFIG)
    spec = cs.load(f"provider=existing,kubeconfig={kc},select=netslo.io/pool=b", "--b")
    assert spec.measured_nodes(_Nodes()) == ["n1", "n3"]
    one = cs.load(f"provider=existing,kubeconfig={kc},select=netslo.io/pool=c", "--b")
    with pytest.raises(InfrastructureError, match="0 node.s. match netslo.io/pool=c; a comparison needs 2"):
        one.measured_nodes(_Nodes())


def test_an_encapsulation_the_offline_node_image_cannot_run_is_refused_before_a_side_is_brought_up(monkeypatch):
    from pathlib import Path

    import netslo.gate
    from netslo.slo.spec import load as load_slo
    from netslo.studies import compare
    monkeypatch.setenv("NETSLO_KIND_NODE_IMAGE", "localhost/netslo-kind-node:v1.34.4")
    monkeypatch.delenv("NETSLO_AGENT_ARCHIVE", raising=False)
    monkeypatch.setattr(compare, "bring_up", lambda *a: pytest.fail("a side was brought up"))
    slo = load_slo(Path(netslo.gate.__file__).parent / "slo.yaml")
    with pytest.raises(SpecError, match="^encapsulation: value 'none' — expected vxlan with the offline node image"):
        compare.run(cs.load("provider=kind,cni=calico", "--a"),
                    cs.load("provider=kind,cni=calico,encapsulation=none", "--b"), slo)


def test_netem_on_a_kernel_without_sch_netem_is_refused_naming_kernel_uml(monkeypatch):
    from netslo.impair import capability
    from netslo.studies import compare
    monkeypatch.setattr(capability, "detect", lambda: capability.Capabilities("6.18-test", reasons={"netem": "no sch_netem"}))
    with pytest.raises(SpecError) as e:
        compare.check(cs.load("netem.delay=1ms", "--b"))
    assert str(e.value) == ("--b: netem: value 'delay 1ms' — expected a kernel with sch_netem: this one (6.18-test) "
                            "has none (no sch_netem); kernel: uml runs the side in one that has it")
    compare.check(cs.load("kernel=uml,netem.delay=1ms", "--b"))     # the guest kernel has it: not refused here
    monkeypatch.setattr(capability, "detect", lambda: capability.Capabilities("6.18-test", netem=True))
    compare.check(cs.load("netem.delay=1ms", "--b"))
