"""The parallel A/AAAA lookup and the conntrack race, reproduced on the real kernel in embedded namespaces.

A stub resolver sends A and AAAA back to back from one UDP socket. With conntrack on the path the
two packets can race to insert the same new entry and the loser is dropped (the Kubernetes "DNS
intermittent delays of 5 s"): the lookup then waits for the resolver timeout and resends. Here an
iptables rule in the responder pod drops exactly that packet, deterministically: the AAAA query
(u32 match on QTYPE) that is the second packet of its conntrack entry (connbytes). The resend is
the third and passes, as glibc's does after the race. The probe must report one AAAA timeout and
one retry per lookup, as many as the rule's packet counter dropped, a lookup time of a timeout
plus a round trip, and no failure; without the rule none of it. The race itself needs the entry
unconfirmed (NEW, no answer seen yet): a sequential lookup (``single-request``) never gives it one.
"""

from __future__ import annotations

import contextlib
import subprocess

import pytest

from netslo.core.units import format_percent
from netslo.providers.netns.cluster import NetnsCluster
from netslo.stats.analysis import analyze
from netslo.traffic import dnswire
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.probes.dns import DnsOptions

NAME = "server.netslo.svc.cluster.local"
TIMEOUT_S = 0.5
LOOKUPS = 20


def _qtype_u32(name: str, qtype: int) -> str:
    """An iptables u32 test: the UDP payload is a DNS message about ``name`` of type ``qtype``
    (IP header length from its IHL; QTYPE read as the low 16 bits of the 4 bytes ending at it)."""
    return f"0>>22&0x3C@{8 + dnswire.qtype_offset(name) - 2}&0xFFFF={qtype:#x}"


@pytest.fixture(scope="module")
def dns_pods():
    with NetnsCluster(nodes=2) as c:
        srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        yield c, srv, cli, c.start_responders(srv, ("dns",))["dns"]


def _iptables(ns: str, *args: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "iptables", "-w", *args], check=True,
                          capture_output=True, text=True).stdout


def _dropped(ns: str, chain: str) -> int:
    """Packets the first rule of ``chain`` matched."""
    return int(_iptables(ns, "-L", chain, "-v", "-n", "-x").splitlines()[2].split()[0])


def _lookups(c, cli, srv, port, **opts):
    spec = ProbeSpec("dns", srv.ip, port, count=LOOKUPS, interval=0.01, wait=0.2,
                     dns=DnsOptions(name=NAME, timeout=TIMEOUT_S, **opts))
    return analyze(c.probe(cli, spec))


# what makes the rule drop an AAAA query: the race's outcome (2nd packet of the entry) or its condition (NEW)
SECOND_OF_PAIR = ["-m", "connbytes", "--connbytes", "2:2", "--connbytes-dir", "original", "--connbytes-mode", "packets"]
UNCONFIRMED = ["-m", "conntrack", "--ctstate", "NEW"]


@contextlib.contextmanager
def aaaa_query_drop(dns_pods, match):
    """A rule in the responder pod dropping AAAA queries that also meet ``match``; yields its drop count."""
    c, srv, _cli, port = dns_pods
    ns = c.netns_of(srv)
    rule = ["INPUT", "-p", "udp", "--dport", str(port), *match,
            "-m", "u32", "--u32", _qtype_u32(NAME, dnswire.QTYPE_AAAA), "-j", "DROP"]
    _iptables(ns, "-I", *rule)
    try:
        yield lambda: _dropped(ns, "INPUT")
    finally:
        _iptables(ns, "-D", *rule)


def test_no_rule_no_timeouts(dns_pods):
    c, srv, cli, port = dns_pods
    a = _lookups(c, cli, srv, port)
    assert a.counts["dns_timeouts_a"] == a.counts["dns_timeouts_aaaa"] == a.counts["dns_retried"] == 0
    assert a.metrics["dns.fail"].value == 0 and a.metrics["dns.retry"].value == 0
    assert a.metrics["dns.max"].value < TIMEOUT_S
    assert a.counts["dns_queries"] == 2 * LOOKUPS


def test_lost_aaaa_race_shows_as_retries(dns_pods):
    c, srv, cli, port = dns_pods
    with aaaa_query_drop(dns_pods, SECOND_OF_PAIR) as dropped_count:
        a = _lookups(c, cli, srv, port)
        dropped = dropped_count()
    assert dropped == LOOKUPS                                # the rule hit the first AAAA of every lookup
    assert a.counts["dns_timeouts_aaaa"] == dropped          # ... and the probe saw each of them
    assert a.counts["dns_timeouts_a"] == 0
    assert a.counts["dns_retried"] == LOOKUPS and a.metrics["dns.retry"].value == 1.0
    assert a.metrics["dns.fail"].value == 0                  # the resend got through: slow, not failed
    assert a.metrics["dns.min"].value >= TIMEOUT_S           # every lookup waited out the timeout
    assert a.counts["dns_queries"] == 3 * LOOKUPS


def test_sequential_lookup_avoids_the_race(dns_pods):
    """``single-request``: AAAA leaves after the A answer confirmed the entry, never while it is NEW."""
    c, srv, cli, port = dns_pods
    with aaaa_query_drop(dns_pods, UNCONFIRMED) as dropped_count:
        a = _lookups(c, cli, srv, port, qtypes="sequential")
        assert dropped_count() == 0
    assert a.counts["dns_retried"] == 0 and a.metrics["dns.max"].value < TIMEOUT_S


def test_every_aaaa_answer_lost_costs_all_attempts(dns_pods):
    """AAAA answers dropped at the client: each AAAA send expires (``attempts`` per lookup); the
    lookup still succeeds with its A answer, after attempts x timeout (getaddrinfo's behaviour)."""
    c, srv, cli, port = dns_pods
    ns = c.netns_of(cli)
    rule = ["INPUT", "-p", "udp", "--sport", str(port), "-m", "u32", "--u32",
            _qtype_u32(NAME, dnswire.QTYPE_AAAA), "-j", "DROP"]
    _iptables(ns, "-I", *rule)
    try:
        a = _lookups(c, cli, srv, port, attempts=2)
        dropped = _dropped(ns, "INPUT")
    finally:
        _iptables(ns, "-D", *rule)
    assert dropped == 2 * LOOKUPS == a.counts["dns_timeouts_aaaa"]
    assert a.metrics["dns.fail"].value == 0 and a.metrics["dns.retry"].value == 1.0
    assert a.metrics["dns.min"].value >= 2 * TIMEOUT_S


def test_all_answers_lost_fails_every_lookup(dns_pods):
    c, srv, cli, port = dns_pods
    ns = c.netns_of(cli)
    rule = ["INPUT", "-p", "udp", "--sport", str(port), "-j", "DROP"]
    _iptables(ns, "-I", *rule)
    try:
        a = _lookups(c, cli, srv, port, attempts=1)
    finally:
        _iptables(ns, "-D", *rule)
    assert a.metrics["dns.fail"].value == 1.0
    assert a.counts["dns_rcodes"] == {"TIMEOUT": LOOKUPS}
    assert a.counts["dns_timeouts_a"] == a.counts["dns_timeouts_aaaa"] == LOOKUPS


def test_unknown_name_fails_with_nxdomain(dns_pods):
    c, srv, cli, port = dns_pods
    spec = ProbeSpec("dns", srv.ip, port, count=LOOKUPS, interval=0.005, wait=0.2,
                     dns=DnsOptions(name="missing.netslo", search=("netslo.svc.cluster.local", "cluster.local"),
                                    ndots=5, timeout=TIMEOUT_S))
    s = c.probe(cli, spec)
    a = analyze(s)
    assert a.metrics["dns.fail"].value == 1.0 and a.counts["dns_rcodes"] == {"NXDOMAIN": LOOKUPS}
    assert set(s.meta["per_row"]["dns_names"]) == {3}        # both suffixes, then the name as is
    assert a.counts["dns_queries"] == 6 * LOOKUPS


def test_gate_check_fails_on_the_race(dns_pods):
    """End to end through the runner: the shipped kind of objective (dns.retry, dns.p50) breaks
    under the race, and the message names the metric; without the race it is met."""
    from netslo.slo import runner
    from netslo.slo import spec as slo
    from netslo.studies.dns import DnsScenario
    c, srv, cli, port = dns_pods
    spec = slo.parse({"version": 1, "defaults": {"samples": LOOKUPS, "max_samples": LOOKUPS, "interval": "10ms",
                                                 "wait": "200ms"},
                      "objectives": [{"name": "dns", "select": {"protocol": "dns"},
                                      "thresholds": {"dns.p50": "100ms", "dns.retry": "20%"}}]})
    scenario = DnsScenario("cross-node", dns=DnsOptions(name=NAME, timeout=TIMEOUT_S))
    assert runner.run(c, cli, srv, {"dns": port}, scenario, spec).verdict == slo.PASS
    with aaaa_query_drop(dns_pods, SECOND_OF_PAIR):
        out = runner.run(c, cli, srv, {"dns": port}, scenario, spec)
    assert out.verdict == slo.FAIL
    assert {ch.threshold.metric for ch in out.failed} == {"dns.p50", "dns.retry"}
    # not always 100 %: a lookup whose source port an earlier lookup of this module used within the
    # conntrack timeout finds that entry, its AAAA is not the entry's 2nd packet and is not dropped
    retry = out.analysis.metrics["dns.retry"].value
    assert retry >= 0.5 and f"dns.retry = {format_percent(retry)}" in out.message(), out.message()


def _settle(dns_pods, limit: float) -> str:
    from netslo.slo import spec as slo
    from netslo.studies import dns
    c, srv, cli, port = dns_pods
    scenario = dns.DnsScenario("cross-node", interval=0.004, dns=DnsOptions(name=NAME, timeout=TIMEOUT_S))
    return dns.settle(c, cli, srv, {"dns": port}, scenario, slo.Sampling(wait=0.2), limit=limit)


def test_settle_ends_at_the_first_clean_run(dns_pods):
    assert _settle(dns_pods, limit=10.0).startswith("cluster DNS path settled: run 1 of 50 lookups")


def test_settle_gives_up_on_a_path_that_keeps_retrying(dns_pods):
    """The race on every lookup: no check run is clean; after the limit the note says how the last
    one went (the measurement that follows judges the retries)."""
    with aaaa_query_drop(dns_pods, SECOND_OF_PAIR):
        note = _settle(dns_pods, limit=1.0)
    assert note.startswith("cluster DNS path did not settle:"), note
    retried = int(note.split("the last with ")[1].split(" of ")[0])
    assert retried >= 25, note          # at least half (a reused source port can miss the rule)


def test_settle_waits_for_a_path_that_converges(dns_pods):
    """The race for the first 1.5 s, then a clean path (as a route or rule arriving late): settle
    takes more than one run and ends clean, well before its limit."""
    import threading
    import time
    with contextlib.ExitStack() as stack:
        stack.enter_context(aaaa_query_drop(dns_pods, SECOND_OF_PAIR))
        timer = threading.Timer(1.5, stack.close)
        timer.start()
        t0 = time.monotonic()
        note = _settle(dns_pods, limit=30.0)
        took = time.monotonic() - t0
        timer.join()
    assert note.startswith("cluster DNS path settled: run "), note
    assert int(note.split("run ")[1].split(" ")[0]) > 1 and took >= 1.5, note
