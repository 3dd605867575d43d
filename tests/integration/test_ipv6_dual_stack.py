"""IPv6 and dual stack on the embedded provider, on the real kernel: every datapath built dual-stack
carries udp (Python and compiled sender), tcp-rr, http-new and ICMPv6 over IPv6 same-node and
cross-node with every request answered, the DSCP as the traffic class both ways, kernel TX/RX
stamps on IPv6 sockets; IPv4 keeps working against the same (dual-stack) responders; a qdisc on
the pod's veth is seen by the IPv6 calibration probe; an IPv6 scenario on an IPv4-only cluster errors."""

import numpy as np
import pytest
from pyroute2 import NetNS

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.impair import verify
from netslo.providers.netns.cluster import DATAPATHS, NetnsCluster
from netslo.slo.runner import target
from netslo.slo.scenario import Scenario
from netslo.stats import analysis as stats
from netslo.traffic.probes import ProbeSpec, udp_native

EF = 0xB8
COUNT = 200


def _rtt_ok(samples, count: int) -> np.ndarray:
    a = stats.analyze(samples)
    assert a.counts["received"] == count and a.counts["lost"] == 0, a.counts
    rows = samples.rows
    rtt = rows["recv_ns"] - rows["send_ns"]
    assert (rtt > 0).all()
    return rows


@pytest.mark.slow   # ~5 s per datapath
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_every_datapath_carries_ipv6_same_and_cross_node(datapath):
    with NetnsCluster(nodes=2, datapath=datapath, ip_family="dual") as c:
        assert c.families == ("ipv4", "ipv6") and c.environment()["ip_family"] == "dual"
        srv, same, cross = c.add_pods([{"name": "server", "node": "node0"}, {"name": "same", "node": "node0"},
                                       {"name": "cross", "node": "node1"}])
        ports = c.start_responders(srv, ("udp", "tcp", "http"))
        v6 = srv.address("ipv6")
        assert v6.startswith("fd00:10:244:") and srv.ip.startswith("10.244.") and cross.ip6.startswith("fd00:10:244:1:")
        with NetNS(c.netns_of(cross)) as ipr:
            eth = ipr.get_links(ifname="eth0")[0]
            (addr,) = ipr.get_addr(index=eth["index"], family=10, scope=0)   # the global IPv6 address
        assert addr["prefixlen"] == (128 if datapath == "routed" else 64)
        assert eth.get_attr("IFLA_MTU") == (1450 if datapath == "vxlan" else 1500)
        for pod in (same, cross):
            where = (datapath, pod.name)
            # udp, a datagram as large as the pod MTU allows over IPv6 (vxlan: 1450 - 40 - 8)
            size = 1400 if datapath == "vxlan" else 1452
            s = c.probe(pod, ProbeSpec("udp", v6, ports["udp"], count=COUNT, interval=0.002, req_bytes=size,
                                       resp_bytes=size, tos=EF))
            rows = _rtt_ok(s, COUNT)
            assert (rows["tos_srv"] == EF).all() and (rows["tos_cli"] == EF).all(), where   # TCLASS both ways
            assert s.meta["timestamps"] == "kernel" and s.meta["kernel_tx_missing"] == 0, (where, s.meta)
            assert (rows["srv_seen"] == 1).all()            # the FIN exchange over IPv6 split the loss
            for proto, port in (("tcp-rr", ports["tcp"]), ("http-new", ports["http"]), ("icmp", 7)):
                _rtt_ok(c.probe(pod, ProbeSpec(proto, v6, port, count=COUNT, interval=0.002, tos=EF)), COUNT)
            # IPv4 to the same responders (bound to '::' for both families), its TOS read through IP_RECVTOS
            rows = _rtt_ok(c.probe(pod, ProbeSpec("udp", srv.ip, ports["udp"], count=50, interval=0.002, tos=EF)), 50)
            assert (rows["tos_srv"] == EF).all() and (rows["tos_cli"] == EF).all(), where


def test_the_compiled_sender_and_icmpv6_tclass_over_ipv6():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        srv, cross = c.add_pod("server", "node0"), c.add_pod("cross", "node1")
        ports = c.start_responders(srv, ("udp",))
        if udp_native.sender()[0] is None:
            pytest.skip(f"native sender: {udp_native.sender()[1]}")
        s = c.probe(cross, ProbeSpec("udp", srv.ip6, ports["udp"], count=COUNT, interval=0.001, tos=EF, sender="native"))
        rows = _rtt_ok(s, COUNT)
        assert (rows["tos_srv"] == EF).all() and (rows["tos_cli"] == EF).all()
        assert s.meta["timestamps"] == "kernel" and (rows["srv_seen"] == 1).all()
        rows = _rtt_ok(c.probe(cross, ProbeSpec("icmp", srv.ip6, 7, count=50, interval=0.002, tos=EF)), 50)
        assert (rows["tos_cli"] == EF).all()      # the echo reply carries the request's traffic class


def test_a_qdisc_on_the_pods_veth_is_seen_by_the_ipv6_calibration_probe():
    """tbf (this kernel has no netem) at 2 Mbit/s on the veth towards the client: the IPv6 calibration
    probe of impairment verification (8 Mbit/s offered) sees its queue and drops; unshaped, none."""
    import subprocess
    with NetnsCluster(nodes=2, datapath="routed") as c:
        srv, cross = c.add_pod("server", "node0"), c.add_pod("cross", "node1")
        ports = c.start_responders(srv, ("udp",))
        base = stats.analyze(verify.measure(c, cross, srv, ports, count=400, interval=0.001, size=1000, family="ipv6"))
        assert base.counts["lost"] == 0
        subprocess.run(["ip", "netns", "exec", c.node_netns("node1"), "tc", "qdisc", "replace", "dev",
                        c.host_interface(cross), "root", "tbf", "rate", "2mbit", "burst", "1600", "latency", "20ms"],
                       check=True)
        shaped = verify.measure(c, cross, srv, ports, count=400, interval=0.001, size=1000, family="ipv6")
        assert shaped.meta["host"] == srv.ip6
        got = stats.analyze(shaped)
        assert got.counts["lost"] > 400 / 2, got.counts            # ~3/4 of an 8 Mbit/s offer cannot pass
        assert got.metrics["rtt.p50"].value > base.metrics["rtt.p50"].value + 0.005   # the tbf queue (<= 20 ms)


def test_an_ipv6_scenario_on_an_ipv4_only_cluster_errors_and_ipv6_only_pods_have_no_ipv4():
    with NetnsCluster(nodes=1, datapath="bridge", ip_family="ipv4") as c:
        srv = c.add_pod("server", "node0")
        assert c.families == ("ipv4",) and srv.ip6 == ""
        with NetNS(c.netns_of(srv)) as ipr:
            assert not ipr.get_addr(family=10, scope=0)      # no global IPv6 address at all
        with pytest.raises(InfrastructureError, match="same-node-udp-1k-ipv6: pod server has no ipv6 address"):
            target(Scenario("same-node", "udp", "1k", family="ipv6"), srv)
        with pytest.raises(Unsupported) as e:
            verify.calibration_spec(srv, {"udp": 7000}, family="ipv6")
        assert e.value.category == "ip_family"
    with NetnsCluster(nodes=2, datapath="vxlan", ip_family="ipv6") as c:
        srv, cross = c.add_pod("server", "node0"), c.add_pod("cross", "node1")
        assert c.families == ("ipv6",) and srv.ip == srv.ip6 and ":" in srv.ip
        with pytest.raises(Unsupported):
            srv.address("ipv4")
        ports = c.start_responders(srv, ("tcp",))
        _rtt_ok(c.probe(cross, ProbeSpec("tcp-rr", srv.ip, ports["tcp"], count=50, interval=0.002)), 50)


def test_mqtt_over_ipv6_through_mosquitto_listening_on_both_families():
    import shutil
    if not (shutil.which("mosquitto") or shutil.which("/usr/sbin/mosquitto")):
        pytest.skip("mosquitto is not installed")
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        srv, cross = c.add_pod("server", "node0"), c.add_pod("cross", "node1")
        ports = c.start_responders(srv, ("mqtt",))
        for host in (srv.ip6, srv.ip):
            _rtt_ok(c.probe(cross, ProbeSpec("mqtt-qos1", host, ports["mqtt"], count=50, interval=0.005)), 50)
