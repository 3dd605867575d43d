"""The ``existing`` provider against a real cluster (kube_target: the kind cluster scripts/ci-kind.sh keeps).

Real pods, the real API through the kubernetes client (watches, exec stream), the cluster's real CNI:
UDP/TCP/HTTP probes pod -> pod, Services (ClusterIP, NodePort Local/Cluster) with kube-proxy's own
rule counters, a hostNetwork baseline, bandwidth annotations realised as tc qdiscs by the CNI and
measured, readiness failures reported with the component's last status, and nothing left in the
cluster afterwards. Skips with the reason when no cluster answers; the node-side checks need the nodes
on this host (kind).
"""

from __future__ import annotations

import json
import re
import time

import pytest

from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers.existing import ExistingProvider
from netslo.providers.kube import manifests as km
from netslo.providers.kube.wait import wait_workload
from netslo.traffic.probes import ProbeSpec

from . import kube_target

pytestmark = pytest.mark.skipif(kube_target.why_not_up() is not None,
                                reason=str(kube_target.why_not_up()))


def provider(**kw) -> ExistingProvider:
    return ExistingProvider(kubeconfig=kube_target.kubeconfig(), pull_policy="Never",
                            pod_timeout=kw.pop("pod_timeout", 90.0), **kw)


def leftovers(api, run_id: str) -> list[str]:
    """Every object of ``run_id`` still in the cluster (namespace, or anything labelled with it)."""
    out = []
    if api.get("namespace", km.namespace_name(run_id), missing_ok=True) is not None:
        out.append(f"namespace/{km.namespace_name(run_id)}")
    for kind in ("pods", "services", "daemonsets", "deployments", "endpointslices"):
        out += [f"{kind}/{o['metadata']['name']}" for o in api.get(kind, selector=f"{km.RUN_LABEL}={run_id}")]
    return out


@pytest.fixture(scope="module")
def cluster():
    c = provider().up()
    try:
        yield c
    finally:
        c.close()
        left = leftovers(c.api, c.run_id)
        assert not left, f"left in the cluster after close(): {left}"


@pytest.fixture(scope="module")
def server(cluster):
    pod = cluster.add_pod("server", cluster.nodes[0])
    return pod, cluster.start_responders(pod)


@pytest.fixture(scope="module")
def client(cluster):
    return cluster.add_pod("client-same", cluster.nodes[0])


def rtts(samples):
    rows = samples.rows
    ok = rows["recv_ns"] >= 0
    return (rows["recv_ns"][ok] - rows["send_ns"][ok]), int((~ok).sum())


@pytest.mark.parametrize("protocol,port_key", [("udp", "udp"), ("tcp-rr", "tcp"), ("http", "http")])
def test_probe_pod_to_pod_through_the_exec_stream(cluster, server, client, protocol, port_key):
    srv, ports = server
    spec = ProbeSpec(protocol=protocol, host=srv.ip, port=ports[port_key], count=300, interval=0.002)
    samples = cluster.probe(client, spec)
    rtt, lost = rtts(samples)
    assert len(samples) == 300
    assert lost == 0, f"{protocol}: {lost} of 300 lost pod -> pod on one node"
    assert list(samples.rows["seq"]) == list(range(300))
    assert (rtt > 0).all() and float(rtt.max()) < 0.5e9, "RTTs must be positive and below 0.5 s"
    assert samples.meta["client_pod"] == "client-same" and samples.meta["provider"] == "existing"
    assert samples.meta["shared_clock"] is cluster.shared_clock
    assert cluster.shared_clock or len(cluster.nodes) > 1   # one node = one kernel clock


def test_pods_are_placed_and_labelled(cluster, server, client):
    srv, _ = server
    obj = cluster.pod_object(srv)
    assert obj["spec"]["nodeName"] == cluster.nodes[0]
    assert obj["metadata"]["labels"][km.RUN_LABEL] == cluster.run_id
    assert obj["metadata"]["namespace"] == f"netslo-{cluster.run_id}"
    assert [c["name"] for c in obj["spec"]["containers"]] == ["agent"]   # it serves udp/tcp/http too
    assert all(c["imagePullPolicy"] == "Never" for c in obj["spec"]["containers"])
    assert srv.ip and srv.ip != client.ip
    ns = cluster.api.get("namespace", cluster.namespace)
    assert ns["metadata"]["labels"][km.RUN_LABEL] == cluster.run_id


def test_environment_names_the_real_cluster(cluster):
    env = cluster.environment()
    assert env["provider"] == "existing" and env["emulated"] == "false"
    assert re.match(r"^v1\.\d+\.\d+", env["kubernetes"]), env
    assert env["container_runtime"].startswith("containerd://")
    ds = _system_daemonsets(cluster)
    for daemonset, cni in (("calico-node", "calico"), ("cilium", "cilium"), ("antrea-agent", "antrea")):
        if daemonset in ds:   # the CNI's own DaemonSet names it
            assert env["datapath"] == cni, (env, sorted(ds))


def _system_daemonsets(cluster) -> set[str]:
    """Names of kube-system's DaemonSets (the CNI's agent among them)."""
    return {d["metadata"]["name"] for d in cluster.api.get("daemonsets", namespace="kube-system")}


def _probe_until_clean(cluster, client, spec, timeout=20.0):
    """Service rules are programmed asynchronously by kube-proxy: retry a short probe until clean."""
    deadline = time.monotonic() + timeout
    while True:
        try:  # a TCP connect to a port without rules yet is refused: the probe exits non-zero
            rtt, lost = rtts(cluster.probe(client, ProbeSpec(**{**spec.__dict__, "count": 5, "wait": 0.5})))
        except InfrastructureError:
            lost = -1
        if lost == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return cluster.probe(client, spec)


def test_clusterip_service_udp_and_tcp(cluster, server, client):
    srv, _ = server
    svc = cluster.add_service("server-clusterip", srv)
    assert svc.type == "ClusterIP" and svc.cluster_ip.startswith("10.")
    for protocol, key in (("udp", "udp"), ("tcp-rr", "tcp")):
        spec = ProbeSpec(protocol=protocol, host=svc.cluster_ip, port=svc.ports[key], count=200, interval=0.002)
        _, lost = rtts(_probe_until_clean(cluster, client, spec))
        assert lost == 0, f"{protocol} via ClusterIP {svc.cluster_ip}: {lost} of 200 lost"


@pytest.mark.parametrize("policy", ["Local", "Cluster"])
def test_nodeport_service_with_external_traffic_policy(cluster, server, client, policy):
    srv, _ = server
    svc = cluster.add_service(f"server-nodeport-{policy.lower()}", srv, type="NodePort",
                              external_traffic_policy=policy)
    obj = cluster.api.get("service", svc.name, cluster.namespace)
    assert obj["spec"]["externalTrafficPolicy"] == policy
    assert 30000 <= svc.node_ports["tcp"] <= 32767
    node_ip = cluster.node_ip(srv.node)
    spec = ProbeSpec(protocol="tcp-rr", host=node_ip, port=svc.node_ports["tcp"], count=100, interval=0.002)
    _, lost = rtts(_probe_until_clean(cluster, client, spec))
    assert lost == 0, f"NodePort {node_ip}:{svc.node_ports['tcp']} ({policy}): {lost} of 100 lost"


def test_host_network_baseline_pod(cluster, server):
    srv, ports = server
    host = cluster.add_pod("client-hostnet", cluster.nodes[0], host_network=True)
    assert host.host_network and host.ip == cluster.node_ip(cluster.nodes[0])
    obj = cluster.pod_object(host)
    assert obj["spec"]["hostNetwork"] is True
    assert [c["name"] for c in obj["spec"]["containers"]] == ["agent"]  # no responders on node ports
    with pytest.raises(InfrastructureError, match="without responders"):
        cluster.start_responders(host)
    samples = cluster.probe(host, ProbeSpec(protocol="udp", host=srv.ip, port=ports["udp"], count=200,
                                            interval=0.002))
    _, lost = rtts(samples)
    assert lost == 0


def test_exec_in_is_root_in_the_pod_namespace_through_the_node_agent(cluster, client):
    """What the gate's helpers do in a pod (sysctl -w, ethtool -K, nstat) needs root in the pod's
    network namespace; the pod's own container (uid 65534, no capabilities) has neither, so on
    ``existing`` it goes through the node agent. The change is the pod's alone and is undone."""
    key = "net.ipv4.tcp_slow_start_after_idle"
    with pytest.raises(InfrastructureError):     # the pod's own container cannot (the reason for the agent)
        cluster.api.exec(cluster.namespace, cluster.k8s_pod_name(client), "agent",
                         ["sh", "-c", f"echo 0 > /proc/sys/{key.replace('.', '/')}"], timeout=30)
    before = cluster.exec_in(client, ["sysctl", "-n", key]).decode().strip()
    flipped = "0" if before == "1" else "1"
    try:
        cluster.exec_in(client, ["sysctl", "-q", "-w", f"{key}={flipped}"])
        assert cluster.exec_in(client, ["sysctl", "-n", key]).decode().strip() == flipped
        seen_by_pod = cluster.api.exec(cluster.namespace, cluster.k8s_pod_name(client), "agent",
                                       ["cat", f"/proc/sys/{key.replace('.', '/')}"], timeout=30)
        assert seen_by_pod.decode().strip() == flipped            # the pod's namespace, not the node's
    finally:
        cluster.exec_in(client, ["sysctl", "-q", "-w", f"{key}={before}"])
    assert cluster.exec_in(client, ["sysctl", "-n", key]).decode().strip() == before
    features = cluster.exec_in(client, ["ethtool", "-k", "eth0"]).decode()
    assert "tcp-segmentation-offload:" in features
    assert "TcpOutSegs" in cluster.exec_in(client, ["nstat", "-az", "TcpOutSegs"]).decode()
    with pytest.raises(InfrastructureError, match="no-such-program"):
        cluster.exec_in(client, ["no-such-program"])


node_access = pytest.mark.skipif(kube_target.why_no_node_access() is not None,
                                 reason=str(kube_target.why_no_node_access()))


def _host_veth(cluster, pod) -> str:
    """The node-side veth of ``pod`` (its eth0's peer), by interface index."""
    out = cluster.api.exec(cluster.namespace, cluster.k8s_pod_name(pod), "agent",
                               ["cat", "/sys/class/net/eth0/iflink"], timeout=30)
    index = int(out.decode().strip())
    for line in kube_target.node_exec(pod.node, "ip", "-o", "link", "show").splitlines():
        num, name = line.split(":")[:2]
        if int(num) == index:
            return name.strip().split("@")[0]
    raise AssertionError(f"no interface with index {index} in the node namespace")


def _bulk_bps(cluster, client, server_ip: str, port: int) -> float:
    out = cluster.exec_agent(client, ["bulk", "--target", f"{server_ip}:{port}", "--duration", "3s",
                                      "--omit", "1s"], timeout=60)
    return float(json.loads(out)["throughput_bps"])


def _skip_unless_annotations_are_enforced(cluster, node: str) -> None:
    """Cilium honours bandwidth annotations only with its Bandwidth Manager, which needs sch_fq and
    then makes fq the root qdisc of the node's devices; without it the annotations do nothing."""
    if "cilium" in _system_daemonsets(cluster):
        root = kube_target.node_exec(node, "tc", "qdisc", "show", "dev", "eth0", "root").strip()
        if not re.match(r"qdisc (fq|mq) ", root):
            pytest.skip(f"Cilium's Bandwidth Manager is not active on node {node} (eth0 root qdisc {root!r}, "
                        f"not fq: it needs sch_fq): bandwidth annotations are not enforced on this cluster")


@node_access
def test_bandwidth_annotations_reach_the_cni_bandwidth_plugin(cluster, server, client):
    srv, ports = server
    _skip_unless_annotations_are_enforced(cluster, cluster.nodes[0])
    limited = cluster.add_pod("client-limited", cluster.nodes[0], annotations={
        "kubernetes.io/egress-bandwidth": "10M", "kubernetes.io/ingress-bandwidth": "20M"})
    veth = _host_veth(cluster, limited)
    node = lambda *argv: kube_target.node_exec(limited.node, *argv)  # noqa: E731
    qdiscs = node("tc", "qdisc", "show", "dev", veth)
    # ingress-bandwidth (traffic into the pod): a tbf on the host-side veth's egress.
    assert re.search(r"qdisc tbf \S+ root .*rate 20Mbit", qdiscs), qdiscs
    # egress-bandwidth (traffic out of the pod): ingress qdisc redirecting to an ifb with a tbf.
    assert "qdisc ingress" in qdiscs, qdiscs
    filters = node("tc", "filter", "show", "dev", veth, "parent", "ffff:")
    ifb = re.search(r"Redirect to device (\S+?)\)", filters)
    assert ifb, filters
    assert re.search(r"qdisc tbf \S+ root .*rate 10Mbit", node("tc", "qdisc", "show", "dev", ifb.group(1)))
    # And the limit is what the pod gets: bulk TCP out of the limited pod vs. an unlimited one.
    capped = _bulk_bps(cluster, limited, srv.ip, ports["tcp"])
    free = _bulk_bps(cluster, client, srv.ip, ports["tcp"])
    assert 6e6 < capped < 12e6, f"egress-bandwidth 10M realised as {capped / 1e6:.1f} Mbit/s"
    assert free > 5 * capped, f"unlimited pod {free / 1e6:.1f} Mbit/s vs limited {capped / 1e6:.1f}"


def test_bad_bandwidth_annotation_is_a_spec_error(cluster):
    with pytest.raises(SpecError, match="kubernetes.io/egress-bandwidth"):
        cluster.add_pod("bad-bw", cluster.nodes[0], annotations={"kubernetes.io/egress-bandwidth": "fast"})


def test_pod_that_can_never_start_fails_fast_with_its_status(cluster):
    c = cluster
    c.image, saved = "localhost/netslo-does-not-exist:never", c.image
    t0 = time.monotonic()
    try:
        with pytest.raises(InfrastructureError) as e:
            c.add_pod("never-starts", c.nodes[0], responders=())
    finally:
        c.image = saved
    msg = str(e.value)
    assert f"pod {c.namespace}/never-starts" in msg and "ErrImageNeverPull" in msg, msg
    assert time.monotonic() - t0 < 60


def test_workload_never_ready_raises_with_component_and_last_status(cluster):
    """Same wait the CNI installers use: a DaemonSet whose pod runs but never passes readiness."""
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": "never-ready", "namespace": cluster.namespace, "labels": km.labels(cluster.run_id)},
          "spec": {"selector": {"matchLabels": {"app": "never-ready"}},
                   "template": {"metadata": {"labels": {"app": "never-ready", **km.labels(cluster.run_id)}},
                                "spec": {"terminationGracePeriodSeconds": 1, "automountServiceAccountToken": False,
                                         "containers": [{"name": "agent", "image": cluster.image,
                                                         "imagePullPolicy": "Never",
                                                         "command": km.IDLE_COMMAND,
                                                         "readinessProbe": {"exec": {"command": ["false"]},
                                                                            "periodSeconds": 1}}]}}}}
    cluster.api.create(ds)
    t0 = time.monotonic()
    with pytest.raises(InfrastructureError) as e:
        wait_workload(cluster.api, "DaemonSet", cluster.namespace, "never-ready", "CNI fake", timeout=8)
    took = time.monotonic() - t0
    msg = str(e.value)
    assert msg.startswith(f"CNI fake: DaemonSet {cluster.namespace}/never-ready: not ready after 8s"), msg
    assert re.search(r"\b0/[1-9][0-9]* ready", msg) and "pod never-ready-" in msg, msg
    assert 8 <= took < 20, f"gave up after {took:.1f}s with an 8s timeout"


def test_close_removes_everything_it_created():
    c = provider().up()
    pod = c.add_pod("lonely", c.nodes[0], responders=("udp",))
    c.add_service("lonely", pod, protocols=("udp",))
    run_id = c.run_id
    assert leftovers(c.api, run_id), "the run should have objects before close()"
    c.close()
    assert leftovers(c.api, run_id) == []
    c.close()  # idempotent


def test_close_refuses_a_namespace_it_did_not_create(cluster):
    """A namespace with the same name but another run label is not deleted."""
    from netslo.providers.kube.cluster import KubeCluster
    other = KubeCluster(cluster.api, run_id=cluster.run_id)
    other._created = True
    other.run_id = "someoneelse"
    with pytest.raises(InfrastructureError, match="not deleting what this run did not create"):
        other.close()
    assert cluster.api.get("namespace", cluster.namespace, missing_ok=True) is not None


def test_on_demand_ws_tls_mqtt_responders_in_a_pod(cluster, client, tmp_path, monkeypatch):
    """ws/tls/mqtt start inside the agent container; the run's TLS directory is copied into the pods."""
    from netslo.traffic import tlsca
    tlsca.make(tmp_path)
    monkeypatch.setenv(tlsca.ENV, str(tmp_path))
    pod = cluster.add_pod("server-kinds", cluster.nodes[0], responders=())
    ports = cluster.start_responders(pod, ("ws", "tls", "mqtt"))
    assert ports == {"ws": 7081, "tls": 7443, "mqtt": 1883}
    for protocol, key in (("ws", "ws"), ("wss", "tls"), ("mqtt-qos1", "mqtt")):
        samples = cluster.probe(client, ProbeSpec(protocol=protocol, host=pod.ip, port=ports[key], count=100,
                                                  interval=0.005))
        _, lost = rtts(samples)
        assert len(samples) == 100 and lost == 0, f"{protocol}: {lost} of 100 lost"
    with pytest.raises(InfrastructureError, match="without responders"):
        cluster.start_responders(pod, ("udp",))


def test_exposure_services_made_beforehand(cluster, server):
    """The gate makes the exposure Services with its pods (``exposure_services``) and hands them to
    KubeServices, which takes those (making them again would fail: the names exist) and deletes them
    on close. Its ingress proxy gets a pod of its own (the exposure test below makes the backend's)."""
    from netslo.providers.kube.services import KubeServices, exposure_services
    srv, ports = server
    ingress = cluster.add_pod("made-ingress", srv.node, responders=())
    made = exposure_services(cluster, srv, ports["http"])
    names = {s.name for s in made.values()}
    listed = lambda: {s["metadata"]["name"] for s in cluster.api.get("services", namespace=cluster.namespace)}  # noqa: E731
    assert sorted(made) == ["clusterip", "nodeport-cluster", "nodeport-local"] and names <= listed()
    with KubeServices(cluster, srv, ports["http"], services=made, ingress=ingress) as svc:
        assert svc.services == made
    assert not names & listed()


@node_access
def test_exposure_paths_with_kube_proxy_counters(cluster, server, client):
    """KubeServices (NetnsServices' interface): every path answers and kube-proxy's own rule carried it
    (its packet counters, summed over the nodes: a NodePort is DNATed on the node it is sent to);
    only NodePort with externalTrafficPolicy Cluster through another node is masqueraded. Cilium
    translates a pod's ClusterIP traffic itself, per packet at the pod's interface, also without its
    kube-proxy replacement (cilium/cilium#10651): there kube-proxy's ClusterIP rule must stay unused."""
    from netslo.core.errors import Unsupported
    from netslo.providers.kube.services import KubeServices
    srv, ports = server
    save = lambda: "\n".join(kube_target.node_exec(n, "iptables-save", "-c", "-t", "nat")  # noqa: E731
                             for n in cluster.nodes)
    exposures = ["pod-ip", "clusterip", "nodeport-local", "ingress"]
    by_kube_proxy = {"clusterip": "cilium" not in _system_daemonsets(cluster), "nodeport-local": True,
                     "nodeport-cluster": True}
    with KubeServices(cluster, srv, ports["http"], iptables_save=save) as svc:
        if len(cluster.nodes) < 2:
            with pytest.raises(Unsupported, match="2\\+ nodes"):
                svc.target("nodeport-cluster", client)
        else:
            exposures.append("nodeport-cluster")
        for exposure in exposures:
            before = svc.counters()
            host, port = svc.target(exposure, client)
            spec = ProbeSpec(protocol="http", host=host, port=port, count=100, interval=0.003)
            _, lost = rtts(_probe_until_clean(cluster, client, spec))
            assert lost == 0, f"http via {exposure}: {lost} of 100 lost"
            after = svc.counters()
            if exposure in by_kube_proxy:
                moved = after[exposure] > before[exposure]
                assert moved == by_kube_proxy[exposure], (exposure, "by kube-proxy", by_kube_proxy[exposure],
                                                          before, after)
            if exposure == "nodeport-cluster":
                assert after["masquerade"] > before["masquerade"], (exposure, before, after)
            else:
                assert after["masquerade"] == before["masquerade"], (exposure, before, after)
        names = [s.name for s in svc.services.values()]
    left = cluster.api.get("services", namespace=cluster.namespace)
    assert not set(names) & {s["metadata"]["name"] for s in left}
