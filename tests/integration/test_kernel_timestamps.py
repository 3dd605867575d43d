"""Kernel timestamps on a real path of the embedded provider (two nodes, probe forked from the warm
agent in the client pod's namespace, responder in the server's): the rows use the kernel's TX and RX
stamps at both ends and say so, and each request's kernel RTT lies inside its user-space one."""

import numpy as np
import pytest

from netslo.impair import capability
from netslo.providers.netns import uml
from netslo.providers.netns.cluster import NetnsCluster
from netslo.stats import analysis as stats
from netslo.traffic import kstamps
from netslo.traffic.probes import ProbeSpec

N = 2000


@pytest.fixture(scope="module")
def path():
    with NetnsCluster(nodes=2) as c:
        srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        ports = c.start_responders(srv, ("udp",))
        yield c, srv, cli, ports["udp"]


def test_udp_probe_uses_kernel_stamps_across_nodes(path):
    c, srv, cli, port = path
    s = c.probe(cli, ProbeSpec("udp", srv.ip, port, count=N, interval=0.0005, req_bytes=64, resp_bytes=64, wait=0.5))
    m = s.meta
    assert (m["timestamps"], m["server_timestamps"]) == (kstamps.KERNEL, kstamps.KERNEL)
    assert m["kernel_tx_missing"] == 0 and m["kernel_rx_missing"] == 0
    r = s.rows[s.rows["recv_ns"] >= 0]
    assert len(r) >= 0.99 * N
    assert np.all(r["send_app_ns"] < r["send_ns"]) and np.all(r["recv_ns"] < r["recv_app_ns"])
    assert np.all((r["send_ns"] < r["srv_rx_ns"]) & (r["srv_rx_ns"] <= r["srv_tx_ns"]) & (r["srv_tx_ns"] < r["recv_ns"]))
    a = stats.analyze(s)
    assert a.get("rtt.p50").value < a.get("rtt_app.p50").value and a.get("rtt.p99").value <= a.get("rtt_app.p99").value


@pytest.mark.skipif(not capability.uml_available()[0], reason=capability.uml_available()[1])
def test_the_clients_own_netem_is_inside_the_kernel_rtt():
    """netslo's impairments sit on the client pod (upstream: eth0 egress; downstream: ingress via
    ifb). A 5 ms netem on either is inside rtt: the TX stamp is taken before the qdisc
    (TX_SCHED; the driver's TX_SOFTWARE stamp, after it, gave rtt P50 0.32 ms with the egress delay
    in the user-mode-linux guest, 2026-11-26) and the RX stamp after the ifb's delay."""
    c = uml.UmlCluster(nodes=2)
    try:
        a, b = c.add_pod("a", "node0"), c.add_pod("b", "node1")
        port = c.start_responders(b, ("udp",))["udp"]
        spec = ProbeSpec("udp", b.ip, port, count=100, interval=0.01, req_bytes=64, resp_bytes=64, wait=0.5)
        steps = {"egress": [["tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "5ms"]],
                 "ingress": [["tc", "qdisc", "del", "dev", "eth0", "root"], ["ip", "link", "add", "ifb9", "type", "ifb"],
                             ["ip", "link", "set", "ifb9", "up"],
                             ["tc", "qdisc", "add", "dev", "ifb9", "root", "netem", "delay", "5ms"],
                             ["tc", "qdisc", "add", "dev", "eth0", "handle", "ffff:", "ingress"],
                             ["tc", "filter", "add", "dev", "eth0", "parent", "ffff:", "protocol", "all", "u32", "match",
                              "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb9"]]}
        for direction, cmds in steps.items():
            for cmd in cmds:
                c.exec_in(a, cmd, timeout=20)
            s = c.probe(a, spec)
            rtt = stats.analyze(s).get("rtt.p50").value
            assert s.meta["timestamps"] == kstamps.KERNEL and rtt >= 0.005, (direction, rtt)
    finally:
        c.close()
