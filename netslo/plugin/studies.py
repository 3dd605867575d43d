"""What the change-study gate modules (test_policy, test_service_programming) share: their thresholds."""

from __future__ import annotations

from netslo.errors import SpecError
from netslo.plugin.gate import skip


def study_thresholds(slo, cluster, labels: dict, wanted: str) -> list:
    """The thresholds of a change study. None on the embedded provider: a SpecError (a study nobody
    set an objective for must not pass silently); none on a real cluster: a 'provider' skip naming the
    datapath (the shipped SLO file gates NetworkPolicy on the CNIs that enforce it, Calico, Cilium and
    Antrea, and Services on every cluster: a user's file decides for its own datapath)."""
    found = slo.thresholds_for({**labels, "datapath": cluster.datapath})
    if found:
        return found
    if cluster.emulated:
        raise SpecError(f"{slo.source}: objectives", labels["study"], f"an objective with {wanted} thresholds")
    skip("provider", f"no objective with {wanted} thresholds selects datapath {cluster.datapath} in {slo.source}")
