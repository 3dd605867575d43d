"""Service exposure paths on the embedded provider: each path answers, externalTrafficPolicy=Local
drops traffic on a node without the backend, eTP=Cluster masquerades, and close() removes every
rule and the proxy process."""

import pytest

from netslo.providers.exposure import EXPOSURES
from netslo.providers.netns.cluster import NetnsCluster, pids_in_netns
from netslo.providers.netns.services import NODE_PORT_LOCAL, NetnsServices
from netslo.stats import analysis as stats
from netslo.traffic.probes import ProbeSpec


@pytest.mark.parametrize("datapath", ["bridge", "routed"])
def test_paths_answer_policies_hold_and_cleanup_is_complete(datapath):
    with NetnsCluster(nodes=2, datapath=datapath) as c:
        srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        ports = c.start_responders(srv, ("http",))
        svc = NetnsServices(c, srv, ports["http"])
        try:
            for e in EXPOSURES:
                host, port = svc.target(e, cli)
                a = stats.analyze(c.probe(cli, ProbeSpec("http", host, port, count=50, interval=0.003)))
                assert a.counts["received"] == 50, (e, a.counts)
            counts = svc.counters()
            assert counts["clusterip"] >= 1 and counts["nodeport-local"] >= 1
            assert counts["nodeport-cluster"] >= 1 and counts["masquerade"] == counts["nodeport-cluster"]
            wrong_node = svc.node_ip("node1")  # no backend there: eTP=Local must not forward
            a = stats.analyze(c.probe(cli, ProbeSpec("http-new", wrong_node, NODE_PORT_LOCAL, count=5,
                                                     interval=0.01, wait=0.3)))
            assert a.counts["received"] == 0 and svc.counters()["nodeport-local-drop"] >= 1
            ingress_ns = c.netns_of(svc.ingress)
            assert pids_in_netns(ingress_ns)
        finally:
            svc.close()
        assert svc.rules_left() == 0
        assert pids_in_netns(ingress_ns) == []
