"""What the change-study gate modules (test_policy, test_service_programming) share: their thresholds."""

from __future__ import annotations

from netslo.errors import SpecError
from netslo.plugin.gate import skip


def study_thresholds(slo, cluster, labels: dict, wanted: str) -> list:
    """The thresholds of a change study. None on the embedded provider: a SpecError (a study nobody
    set an objective for must not pass silently); none on a real cluster: a 'provider' skip, because
    the shipped SLO file sets these objectives for the embedded datapaths only (real CNIs not yet
    measured by this project: add an objective selecting your datapath to run the study)."""
    found = slo.thresholds_for({**labels, "datapath": cluster.datapath})
    if found:
        return found
    if cluster.emulated:
        raise SpecError(f"{slo.source}: objectives", labels["study"], f"an objective with {wanted} thresholds")
    skip("provider", f"no objective with {wanted} thresholds selects datapath {cluster.datapath} in {slo.source} "
                     f"(the shipped file has them for the embedded datapaths only)")
