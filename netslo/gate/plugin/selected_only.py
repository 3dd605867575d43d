"""``gate: selected-only`` in the SLO file: the tests no objective selects are not gated.

They are deselected at collection (the parametrized ``scenario``'s labels, or a test's
``slo_labels`` marker, against ``SloSpec.selects``; the datapath is not known yet and taken to
match) and every report lists them as not gated: the terminal summary, results.json and summary.md
(``Tally.not_gated``). One that an objective selects only on another datapath is skipped with the
declared category ``not_gated`` once the cluster is up (``runner.not_gated``). A file that leaves no
SLO test to gate is a usage error, never an empty green gate.
"""

from __future__ import annotations

import pytest

from netslo.gate.plugin.deselection import deselect, scenario_of
from netslo.gate.plugin.gate import TALLY
from netslo.gate.plugin.hooks import OPTIONS
from netslo.slo.spec import GATE_SELECTED_ONLY


def slo_labels(item) -> dict | None:
    """The labels an objective would select ``item`` by, or None for a test without any."""
    scenario = scenario_of(item)
    if scenario is not None and hasattr(scenario, "labels"):
        return scenario.labels()
    marker = item.get_closest_marker("slo_labels")
    return dict(marker.kwargs) if marker is not None else None


@pytest.hookimpl(trylast=True)   # after the other deselections: what is left is what this file gates
def pytest_collection_modifyitems(session, config, items):
    if OPTIONS not in config.stash or config.stash[OPTIONS].slo.gate != GATE_SELECTED_ONLY:
        return
    spec = config.stash[OPTIONS].slo
    labelled = [(i, labels) for i in items if (labels := slo_labels(i)) is not None]
    dropped = [i for i, labels in labelled if not spec.selects(labels)]
    if labelled and len(dropped) == len(labelled):
        names = ", ".join(o.name for o in spec.objectives)
        raise pytest.UsageError(
            f"netslo: {spec.source}: objectives: value {names!r} — expected an objective whose select matches "
            f"one of the {len(labelled)} SLO tests collected (protocol/placement/profile/datapath/family, or a "
            f"study): with gate: {GATE_SELECTED_ONLY} this file gates nothing")
    reason = f"not gated: no objective of {spec.source} selects them (gate: {GATE_SELECTED_ONLY})"
    tally = config.stash.get(TALLY, None)
    if tally is not None:
        tally.not_gated.update({i.nodeid: reason for i in dropped})
    deselect(config, items, dropped, reason)
