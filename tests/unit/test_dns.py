"""DNS: wire format, search expansion, resolv.conf, the responder's answers, the probe on loopback,
the dns.* metrics and their SLO checks (a check that must fail does)."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest

from netslo.agent import cli as agent
from netslo.core.errors import SpecError
from netslo.slo import spec as slo
from netslo.slo.runner import judge_all, probe_spec
from netslo.stats.analysis import analyze
from netslo.stats.dns import rcode_name
from netslo.stats.samples import SampleSet, empty
from netslo.studies.dns import DnsScenario
from netslo.traffic import dnswire
from netslo.traffic.probes import ProbeSpec, run
from netslo.traffic.probes.dns import DnsOptions, read_resolv_conf, resolve_target
from netslo.traffic.responders import dns as responder

from .local_responder import free_port, serving

NAME = "server.netslo.svc.cluster.local"
SEARCH = ("netslo.svc.cluster.local", "svc.cluster.local", "cluster.local")


# ---- wire format ------------------------------------------------------------------------------

def test_query_bytes_are_rfc1035():
    q = dnswire.query(0x1234, "A.b.", dnswire.QTYPE_AAAA)
    assert q == bytes.fromhex("1234 0100 0001 0000 0000 0000") + b"\x01a\x01b\x00" + bytes.fromhex("001c 0001")
    m = dnswire.parse(q)
    assert (m.id, m.qname, m.qtype, m.is_response, m.rcode) == (0x1234, "a.b", 28, False, 0)


def test_response_round_trip_with_compressed_names():
    q = dnswire.query(7, NAME, dnswire.QTYPE_A)
    r = dnswire.parse(dnswire.response(q, dnswire.NOERROR, ["10.0.0.1", "10.0.0.2"], ttl=5))
    assert r.is_response and r.flags & dnswire.AA and r.flags & dnswire.RD
    assert (r.id, r.qname, r.rcode, r.ancount) == (7, NAME, 0, 2)
    assert r.addresses(dnswire.QTYPE_A) == ["10.0.0.1", "10.0.0.2"] and r.answers[0][2] == 5
    six = dnswire.parse(dnswire.response(dnswire.query(8, NAME, dnswire.QTYPE_AAAA), 0, ["fd00::1"]))
    assert six.addresses(dnswire.QTYPE_AAAA) == ["fd00::1"]
    nx = dnswire.parse(dnswire.response(q, dnswire.NXDOMAIN))
    assert nx.rcode == dnswire.NXDOMAIN and nx.answers == [] and rcode_name(nx.rcode) == "NXDOMAIN"


@pytest.mark.parametrize("data", [b"", b"\x00" * 11, dnswire.query(1, "a", 1)[:-3],
                                  bytes.fromhex("0001 8100 0001 0000 0000 0000") + b"\xc0\x0c" + b"\x00\x01\x00\x01",
                                  bytes.fromhex("0001 0100 0002 0000 0000 0000") + b"\x00\x00\x01\x00\x01"])
def test_malformed_messages_raise(data):
    with pytest.raises(dnswire.DnsWireError):
        dnswire.parse(data)


def test_bad_names_are_refused():
    with pytest.raises(dnswire.DnsWireError, match="labels"):
        dnswire.encode_name("a..b")
    with pytest.raises(dnswire.DnsWireError, match="255"):
        dnswire.encode_name(".".join(["x" * 60] * 5))


def test_qtype_offset_points_at_the_qtype():
    q = dnswire.query(1, NAME, dnswire.QTYPE_AAAA)
    assert struct.unpack_from("!H", q, dnswire.qtype_offset(NAME))[0] == dnswire.QTYPE_AAAA


# ---- search expansion and resolv.conf ---------------------------------------------------------

@pytest.mark.parametrize("name,ndots,expect", [
    ("server.netslo", 5, [f"server.netslo.{s}" for s in SEARCH] + ["server.netslo"]),
    ("server.netslo", 1, ["server.netslo"] + [f"server.netslo.{s}" for s in SEARCH]),
    ("example.com.", 5, ["example.com"]),
    ("a.b.c.d.e.f", 5, ["a.b.c.d.e.f"] + [f"a.b.c.d.e.f.{s}" for s in SEARCH]),
])
def test_search_candidates_follow_resolv_conf(name, ndots, expect):
    assert dnswire.candidates(name, SEARCH, ndots) == expect


def test_resolv_conf_of_a_kubernetes_pod(tmp_path):
    text = ("search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\n"
            "# comment\noptions ndots:5 timeout:2 attempts:3 edns0\n")
    conf = read_resolv_conf(text)
    assert conf == {"nameservers": ["10.96.0.10"], "search": ["default.svc.cluster.local", "svc.cluster.local",
                                                              "cluster.local"], "ndots": 5, "timeout": 2, "attempts": 3}
    f = tmp_path / "resolv.conf"
    f.write_text(text)
    target, opts = resolve_target(ProbeSpec("dns", "resolv.conf", 53), DnsOptions(name="kubernetes.default"), str(f))
    assert target == ("10.96.0.10", 53) and opts.ndots == 5 and opts.search[0] == "default.svc.cluster.local"
    f.write_text("search x\n")
    with pytest.raises(SpecError, match="nameserver"):
        resolve_target(ProbeSpec("dns", "resolv.conf", 53), DnsOptions(), str(f))


# ---- responder --------------------------------------------------------------------------------

def test_responder_answers_its_table_and_nxdomain_otherwise():
    records = responder.parse_records([f"{NAME}=self", "v6.netslo=fd00::5"])
    a = dnswire.parse(responder.answer(dnswire.query(1, NAME, dnswire.QTYPE_A), records, "10.1.2.3"))
    assert a.rcode == 0 and a.addresses(dnswire.QTYPE_A) == ["10.1.2.3"]
    nodata = dnswire.parse(responder.answer(dnswire.query(2, NAME, dnswire.QTYPE_AAAA), records, "10.1.2.3"))
    assert nodata.rcode == 0 and nodata.ancount == 0
    six = dnswire.parse(responder.answer(dnswire.query(3, "V6.netslo.", dnswire.QTYPE_AAAA), records))
    assert six.addresses(dnswire.QTYPE_AAAA) == ["fd00::5"]
    assert dnswire.parse(responder.answer(dnswire.query(4, "other", 1), records)).rcode == dnswire.NXDOMAIN
    assert responder.answer(dnswire.response(dnswire.query(5, NAME, 1), 0), records) is None   # a response
    bad = responder.answer(bytes.fromhex("0009 0100 0001 0000 0000 0000") + b"\x05ab", records)
    assert struct.unpack_from("!HH", bad) == (9, dnswire.QR | dnswire.RD | dnswire.FORMERR)
    assert responder.answer(b"junk", records) is None


@pytest.mark.parametrize("item", ["noequals", "a..b=1.2.3.4", "x=1.2.3", "=1.2.3.4"])
def test_bad_records_are_one_line_errors(item):
    with pytest.raises(SpecError, match="--record"):
        responder.parse_records([item])


# ---- the probe on loopback --------------------------------------------------------------------

def _probe(port, count=50, **opts) -> SampleSet:
    return run(ProbeSpec("dns", "127.0.0.1", port, count=count, interval=0.002, wait=0.1,
                         dns=DnsOptions(**{"name": NAME, "timeout": 1.0, **opts})))


def test_probe_times_lookups_and_records_each_one():
    with serving(responder.serve) as port:
        ok = _probe(port)
        searched = _probe(port, name="server.netslo", search=SEARCH, ndots=5)
        single = _probe(port, qtypes="a")
    a = analyze(ok)
    assert a.metrics["dns.fail"].value == 0 and a.counts["dns_rcodes"] == {"NOERROR": 50}
    assert a.metrics["dns.p50"] == a.metrics["rtt.p50"] and 0 < a.metrics["dns.p50"].value < 1.0
    assert a.counts["dns_queries"] == 100 and ok.meta["timestamps"] == "user"
    assert set(searched.meta["per_row"]["dns_names"]) == {2} and analyze(searched).counts["dns_queries"] == 200
    assert analyze(single).counts["dns_queries"] == 50


def test_probe_and_responder_speak_ipv6_with_aaaa_data():
    records = responder.parse_records([f"{NAME}=fd00::7", f"{NAME}=10.0.0.1"])
    with serving(lambda port, _bind, **kw: responder.serve(port, "::1", records=records, **kw)) as port:
        s = run(ProbeSpec("dns", "[::1]", port, count=10, interval=0.002, wait=0.1, dns=DnsOptions(name=NAME)))
    assert analyze(s).counts["dns_rcodes"] == {"NOERROR": 10} and s.meta["server"] == f"[::1]:{port}"


def test_dual_stack_responder_answers_self_with_the_address_each_query_arrived_at():
    """Bound to '::' (the agent's default since IPv6), one socket takes both families; 'self' is the
    destination of each query, read from IP_PKTINFO (v4, v4-mapped) or IPV6_PKTINFO (v6). Before
    that it answered no address at all: every lookup of the embedded gate failed."""
    with serving(lambda port, _bind, **kw: responder.serve(port, "::", **kw)) as port:
        v4 = _probe(port, count=5)
        v6 = run(ProbeSpec("dns", "[::1]", port, count=5, interval=0.002, wait=0.1,
                           dns=DnsOptions(name=NAME, timeout=1.0, qtypes="aaaa")))
    assert analyze(v4).metrics["dns.fail"].value == 0 and analyze(v4).counts["dns_rcodes"] == {"NOERROR": 5}
    assert analyze(v6).metrics["dns.fail"].value == 0 and analyze(v6).counts["dns_rcodes"] == {"NOERROR": 5}


def test_probe_counts_timeouts_and_failures_when_nobody_answers():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:   # takes queries, never answers
        silent.bind(("127.0.0.1", port))
        s = _probe(port, count=5, timeout=0.05, attempts=2)
    a = analyze(s)
    assert a.metrics["dns.fail"].value == 1.0 and a.metrics["dns.retry"].value == 1.0
    assert a.counts["dns_timeouts_a"] == a.counts["dns_timeouts_aaaa"] == 10
    assert a.counts["dns_rcodes"] == {"TIMEOUT": 5} and a.counts["dns_queries"] == 20


def test_per_row_arrays_follow_select_and_concat():
    per = {"dns_timeouts_a": [0, 1, 0], "dns_timeouts_aaaa": [0, 0, 2], "dns_rcode": [0, 0, -1]}
    s = SampleSet(empty(3), {"protocol": "dns", "per_row": per})
    both = SampleSet.concat([s, s.select(np.array([False, True, True]))])
    assert both.meta["per_row"]["dns_timeouts_aaaa"] == [0, 0, 2, 0, 2]
    assert analyze(both).counts["dns_retried"] == 4


# ---- SLO thresholds and checks ----------------------------------------------------------------

def test_dns_thresholds_parse_and_reject_wrong_units():
    doc = {"version": 1, "objectives": [{"name": "d", "select": {"protocol": "dns"},
                                         "thresholds": {"dns.p99": "50ms", "dns.fail": "1%", "dns.retry": "1%"}}]}
    assert [t.limit for t in slo.parse(doc).objectives[0].thresholds] == [0.05, 0.01, 0.01]
    for metric, value, form in (("dns.p99", "5", "duration"), ("dns.fail", "2ms", "percentage")):
        doc["objectives"][0]["thresholds"] = {metric: value}
        with pytest.raises(SpecError, match=rf"thresholds\.{metric}: value '{value}' — expected a {form}"):
            slo.parse(doc)


def test_dns_checks_fail_when_lookups_fail_or_are_slow():
    with serving(responder.serve) as port:
        good = analyze(_probe(port, count=400))
        bad = analyze(_probe(port, name="missing.example", count=400))
    th = slo.parse({"version": 1, "objectives": [{"name": "d", "thresholds": {
        "dns.p99": "150ms", "dns.fail": "1%", "dns.retry": "5%"}}]}).objectives[0].thresholds
    assert [c.verdict for c in judge_all(good, th, 0.95)] == [slo.PASS] * 3
    verdicts = {c.threshold.metric: c.verdict for c in judge_all(bad, th, 0.95)}
    assert verdicts == {"dns.p99": slo.FAIL, "dns.fail": slo.FAIL, "dns.retry": slo.PASS}
    tight = slo.parse({"version": 1, "objectives": [{"name": "t", "thresholds": {"dns.p50": "1ns"}}]})
    assert judge_all(good, tight.objectives[0].thresholds, 0.95)[0].verdict == slo.FAIL


def test_dns_metrics_are_unmeasurable_for_other_protocols():
    from netslo.slo.measurable import why_unmeasurable
    assert "dns probe only" in why_unmeasurable("dns.p99", "udp", True)
    assert why_unmeasurable("dns.fail", "dns", False) is None


# ---- scenario, agent options ------------------------------------------------------------------

def test_dns_scenario_reaches_the_probe_spec():
    from netslo.providers.base import Pod
    from netslo.slo.spec import Sampling
    sc = DnsScenario("cross-node", dns=DnsOptions(name=NAME))
    spec = probe_spec(sc, Pod("server", "node0", "10.0.0.9"), {"dns": 7053}, Sampling(), 10)
    assert (spec.host, spec.port, spec.dns.name, spec.protocol) == ("10.0.0.9", 7053, NAME, "dns")
    cluster = probe_spec(DnsScenario("same-node", cluster_dns=True), Pod("s", "n", "1.2.3.4"), {}, Sampling(), 10)
    assert (cluster.host, cluster.port) == ("resolv.conf", 53)
    assert sc.id == "cross-node-dns-lookup" and sc.labels()["protocol"] == "dns"
    with pytest.raises(SpecError, match="scenario.profile"):
        DnsScenario("same-node", profile="1k")


@pytest.mark.parametrize("argv,field", [
    (["--qtypes", "both"], "--qtypes"), (["--ndots", "16"], "--ndots"), (["--attempts", "0"], "--attempts"),
    (["--timeout", "1"], "--timeout"), (["--name", "a..b"], "--name"), (["--search", "ok,x..y"], "--search"),
])
def test_bad_dns_probe_options_are_one_line(argv, field, capsys):
    rc = agent.main(["probe", "dns", "--target", "127.0.0.1:53", "--out", "-", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == agent.EXIT_USAGE and len(err.splitlines()) == 1 and field in err


def test_resolv_conf_target_reaches_the_probe_with_or_without_port():
    for target in ("resolv.conf", "resolv.conf:53"):
        args = agent._parser().parse_args(["probe", "dns", "--target", target, "--name", "kubernetes.default",
                                           "--search", "a.local,b.local", "--ndots", "5", "--out", "-"])
        spec = agent.probe_spec(args)
        assert (spec.host, spec.port) == ("resolv.conf", 53)
        assert spec.dns == DnsOptions(name="kubernetes.default", search=("a.local", "b.local"), ndots=5)
    again = agent._parser().parse_args(["probe", "dns", "--target", "x:1", "--out", "-", *spec.dns.cli_args()])
    assert agent.probe_spec(again).dns == spec.dns          # what a provider passes is what the agent gets


def test_dns_options_of_other_probes_are_refused(capsys):
    assert agent.main(["probe", "udp", "--target", "127.0.0.1:9", "--name", "x", "--out", "-"]) == agent.EXIT_USAGE
    assert "dns probe only" in capsys.readouterr().err
