"""summary.md's check cells print every fraction metric (loss*, dup, reorder, dns.fail, dns.retry) as a
percentage and every delay as a duration: a DNS failure rate once read "0µs (0µs–9.18ms) ≤ 1%"."""

import pytest

from netslo.report.summary import check_cell
from netslo.slo.spec import FRACTION_METRICS


def _check(metric, value, lo, hi, threshold):
    return {"metric": metric, "value": value, "lo": lo, "hi": hi, "threshold": threshold, "verdict": "pass"}


@pytest.mark.parametrize("metric", FRACTION_METRICS)
def test_fractions_are_percentages(metric):
    cell = check_cell(_check(metric, 0.0, 0.0, 0.00918, "1%"))
    assert cell.startswith(f"✅ {metric} 0") and "%" in cell.split(" ≤ ")[0], cell
    assert "s (" not in cell and "s)" not in cell, cell


def test_delays_are_durations():
    cell = check_cell(_check("dns.p99", 0.00624, 0.00525, 0.0354, "50ms"))
    assert cell == "✅ dns.p99 6.24ms (5.25ms–35.4ms) ≤ 50ms", cell
