"""Kernel timestamps on a real path of the embedded provider (two nodes, probe forked from the warm
agent in the client pod's namespace, responder in the server's): the rows use the kernel's TX and RX
stamps at both ends and say so, and each request's kernel RTT lies inside its user-space one."""

import numpy as np
import pytest

from netslo import kstamps, stats
from netslo.probes import ProbeSpec
from netslo.providers.netns import NetnsCluster

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
