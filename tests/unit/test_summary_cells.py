"""summary.md's check cells print every fraction metric (loss*, dup, reorder, dns.fail, dns.retry) as a
percentage and every delay as a duration: a DNS failure rate once read "0µs (0µs–9.18ms) ≤ 1%"."""

import pytest

from netslo.report.summary import check_cell, markdown
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


def _record(test, scenario, checks):
    return {"test": test, "scenario": scenario, "verdict": "pass", "checks": checks, "counts": {"sent": 400},
            "timestamps": "kernel", "timestamps_missing": 0}


def test_rows_are_unique_per_test_and_parameters_grouped_by_module_naming_objectives_when_several():
    """The impairment presets measure one scenario many times: each row names its test and preset.
    Two objectives gating one metric: each check says whose it is."""
    a = dict(_check("rtt.p50", 87.4e-6, 80e-6, 95e-6, "1ms"), objective="udp-latency")
    b = dict(_check("rtt.p50", 87.4e-6, 80e-6, 95e-6, "200us"), objective="baseline-udp")
    recs = [_record("netslo/gate/test_latency.py::test_latency_slo[cross-node-udp-1k]", "cross-node-udp-1k", [a, b]),
            _record("netslo/gate/test_impairments.py::test_preset_slo[wifi]", "cross-node-udp-1k", [a]),
            _record("netslo/gate/test_impairments.py::test_preset_slo[wired-lan]", "cross-node-udp-1k", [a]),
            _record("tests/test_team_paths.py::test_path[cross-node-udp-1k]", "cross-node-udp-1k", [a])]
    md = markdown(recs, {"provider": "netns"})
    headings = [ln for ln in md.splitlines() if ln.startswith("#### ")]
    assert headings == ["#### `netslo/gate/test_latency.py`", "#### `netslo/gate/test_impairments.py`",
                        "#### `tests/test_team_paths.py`"]
    rows = [ln.split(" | ")[0].removeprefix("| ") for ln in md.splitlines() if ln.startswith("| `")]
    assert rows == ["`test_latency_slo[cross-node-udp-1k]`", "`test_preset_slo[wifi]`", "`test_preset_slo[wired-lan]`",
                    "`test_path[cross-node-udp-1k]`"]
    two = next(ln for ln in md.splitlines() if "test_latency_slo" in ln)
    assert "✅ udp-latency: rtt.p50 87.4µs (80µs–95µs) ≤ 1ms<br>✅ baseline-udp: rtt.p50" in two
    one = next(ln for ln in md.splitlines() if "wired-lan" in ln)
    assert "✅ rtt.p50 87.4µs" in one and "udp-latency:" not in one


def test_an_installed_gate_module_is_headed_by_its_package_path_beside_the_users_own():
    checks = [_check("rtt.p50", 1e-4, 9e-5, 1.1e-4, "1ms")]
    md = markdown([_record(".venv/lib/python3.11/site-packages/netslo/gate/test_latency.py::test_latency_slo[same-node-udp-1k]",
                           "same-node-udp-1k", checks),
                   _record("tests/test_team_paths.py::test_team[a]", "same-node-udp-1k", checks)], {})
    assert "#### `netslo/gate/test_latency.py`" in md and "#### `tests/test_team_paths.py`" in md, md
    assert "site-packages" not in md, md
