"""Every node pair of the cluster (``--netslo-mesh``): measured in rounds of disjoint pairs and judged
per pair (Holm over every pair check), per zone and pool pair and over pairs (``mesh.*``) by the SLO
file's objectives. It passes only when every check passed; a failure names the nodes that explain
the failing pairs (one slow node reads as that node), then the pairs left; undecided pairs fail it
too. Without the option it is deselected."""

from __future__ import annotations

import pytest

from netslo.report import mesh as mesh_report

pytestmark = [pytest.mark.cni, pytest.mark.slow]


def test_mesh_meets_objectives(netslo_mesh):
    lines = [mesh_report.headline(netslo_mesh), *mesh_report.finding_lines(netslo_mesh)]
    if netslo_mesh.verdict != "pass":
        pytest.fail("\n".join(lines), pytrace=False)
    print("\n".join(lines))
