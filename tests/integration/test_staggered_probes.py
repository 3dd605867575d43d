"""Staggered probes: two real probes of one client in the same window, their schedules half an
interval apart (``ProbeSpec.phase``), every request answered, probing time counted once."""

import numpy as np
import pytest

from netslo import phase_times
from netslo.interleave import staggered
from netslo.probes import ProbeSpec
from netslo.providers.netns import NetnsCluster


@pytest.fixture(scope="module")
def pair():
    with NetnsCluster(nodes=2) as c:
        srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        ports = c.start_responders(srv, ("udp", "ws"))
        yield c, srv, cli, ports


@pytest.mark.parametrize("proto,responder", [("ws", "ws"), ("udp", "udp")])
def test_schedules_alternate_half_an_interval_apart(pair, proto, responder):
    c, srv, cli, ports = pair
    interval = 0.010
    specs = {"small": ProbeSpec(proto, srv.ip, ports[responder], count=60, interval=interval, req_bytes=1000),
             "large": ProbeSpec(proto, srv.ip, ports[responder], count=60, interval=interval, req_bytes=50_000
                                if proto == "ws" else 1400)}
    phase_times.reset()
    runs = staggered(c, cli, specs)
    assert phase_times.totals()["probing"]["calls"] == 1          # the pair, not each probe
    step = round(interval * 1e9)
    sched = {k: s.rows["sched_ns"] for k, s in runs.items()}
    assert set(sched["small"] % step) == {0} and set(sched["large"] % step) == {step // 2}
    # the two windows overlap: the pair took about the time of one run
    assert sched["large"][0] < sched["small"][-1] and sched["small"][0] < sched["large"][-1]
    for k, s in runs.items():
        assert int(np.sum(s.rows["recv_ns"] >= 0)) == 60, k
        assert s.meta["staggered"]["gap_s"] == pytest.approx(interval / 2)
        assert s.meta["phase"] == pytest.approx(0.0 if k == "small" else interval / 2)


def test_alternatives_must_share_the_interval(pair):
    c, srv, cli, ports = pair
    with pytest.raises(ValueError, match="interval"):
        staggered(c, cli, {"a": ProbeSpec("udp", srv.ip, ports["udp"], count=5, interval=0.01),
                           "b": ProbeSpec("udp", srv.ip, ports["udp"], count=5, interval=0.02)})
