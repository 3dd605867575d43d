"""B against A (``--netslo-compare=SPEC``): each scenario measured on both clusters in interleaved,
randomized pairs of blocks and judged by the SLO file's ``compare:`` margins (non-inferiority, Holm
over every check). A scenario passes only when every margin passed and B met its absolute
thresholds; **fail** and **undecided** (not decided within the pairs allowed) both fail the test,
with B/A and its CI per metric. Without the option these tests are deselected."""

from __future__ import annotations

import pytest

from netslo.gate.plugin.compare import COMPARED, attach
from netslo.report import compare as compare_report
from netslo.studies import compare

pytestmark = [pytest.mark.cni, pytest.mark.slow]


@pytest.mark.parametrize(COMPARED, compare.SCENARIOS, ids=lambda s: s.id)
def test_b_is_no_worse_than_a(netslo_comparison, compared, pytestconfig):
    sc = next(s for s in netslo_comparison.scenarios if s.scenario.id == compared.id)
    attach(pytestconfig, netslo_comparison, sc)
    lines = compare_report.scenario_lines(sc)
    header = (f"{compared.id}: {sc.verdict} after {len(sc.pairs)} pairs — A: {netslo_comparison.a.describe()}; "
              f"B: {netslo_comparison.b.describe()}")
    if compared.id in netslo_comparison.stopped:
        header += " (not measured further: another check had already failed the comparison)"
    if sc.verdict != "pass":
        pytest.fail("\n".join([header, *lines]), pytrace=False)
    print("\n".join([header, *lines]))
