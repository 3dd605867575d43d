"""DNS scenarios: lookups of one name from a client pod, judged by the dns.* metrics.

On the embedded provider the server is the emulated responder (``netslo.traffic.responders.dns``) in the
responder pod; on a real cluster (``cluster_dns``) the probe reads the client pod's /etc/resolv.conf
and asks its nameserver (CoreDNS behind the kube-dns Service) with the pod's own search list and ndots.
"""

from __future__ import annotations

from dataclasses import dataclass

from netslo.core.errors import SpecError
from netslo.slo.scenario import PLACEMENTS, Scenario
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
