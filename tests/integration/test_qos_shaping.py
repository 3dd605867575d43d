"""QoS qdiscs on real namespaces: the bandwidth plugin's tbf/ifb, htb policies read back, cleanup."""

import subprocess
import time

import numpy as np
import pytest

from netslo.core.errors import InfrastructureError, SpecError
from netslo.impair.shaping import bandwidth, priority, qdiscs
from netslo.providers.netns.cluster import NetnsCluster
from netslo.studies.qos import background
from netslo.traffic.probes import ProbeSpec

POLICY = priority.parse_policy({"link": "20mbit", "classes": [
    {"name": "ef", "dscp": ["EF"], "rate": "4mbit", "prio": 0},
    {"name": "be", "default": True, "rate": "16mbit", "prio": 1}]})


def tc(ns: str, *args: str) -> str:
    return subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "tc", *args], capture_output=True, text=True,
                          check=True).stdout


def iptables_rules(ns: str, table: str) -> str:
    return subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "iptables", "-w", "5", "-t", table, "-S"],
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def cl():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        yield c


def test_annotations_install_the_plugins_qdiscs(cl):
    pod = cl.add_pod("bw", "node1", annotations={bandwidth.INGRESS_KEY: "10M", bandwidth.EGRESS_KEY: "1M"})
    ns = cl.node_netns("node1")
    assert bandwidth.read(ns, pod.host_interface) == {"ingress": 10_000_000, "egress": 1_000_000}
    qd = tc(ns, "qdisc", "show")
    ifb = bandwidth.ifb_name(pod.host_interface)
    assert f"qdisc tbf 1: dev {pod.host_interface} root" in qd and "rate 10Mbit" in qd
    assert f"qdisc ingress ffff: dev {pod.host_interface}" in qd
    assert f"qdisc tbf 1: dev {ifb} root" in qd and "rate 1Mbit" in qd
    flt = tc(ns, "filter", "show", "dev", pod.host_interface, "ingress")
    assert "u32" in flt and f"Egress Redirect to device {ifb}" in flt
    bandwidth.remove(bandwidth.Shaping(ns, pod.host_interface, 10e6, 1e6, ifb))
    qd = tc(ns, "qdisc", "show")
    assert "tbf" not in qd and "ingress" not in qd and ifb not in qd


def test_egress_rate_is_read_where_the_redirect_goes_whatever_the_ifb_is_called(cl):
    """A CNI names its ifb its own way (Calico's felix: bwcali<hash>; the plugin: bwp<hash>): read()
    and remove() follow the host veth's ingress redirect instead of assuming netslo's name."""
    pod = cl.add_pod("bwren", "node1", annotations={bandwidth.EGRESS_KEY: "3M"})
    ns = cl.node_netns("node1")
    subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "ip", "link", "set", bandwidth.ifb_name(pod.host_interface),
                    "name", "bwcali0123456ab"], check=True)
    assert bandwidth.read(ns, pod.host_interface) == {"ingress": None, "egress": 3_000_000}
    bandwidth.remove(bandwidth.Shaping(ns, pod.host_interface, None, 3e6, bandwidth.ifb_name(pod.host_interface)))
    qd = tc(ns, "qdisc", "show")
    assert "bwcali0123456ab" not in qd and f"ingress ffff: dev {pod.host_interface}" not in qd
    assert bandwidth.link_mtu(ns, pod.host_interface) == cl.mtu


def test_pod_without_annotations_is_not_shaped(cl):
    pod = cl.add_pod("plain", "node1")
    assert bandwidth.read(cl.node_netns("node1"), pod.host_interface) == {"ingress": None, "egress": None}


def test_bad_annotation_is_a_one_line_spec_error(cl):
    with pytest.raises(SpecError) as e:
        cl.add_pod("badbw", "node1", annotations={bandwidth.EGRESS_KEY: "10mbit"})
    assert str(e.value).startswith("kubernetes.io/egress-bandwidth: value '10mbit'") and "\n" not in str(e.value)


def test_priority_policy_reads_back_and_is_removed(cl):
    ns = cl.node_netns("node1")
    with priority.installed(ns, "eth0", POLICY) as inst:
        assert inst.filters == [{"flowid": "1:10", "match": {1: (0xB8, 0xFC)}}]
        classes = tc(ns, "class", "show", "dev", "eth0")
        assert "class htb 1:10" in classes and "class htb 1:11" in classes and "prio 0" in classes
    assert "htb" not in tc(ns, "qdisc", "show", "dev", "eth0")


def test_u32_key_at_the_wrong_byte_is_caught_on_read_back(cl):
    """A u32 key is value/mask of the 32-bit word at a byte offset (tc-u32(8)); at offset 0 of the IPv4
    header that word is version+IHL, TOS, total length (RFC 791 §3.1). So TOS is '0x00b80000/0x00fc0000+0',
    and '0xb8000000/0xfc000000+0' silently matches version/IHL: install reads the filter back and refuses."""
    ns = cl.node_netns("node1")
    with pytest.raises(InfrastructureError, match="read back as .*byte 0") as e:
        priority.install(ns, "eth0", POLICY, keys=lambda match: ["0xb8000000/0xfc000000+0"])
    assert "\n" not in str(e.value)
    assert "htb" not in tc(ns, "qdisc", "show", "dev", "eth0")


def test_ef_packets_land_in_the_ef_class(cl):
    """Classification proof without load: EF probes are counted by class 1:10, unmarked by 1:11."""
    server = cl.add_pod("prio-srv", "node0")
    ports = cl.start_responders(server, ("udp",))
    client = cl.add_pod("prio-cli", "node1")
    ns = cl.node_netns("node1")
    with priority.installed(ns, "eth0", POLICY):
        before = priority.class_counters(ns, "eth0")
        cl.probe(client, ProbeSpec("udp", server.ip, ports["udp"], count=50, interval=0.002, tos=0xB8,
                                   req_bytes=1000, resp_bytes=64))
        mid = priority.class_counters(ns, "eth0")
        cl.probe(client, ProbeSpec("udp", server.ip, ports["udp"], count=50, interval=0.002, tos=0,
                                   req_bytes=1000, resp_bytes=64))
        after = priority.class_counters(ns, "eth0")
    assert mid["1:10"] - before["1:10"] >= 50 * 1000 and mid["1:11"] - before["1:11"] < 5000
    assert after["1:11"] - mid["1:11"] >= 50 * 1000 and after["1:10"] - mid["1:10"] < 5000


def _rtt_p50_ms(samples) -> float:
    rows = samples.rows[samples.rows["recv_ns"] >= 0]
    return float(np.median(rows["recv_ns"] - rows["send_ns"])) / 1e6


def test_control_ports_bypass_the_congested_link_and_only_they_do(cl):
    """The control class 1:2: TCP segments to a ``control`` port leave beside the bottleneck. A bulk
    TCP flow (iperf3, another port) fills a 10 Mbit/s link with a 100 ms queue; a tcp-rr probe to the
    control port keeps its unqueued RTT (P50 0.13 ms here) and is counted by 1:2, while the same probe
    without ``control`` waits behind the bulk flow's queue (P50 31 ms): the filter, not a quiet link,
    keeps it out."""
    server = cl.add_pod("ctl-srv", "node0")
    ports = cl.start_responders(server, ("tcp",))
    lat, bulk = cl.add_pod("ctl-lat", "node1"), cl.add_pod("ctl-bulk", "node1")
    ns = cl.node_netns("node1")
    flat = priority.flat(priority.parse_policy({"link": "10mbit", "queue": "100ms", "classes": [
        {"name": "be", "default": True, "rate": "10mbit"}]}))
    spec = ProbeSpec("tcp-rr", server.ip, ports["tcp"], count=200, interval=0.005)
    p50 = {}
    with background.Background(cl, server, ["iperf3", "-s", "-p", "5299"], limit_s=60) as srv:
        time.sleep(0.5)
        with background.Background(cl, bulk, ["iperf3", "-c", server.ip, "-p", "5299", "-t", "20"], limit_s=40):
            for control in ((("dport", ports["tcp"]),), ()):
                with priority.installed(ns, "eth0", flat, control=control) as inst:
                    assert [f["flowid"] for f in inst.filters] == ["1:2"] * len(control)
                    time.sleep(1.5)     # the bulk flow fills the queue
                    before = priority.class_counters(ns, "eth0")
                    p50[control != ()] = _rtt_p50_ms(cl.probe(lat, spec))
                    after = priority.class_counters(ns, "eth0")
                    if control:
                        assert after["1:2"] - before["1:2"] >= 200 * spec.req_bytes, (before, after)
                        assert "class htb 1:2 root" in tc(ns, "class", "show", "dev", "eth0")
        srv.stop()
    assert p50[True] < 2.0 and p50[False] > 5.0, p50   # here: 0.13 ms and 31 ms


def test_bad_control_port_is_refused_before_anything_is_installed(cl):
    ns = cl.node_netns("node1")
    with pytest.raises(SpecError, match=r"^control sport: value 70000 ") as e:
        priority.install(ns, "eth0", POLICY, control=(("sport", 70000),))
    assert "\n" not in str(e.value) and "htb" not in tc(ns, "qdisc", "show", "dev", "eth0")
    with pytest.raises(SpecError, match=r"^control direction: value 'port' "):
        priority.install(ns, "eth0", POLICY, control=(("port", 10250),))


def test_bottleneck_and_rules_are_removed_on_failure(cl):
    ns = cl.node_netns("node1")
    with pytest.raises(RuntimeError):
        with qdiscs.bottleneck(ns, "eth0", 10e6, 0.02) as b:
            assert "tbf" in tc(ns, "qdisc", "show", "dev", "eth0") and b.max_queue_delay == pytest.approx(0.02, rel=0.01)
            raise RuntimeError("boom")
    assert "tbf" not in tc(ns, "qdisc", "show", "dev", "eth0")
    with pytest.raises(RuntimeError):
        with qdiscs.random_drop(ns, 0.5, ["-p", "udp", "--dport", "9"]):
            assert "netslo-qos-drop" in iptables_rules(ns, "filter")
            raise RuntimeError("boom")
    assert "netslo-qos" not in iptables_rules(ns, "filter")
    with pytest.raises(InfrastructureError):
        with qdiscs.random_drop(ns, 1.5, ["-p", "udp"]):
            pass
