"""DNS scenarios: lookups of one name from a client pod, judged by the dns.* metrics.

On the embedded provider the server is the emulated responder (``netslo.traffic.responders.dns``) in the
responder pod; on a real cluster (``cluster_dns``) the probe reads the client pod's /etc/resolv.conf
and asks its nameserver (CoreDNS behind the kube-dns Service) with the pod's own search list and ndots.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from netslo.core.errors import SpecError
from netslo.providers.base import Cluster, Pod
from netslo.slo.runner import probe_spec
from netslo.slo.scenario import PLACEMENTS, Scenario
from netslo.slo.spec import Sampling
from netslo.stats.dns import retried
from netslo.traffic.probes.dns import DNS_PORT, RESOLV_CONF, DnsOptions

CASES = ("lookup", "search")


@dataclass(frozen=True)
class DnsScenario(Scenario):
    """``case`` names the lookup (SLO selectors see it as the profile); ``dns`` what it asks."""

    protocol: str = "dns"
    profile: str = "lookup"
    dns: DnsOptions = DnsOptions()
    cluster_dns: bool = False

    def __post_init__(self):
        if self.placement not in PLACEMENTS:
            raise SpecError("scenario.placement", self.placement, f"one of {', '.join(PLACEMENTS)}")
        if self.protocol != "dns":
            raise SpecError("scenario.protocol", self.protocol, "dns")
        if self.profile not in CASES:
            raise SpecError("scenario.profile", self.profile, f"one of {', '.join(CASES)} for dns")
        self.dns.check("scenario.dns.")

    @property
    def sizes(self) -> tuple[int, int]:
        return (0, 0)

    def probe_fields(self) -> dict:
        if self.cluster_dns:
            return {"dns": self.dns, "host": RESOLV_CONF, "port": DNS_PORT}
        return {"dns": self.dns}


SETTLE_LOOKUPS = 50      # settle: lookups in one check run (4 ms apart in the gate: 0.2 s of sending)
SETTLE_LIMIT_S = 60.0    # ... and how long it tries for one clean run


def clean_lookups(samples) -> tuple[int, int]:
    """(lookups answered with no query send expired, lookups) of a DNS probe's samples; rows that do
    not record their timeouts count as not clean."""
    n = len(samples)
    expired = retried(samples.meta.get("per_row", {}), n)
    if expired is None:
        return 0, n
    return int(np.count_nonzero((samples.column("recv_ns") >= 0) & ~expired)), n


def settle(cluster: Cluster, client: Pod, server: Pod, ports: dict, scenario: DnsScenario,
           sampling: Sampling, limit: float = SETTLE_LIMIT_S, clock=time.monotonic) -> str:
    """Short runs of the scenario's own lookups (``SETTLE_LOOKUPS``, not judged) from ``client`` until
    one has every lookup answered at its first send, for at most ``limit`` s: the readiness of the
    path to a new cluster's DNS, which converges after its endpoints report ready (the routes to the
    CoreDNS pods' nodes, the Service's rules on the client's node). A path that does not converge is
    measured anyway and its retries judged: a cluster that never serves cleanly is a finding. What it
    saw, for the notes."""
    spec = probe_spec(scenario, server, ports, sampling, SETTLE_LOOKUPS)
    t0, runs = clock(), 0
    while True:
        ran = cluster.probe(client, spec)
        runs += 1
        clean, n = clean_lookups(ran)
        took = clock() - t0
        if n and clean == n:
            return (f"cluster DNS path settled: run {runs} of {n} lookups all answered at the first send "
                    f"({took:.1f} s of checks)")
        if took >= limit:
            return (f"cluster DNS path did not settle: {runs} check runs in {took:.1f} s, the last with "
                    f"{n - clean} of {n} lookups retried or unanswered")
