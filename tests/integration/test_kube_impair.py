"""The impairment DaemonSet on a real cluster (kube_target: the kind cluster scripts/ci-kind.sh keeps).

Real DaemonSet, real execs into it (the API's exec stream), real pod network namespaces: the DaemonSet becomes
ready with only NET_ADMIN + SYS_ADMIN + NET_RAW; the node agent finds the namespace that holds a pod's IP (and
not another pod's, nor a decoy namespace holding the same address); the capability it reports is the
node kernel's; applying netem either works and is read back, or (kernel without sch_netem, as here)
raises Unsupported naming node and kernel and leaves the pod's namespace exactly as it was; and nothing
of the run is left afterwards. Skips with the reason when no cluster answers; the checks from the
host (an independent view of what the agent did) need the nodes on this host (kind).
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.impair import capability
from netslo.impair.shaping import priority
from netslo.impair.spec import parse
from netslo.providers.kube import manifests as km
from netslo.providers.kube.impair import KubeImpairer

from . import kube_target
from .test_kube_existing import cluster, leftovers, provider  # noqa: F401  (cluster: module-scoped, leftovers checked)

pytestmark = pytest.mark.skipif(kube_target.why_not_up() is not None,
                                reason=str(kube_target.why_not_up()))
NODE_ACCESS = kube_target.why_no_node_access() is None
node_access = pytest.mark.skipif(not NODE_ACCESS, reason=str(kube_target.why_no_node_access()))


@pytest.fixture(scope="module")
def impairer(cluster):
    imp = KubeImpairer(cluster, ready_timeout=120)
    yield imp
    imp.clear()


@pytest.fixture(scope="module")
def pods(cluster):
    return [cluster.add_pod(name, cluster.nodes[0], responders=()) for name in ("imp-a", "imp-b")]


def _host_ns(node: str, netns: str, *argv: str) -> str:
    """A command in a pod namespace (a name under the node's /var/run/netns), run in the node from
    this host with the node's own tools: an independent view of what the agent did."""
    return kube_target.node_exec(node, "ip", "netns", "exec", netns, *argv)


def test_daemonset_becomes_ready_on_every_node_with_two_capabilities(cluster, impairer):
    t0 = time.monotonic()
    agents = impairer.ensure()
    assert sorted(agents) == sorted(cluster.nodes), agents
    print(f"impairment DaemonSet ready after {time.monotonic() - t0:.1f} s: {agents}")
    ds = cluster.api.get("daemonset", km.IMPAIR_NAME, cluster.namespace)
    assert ds["metadata"]["labels"][km.RUN_LABEL] == cluster.run_id
    for node, name in agents.items():
        pod = cluster.api.get("pod", name, cluster.namespace)
        assert pod["spec"]["nodeName"] == node and pod["spec"]["hostNetwork"] is True
        assert pod["metadata"]["labels"][km.RUN_LABEL] == cluster.run_id
        sc = pod["spec"]["containers"][0]["securityContext"]
        assert sc["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN", "NET_RAW"]}
        assert sc.get("privileged") is False
        # what the process really holds: CapEff of the idle process = exactly NET_ADMIN (12) + NET_RAW (13) + SYS_ADMIN (21)
        status = cluster.api.exec(cluster.namespace, name, km.IMPAIR_CONTAINER,
                                      ["cat", "/proc/1/status"], timeout=30).decode()
        cap_eff = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff:")), 16)
        assert cap_eff == (1 << 12) | (1 << 13) | (1 << 21), f"CapEff {cap_eff:#x}"


def test_lookup_finds_the_netns_holding_the_pod_ip(impairer, pods):
    a, b = pods
    found_a, found_b = impairer.lookup(a), impairer.lookup(b)
    assert found_a["pod_ip"] == a.ip and found_a["ifname"] == "eth0" and found_a["node"] == a.node
    assert found_a["netns"] != found_b["netns"]
    if NODE_ACCESS:  # check from the host, not through the agent
        assert f" {a.ip}/" in _host_ns(a.node, found_a["netns"], "ip", "-o", "addr", "show", "dev", "eth0")
        assert f" {a.ip}/" not in _host_ns(b.node, found_b["netns"], "ip", "-o", "addr")
        assert f" {b.ip}/" in _host_ns(b.node, found_b["netns"], "ip", "-o", "addr", "show", "dev", "eth0")


@node_access
def test_lookup_ignores_a_decoy_namespace_with_the_same_ip(impairer, pods):
    """Another namespace on the node holding the pod's address (another tool's test namespaces may use
    the same pod CIDR): only the one whose veth peer is in the node's namespace counts."""
    a, _ = pods
    want = impairer.lookup(a)["netns"]
    decoy = f"netslo-decoy-{os.getpid()}"
    node = lambda *argv: kube_target.node_exec(a.node, *argv)  # noqa: E731
    node("ip", "netns", "add", decoy)
    try:   # a veth, but its peer is not in the node's namespace
        node("ip", "-n", decoy, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
        node("ip", "-n", decoy, "addr", "add", f"{a.ip}/24", "dev", "eth0")
        node("ip", "-n", decoy, "link", "set", "eth0", "up")
        assert impairer.lookup(a)["netns"] == want
    finally:
        subprocess.run(["docker", "exec", a.node, "ip", "netns", "delete", decoy], timeout=30)
    assert decoy not in node("ip", "netns", "list")


def test_lookup_errors_name_the_problem(cluster, impairer):
    node = cluster.nodes[0]
    with pytest.raises(InfrastructureError, match=r"no namespace under /var/run/netns holds 192\.0\.2\.77"):
        impairer.run(node, ["lookup", "--pod-ip", "192.0.2.77"])
    with pytest.raises(InfrastructureError, match=r"exit 2: --pod-ip: value 'ten\.one' — expected an IPv4"):
        impairer.run(node, ["lookup", "--pod-ip", "ten.one"])


def test_capability_is_the_node_kernels(cluster, impairer):
    node = cluster.nodes[0]
    cap = impairer.capability(node)
    node_obj = cluster.api.get("node", node)
    assert cap["node"] == node
    assert cap["kernel"] == node_obj["status"]["nodeInfo"]["kernelVersion"]
    if NODE_ACCESS and cap["kernel"] == os.uname().release:  # a kind node runs on this kernel: same answers
        host = capability.detect()
        assert (cap["netem"], cap["ifb"], cap["ingress_redirect"]) == (host.netem, host.ifb, host.ingress_redirect)
    if not cap["netem"]:
        assert "netem" in cap["reasons"]
        with pytest.raises(Unsupported, match=rf"^node {node}: kernel {cap['kernel']} has no sch_netem \("):
            impairer.require("netem")
    else:
        impairer.require("netem")
    print(f"node {node}: {cap}")


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_apply_realizes_or_is_unsupported_and_leaves_nothing(cluster, impairer, pods, direction):
    a, _ = pods
    imp = parse({"delay": "10ms", "jitter": "1ms", "loss": "1%"}).with_direction(direction)
    before = impairer.inspect(a, direction)
    assert before["held"] == {} and before["inventory"]["ifb"] is False, before
    host_before = None
    if NODE_ACCESS:
        host_before = _host_ns(a.node, before["netns"], "tc", "qdisc", "show")
    if impairer.capability(a.node)["netem"]:
        held = impairer.apply(a, imp)
        assert abs(held["delay"] - 0.010) < 1e-9 and abs(held["loss"] - 0.01) < 1e-6, held
        assert impairer.read(a, direction)["delay"] == held["delay"]
        impairer.clear()
    else:
        with pytest.raises(Unsupported, match=rf"^node {a.node}: kernel \S+ has no sch_netem"):
            impairer.apply(a, imp)
        impairer.clear()
    after = impairer.inspect(a, direction)
    assert after["held"] == {} and after["inventory"] == before["inventory"], (before, after)
    if host_before is not None:
        assert _host_ns(a.node, before["netns"], "tc", "qdisc", "show") == host_before
        assert "nslifb" not in _host_ns(a.node, before["netns"], "ip", "-o", "link")


def test_daemonset_that_never_gets_ready_is_an_error_naming_it_and_nothing_remains():
    c = provider().up()
    try:
        c.image = "localhost/netslo-does-not-exist:never"
        imp = KubeImpairer(c, ready_timeout=8)
        t0 = time.monotonic()
        with pytest.raises(InfrastructureError) as e:
            imp.ensure()
        msg = str(e.value)
        want = f"impairment DaemonSet: DaemonSet {c.namespace}/{km.IMPAIR_NAME}: not ready after 8s"
        assert msg.startswith(want), msg
        assert "ErrImageNeverPull" in msg and re.search(r"\b0/[1-9][0-9]* ready", msg), msg
        assert time.monotonic() - t0 < 30
    finally:
        c.close()
    assert leftovers(c.api, c.run_id) == []


def test_after_the_run_no_daemonset_remains():
    c = provider().up()
    try:
        KubeImpairer(c).ensure()
        assert cluster_daemonsets(c)
    finally:
        c.close()
    assert leftovers(c.api, c.run_id) == []
    assert cluster_daemonsets(c) == []


def cluster_daemonsets(c) -> list[str]:
    return [d["metadata"]["name"] for d in c.api.get("daemonsets", selector=f"{km.RUN_LABEL}={c.run_id}")]


def test_node_links_through_the_agent(cluster, impairer, pods):
    """``cluster.node_links`` (the QoS studies' interface) through the same DaemonSet: the node's
    uplink and tunnel as the node holds them, a pod's host interface found by its IP, and a
    bottleneck that is on the uplink inside the block and gone after it."""
    a = pods[0]
    links = cluster.node_links(a.node)
    assert links.uplink and links.layer in ("ip", "vxlan-inner")
    if links.layer == "vxlan-inner":
        assert links.tunnels and links.tunnel_port in (4789, 8472), (links.tunnels, links.tunnel_port)
    got = links.pod_info(a)
    assert got["host_if"] and got["pod_mtu"] <= got["link_mtu"] <= 9000
    assert links.pod_bandwidth(a) == {"ingress": None, "egress": None}
    with links.bottleneck(10e6, 0.02) as b:
        assert b.rate_bits == 10e6 and links.root_qdisc(links.uplink) == "tbf"
    assert links.root_qdisc(links.uplink) != "tbf"
    # the cluster's control traffic (the kubelet's API, the API server's port: kind's 10250 and 6443)
    # leaves beside an htb policy: class 1:2, which counts the agent's own exec streams
    assert links.control == (("sport", 10250), ("dport", 6443)), links.control
    policy = priority.flat(priority.parse_policy({"link": "20mbit", "classes": [
        {"name": "be", "default": True, "rate": "20mbit"}]}))
    api_ips = {ip for s in cluster.api.get("endpointslice", namespace="default", selector="kubernetes.io/service-name=kubernetes")
               for ep in s.get("endpoints") or [] for ip in ep.get("addresses") or []}
    with links.priority(policy) as inst:
        assert [f["flowid"] for f in inst.filters] == ["1:2", "1:2"]
        first = links.class_counters()["1:2"]
        if cluster.node_ip(a.node) not in api_ips:     # else the kubelet's streams never leave the node
            assert links.class_counters()["1:2"] > first   # the exec stream that brought the first answer
    assert links.root_qdisc(links.uplink) != "htb"


def test_a_helper_runs_detached_in_the_pods_namespace_until_stopped_and_reports(cluster, pods):
    """``spawn_in`` (how a bulk flow runs beside a probe on a real cluster): the helper runs in the
    pod's network namespace while the caller goes on, SIGTERM reaches it (through ``timeout``), its
    stdout, stderr and exit code come back and its files are removed; the limit kills one that does
    not end; one that cannot start says why."""
    a = pods[0]
    script = ("trap 'echo term; exit 3' TERM; ip -o -4 addr show eth0 | grep -o 'inet [0-9.]*'; echo err >&2; "
              "while :; do sleep 0.05; done")
    p = cluster.spawn_in(a, ["sh", "-c", script], 60)
    time.sleep(0.5)
    assert p.poll() is None
    p.signal("TERM")
    out, err = p.communicate(10)
    # (timeout signals its whole group: sh may also report its sleep "Terminated" on stderr)
    assert (p.returncode, out.decode(), err.decode()[:4]) == (3, f"inet {a.ip}\nterm\n", "err\n"), err
    assert cluster.node_agent.exec_in(a, ["sh", "-c", f"test -e {p.dir} && echo left; true"], 30) == b""
    killed = cluster.spawn_in(a, ["sleep", "30"], 1)
    killed.communicate(10)
    assert killed.returncode == 128 + 9
    missing = cluster.spawn_in(a, ["/nonexistent/helper"], 10)
    _, err = missing.communicate(10)
    assert missing.returncode == 127 and b"No such file" in err, err
