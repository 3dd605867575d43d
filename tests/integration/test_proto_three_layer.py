"""Three layers on a real cross-node flow: consistent when measured right; an impossible measurement
(a unit slip in the application timestamps) is flagged; ICMP filtered away does not gate."""

import numpy as np
import pytest

from netslo.providers.netns.cluster import NetnsCluster
from netslo.stats.samples import SampleSet
from netslo.studies import threelayer
from netslo.traffic.probes import ProbeSpec


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    with NetnsCluster(nodes=2, datapath="routed") as c:
        srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        ports = c.start_responders(srv, ("ws",))
        app = c.probe(cli, ProbeSpec("ws", srv.ip, ports["ws"], count=400, interval=0.003))
        icmp = c.probe(cli, ProbeSpec("icmp", srv.ip, 7, count=200, interval=0.003))
        rule = ["INPUT", "-p", "icmp", "-j", "DROP"]
        c.exec_in(srv, ["iptables", "-A", *rule])
        try:
            filtered = c.probe(cli, ProbeSpec("icmp", srv.ip, 7, count=50, interval=0.003, wait=0.3))
        finally:
            c.exec_in(srv, ["iptables", "-D", *rule])
        yield app, icmp, filtered


def test_correct_measurement_is_consistent_and_layers_are_ordered(flow):
    app, icmp, _ = flow
    tl = threelayer.compare(app, icmp)
    assert tl.consistent, tl.line()
    assert tl.transport.samples > 300 and tl.network_loss == 0.0
    assert tl.ratios()["app/network"] > 1.0        # user space on both ends costs more than the kernel echo


def test_unit_slip_in_application_timestamps_is_flagged(flow):
    app, icmp, _ = flow
    rows = app.rows.copy()
    got = rows["recv_ns"] >= 0
    rows["recv_ns"][got] = rows["send_ns"][got] + (rows["recv_ns"][got] - rows["send_ns"][got]) // 1000
    tl = threelayer.compare(SampleSet(rows, dict(app.meta)), icmp)
    assert not tl.consistent and tl.problems, tl.line()


def test_rtt_from_another_connection_is_flagged(flow):
    """Transport RTTs of a slower connection (here: inflated 50x) paired with this run's application RTTs."""
    app, icmp, _ = flow
    meta = dict(app.meta)
    series = np.asarray(meta["tcp_info"])
    series[:, 1:4] *= 50
    meta["tcp_info"] = series.tolist()
    assert not threelayer.compare(SampleSet(app.rows, meta), icmp).consistent


def test_filtered_icmp_is_reported_not_gated(flow):
    app, _, filtered = flow
    tl = threelayer.compare(app, filtered)
    assert tl.network_loss == 1.0 and tl.consistent and "filtered" in tl.line()
