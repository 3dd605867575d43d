"""Fixtures of the DNS gate (netslo/gate/test_dns.py): which DNS server the lookups ask, and the
scenarios measured against it.

Import the fixtures you use into a test module (``from netslo.gate.plugin.dns import ...``)."""

from __future__ import annotations

import dataclasses

import pytest

from netslo.core.errors import Unsupported
from netslo.gate.plugin.gate import skip_unsupported
from netslo.gate.plugin.protocols import with_sampling
from netslo.slo import runner
from netslo.studies import dns


@dataclasses.dataclass(frozen=True)
class DnsServer:
    """Where the lookups go: the emulated responder in the responder pod (embedded provider) or the
    cluster's DNS named in each client pod's /etc/resolv.conf (``cluster_dns``)."""

    pod: object
    ports: dict
    cluster_dns: bool
    endpoints: str = ""      # the cluster DNS Service's endpoints when the wait for them ended

    def describe(self) -> str:
        if self.cluster_dns:
            return ("DNS server: the cluster's DNS from the client pod's /etc/resolv.conf (CoreDNS/kube-dns Service"
                    + (f"; {self.endpoints}" if self.endpoints else "") + ")")
        return (f"DNS server: emulated authoritative responder (netslo.traffic.responders.dns) in pod {self.pod.name} on "
                f"{self.pod.node}, not CoreDNS")


@pytest.fixture(scope="session")
def netslo_dns_server(netslo_cluster, netslo_responder):
    """The session's ``DnsServer``: the embedded provider starts the emulated responder beside the
    other responders; every other provider asks the cluster's own DNS."""
    pod, _ports = netslo_responder
    if netslo_cluster.provider != "netns":
        endpoints = None
        if hasattr(netslo_cluster, "await_cluster_dns"):   # a new cluster's CoreDNS starts after its CNI
            endpoints = netslo_cluster.await_cluster_dns()
        return DnsServer(pod, {}, cluster_dns=True, endpoints=endpoints or "")
    try:
        return DnsServer(pod, netslo_cluster.start_responders(pod, ("dns",)), cluster_dns=False)
    except Unsupported as e:
        skip_unsupported(e)


@pytest.fixture(scope="session")
def netslo_dns_measure(netslo_cluster, netslo_client_for, netslo_dns_server, netslo_slo):
    """measure(scenario, count, max_count) -> runner.Outcome of a ``DnsScenario`` against the
    session's DNS server (``cluster_dns`` set to match it), the server named in the outcome's notes.
    Against a cluster's DNS each client pod first waits for the path to settle (``dns.settle``, once
    per pod); what that saw is in the notes of the outcomes measured from that pod."""
    settled: dict[str, str] = {}

    def get(scenario, count: int, max_count: int | None = None):
        scenario = dataclasses.replace(scenario, cluster_dns=netslo_dns_server.cluster_dns)
        client, server, ports = netslo_client_for(scenario.placement), netslo_dns_server.pod, netslo_dns_server.ports
        spec = with_sampling(netslo_slo, count, max_count)
        try:
            gated = spec.thresholds_for({**scenario.labels(), "datapath": netslo_cluster.datapath})
            if netslo_dns_server.cluster_dns and gated and client.name not in settled:   # (else: runner says why)
                settled[client.name] = dns.settle(netslo_cluster, client, server, ports, scenario, spec.sampling)
            out = runner.run(netslo_cluster, client, server, ports, scenario, spec)
        except Unsupported as e:
            skip_unsupported(e)
        out.notes.append(netslo_dns_server.describe())
        if client.name in settled:
            out.notes.append(settled[client.name])
        return out

    return get
