"""WebSocket and HTTPS probes against real responders: TLS 1.3 recorded, a foreign CA refused,
independent request/response sizes honoured, and a non-WebSocket port reported as an error."""

import os

import pytest

from netslo.core.errors import InfrastructureError
from netslo.providers.netns.cluster import NetnsCluster
from netslo.stats import analysis as stats
from netslo.traffic import tlsca
from netslo.traffic.probes import ProbeSpec


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    good, other = tmp_path_factory.mktemp("ca-good"), tmp_path_factory.mktemp("ca-other")
    tlsca.make(good)
    tlsca.make(other)
    old = os.environ.get(tlsca.ENV)
    os.environ[tlsca.ENV] = str(good)
    try:
        with NetnsCluster(nodes=2) as c:
            srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
            ports = c.start_responders(srv, ("http", "ws", "tls"))
            yield c, srv, cli, ports, good, other
    finally:
        if old is None:
            os.environ.pop(tlsca.ENV, None)
        else:
            os.environ[tlsca.ENV] = old


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])   # the responders listen on both (the cluster is dual-stack)
@pytest.mark.parametrize("proto,kind", [("ws", "ws"), ("wss", "tls"), ("https", "tls"), ("https-new", "tls")])
def test_sizes_are_independent_and_tls_is_13(web, proto, kind, family):
    c, srv, cli, ports, _, _ = web
    s = c.probe(cli, ProbeSpec(proto, srv.address(family), ports[kind], count=40, interval=0.01, req_bytes=100,
                               resp_bytes=20_000))
    a = stats.analyze(s)
    assert a.counts["received"] == 40
    assert set(s.rows["resp_bytes"]) == {20_000} and set(s.rows["req_bytes"]) == {100}
    if proto in ("ws", "wss"):
        assert s.meta["tls_version"] == ("TLSv1.3" if proto == "wss" else None)


def test_a_certificate_from_another_ca_is_refused(web):
    c, srv, cli, ports, good, other = web
    os.environ[tlsca.ENV] = str(other)   # the probe trusts another CA than the responder's
    try:
        for proto in ("wss", "https"):
            with pytest.raises(InfrastructureError, match="CERTIFICATE_VERIFY_FAILED"):
                c.probe(cli, ProbeSpec(proto, srv.ip, ports["tls"], count=5, interval=0.01))
    finally:
        os.environ[tlsca.ENV] = str(good)


def test_websocket_to_a_plain_http_port_is_an_error(web):
    c, srv, cli, ports, _, _ = web
    with pytest.raises(InfrastructureError):
        c.probe(cli, ProbeSpec("ws", srv.ip, ports["http"], count=5, interval=0.01))
