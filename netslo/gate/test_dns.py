"""THE GATE, DNS: lookup time, failed and retried lookups from client pods (thresholds: objective
``dns`` of the SLO file, metrics dns.*).

Each lookup asks A and AAAA in parallel over one socket as glibc does; a lookup that had to wait
out a timeout and resend counts in dns.retry, one without an address in dns.fail. The embedded
provider answers from an emulated responder in the responder pod (same-node and cross-node);
a real cluster's pods ask the cluster DNS of their /etc/resolv.conf with their own search list.
"""

from __future__ import annotations

import pytest

from netslo.gate.plugin.dns import netslo_dns_measure, netslo_dns_server  # noqa: F401  (fixtures)
from netslo.gate.plugin.hooks import OUTCOME
from netslo.studies.dns import DnsScenario
from netslo.traffic.probes.dns import DnsOptions

pytestmark = pytest.mark.cni

LOOKUPS, MAX_LOOKUPS = 400, 1200       # P99's CI needs 368 answered lookups at 95 %
INTERVAL_S = 0.004
# the names a pod asks: the full Service name; a short one that ndots:5 expands with the pod's
# search list (in a real cluster the pod's own resolv.conf decides both)
EMBEDDED_SEARCH = ("netslo.svc.cluster.local", "svc.cluster.local", "cluster.local")
SCENARIOS = [
    DnsScenario(placement, interval=INTERVAL_S, dns=DnsOptions(name="server.netslo.svc.cluster.local"))
    for placement in ("same-node", "cross-node")
] + [DnsScenario("cross-node", profile="search", interval=INTERVAL_S,
                 dns=DnsOptions(name="server.netslo", search=EMBEDDED_SEARCH, ndots=5))]
# on a real cluster: the API Service's full name (absolute: the trailing dot skips the pod's ndots:5
# search), and its short name the pod's search list completes on the second suffix
CLUSTER_NAMES = {"lookup": "kubernetes.default.svc.cluster.local.", "search": "kubernetes.default"}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_dns_slo(request, scenario, netslo_dns_measure, netslo_dns_server):  # noqa: F811
    if netslo_dns_server.cluster_dns:   # the cluster's names; search list and ndots from resolv.conf
        scenario = DnsScenario(scenario.placement, profile=scenario.profile, interval=scenario.interval,
                               dns=DnsOptions(name=CLUSTER_NAMES[scenario.profile]))
    out = netslo_dns_measure(scenario, LOOKUPS, MAX_LOOKUPS)
    assert out.checks, f"no SLO objective selects {out.scenario.id}: add one selecting protocol dns"
    request.node.stash[OUTCOME] = out
    out.assert_met()
    per_row = out.samples.meta["per_row"]
    if scenario.profile == "search" and not netslo_dns_server.cluster_dns:   # the first suffix is NXDOMAIN
        assert set(per_row["dns_names"]) == {2}, "search expansion: every lookup should need two names"
