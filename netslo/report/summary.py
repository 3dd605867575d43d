"""summary.md: the SLO verdicts of one run as Markdown, for ``$GITHUB_STEP_SUMMARY``.

Built from results.json records (``report.results.outcome_record``): a table per test module, one
row per test and its parameters with its scenario, verdict and each gated statistic as value (CI)
against its threshold (named with its objective when several objectives judge the test).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from netslo.core import units
from netslo.slo.spec import FRACTION_METRICS


def _fmt(value, unit_is_fraction: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if value in ("inf", "-inf"):
        return "∞" if value == "inf" else "−∞"
    return units.format_percent(value) if unit_is_fraction else units.format_duration(value)


def check_cell(check: dict, objective: bool = False) -> str:
    """One check: value (CI) against its threshold; ``objective``: prefixed with the objective's name
    (when more than one objective judges the test, two checks of one metric must say whose they are)."""
    frac = check["metric"] in FRACTION_METRICS
    mark = {"pass": "✅", "fail": "❌"}.get(check["verdict"], "⚠️")
    note = " (point estimate)" if check.get("by_point") else ""
    whose = f"{check['objective']}: " if objective and check.get("objective") else ""
    return (f"{mark} {whose}{check['metric']} {_fmt(check['value'], frac)} "
            f"({_fmt(check['lo'], frac)}–{_fmt(check['hi'], frac)}) ≤ {check['threshold']}{note}")


def checks_cell(checks: list[dict]) -> str:
    """Every check of one record, each naming its objective when there are several."""
    several = len({c.get("objective") for c in checks}) > 1
    return "<br>".join(check_cell(c, several) for c in checks) or "–"


def split_test(test: str) -> tuple[str, str]:
    """('netslo/gate/test_x.py', 'test_f[params]::extra') of a record's test id: its module, and what
    names it there (the test, its parameters — preset, layer, concurrency, family — and the name of
    an extra outcome). A module of an installed package is named from its package
    ('.venv/lib/python3.11/site-packages/netslo/gate/test_x.py' -> 'netslo/gate/test_x.py')."""
    module, sep, rest = test.partition("::")
    return (module.rpartition("site-packages/")[2], rest) if sep else ("", test)


def markdown(records: list[dict], environment: dict, tally=None) -> str:
    """The verdict headline, a table per test module (a row per test and its parameters) and, with
    the session's ``tally``, every test that was not measured and met. "All met" only when nothing
    failed, errored or skipped unexpectedly."""
    failed = [r for r in records if r["verdict"] != "pass"]
    if tally is not None and not tally.green:
        head = tally.headline()
    elif failed:
        head = f"❌ {len(failed)} of {len(records)} SLO tests failed"
    elif tally is not None:
        head = f"✅ all {len(records)} measured SLO scenarios met their SLOs; {tally.headline().removeprefix('✅ ')}"
    else:
        head = f"✅ all {len(records)} SLO tests met their SLOs"
    env = ", ".join(f"{k}={v}" for k, v in environment.items() if k in
                    ("provider", "datapath", "cni", "nodes", "pod_mtu", "kernel", "congestion_control"))
    lines = [f"### netslo SLO gate: {head}", "", f"Environment: {env}", ""]
    modules: dict[str, list[dict]] = {}
    for r in records:
        modules.setdefault(split_test(r.get("test", r["scenario"]))[0], []).append(r)
    for module, rows in modules.items():
        lines += [f"#### `{module}`" if module else "#### tests", "",
                  "| test | scenario | verdict | samples | timestamps | checks (value, 95% CI, threshold) |",
                  "|---|---|---|---:|---|---|"]
        for r in rows:
            name = split_test(r.get("test", r["scenario"]))[1]
            lines.append(f"| `{name}` | `{r['scenario']}` | {'✅ pass' if r['verdict'] == 'pass' else '❌ ' + r['verdict']} | "
                         f"{r['counts']['sent']} | {timestamps_cell(r)} | {checks_cell(r['checks'])} |")
        lines.append("")
    if tally is not None:
        lines.append(tally.markdown())
    return "\n".join(lines)


def timestamps_cell(rec: dict) -> str:
    """The clock points of a record's rtt (docs/metrics.md), with the answers that lacked a kernel stamp."""
    missing = rec.get("timestamps_missing", 0)
    return rec.get("timestamps", "user") + (f" ({missing} stamps missing)" if missing else "")


def terminal_row(rec: dict) -> str:
    """One line of the terminal summary for a results.json record."""
    m = rec["metrics"]

    def fmt(key):
        v = m.get(key, {}).get("value")
        return units.format_duration(v) if isinstance(v, (int, float)) else "-"

    loss = m.get("loss", {}).get("value")
    return (f"{rec['scenario']:<28} {rec['verdict']:<5} rtt p50 {fmt('rtt.p50'):>8} p99 {fmt('rtt.p99'):>8}  "
            f"|ipdv| p99 {fmt('ipdv.p99'):>8}  loss {units.format_percent(loss) if loss is not None else '-':>6}  "
            f"n={rec['counts']['sent']} ts={rec.get('timestamps', 'user')}")


def family_rows(records: list[dict]) -> list[str]:
    """'v4 vs v6' lines: each IPv6 record beside the IPv4 record of the same test and scenario (its
    test id with the scenario id's ``-ipv6`` suffix removed: other tests may measure the same scenario
    under other conditions), rtt p50/p99 of both and the IPv6 excess; [] without such pairs."""
    by_test = {r.get("test"): r for r in records}
    out = []
    for r in records:
        if r.get("labels", {}).get("family") != "ipv6":
            continue
        sid = r["scenario"]
        v4 = by_test.get(str(r.get("test")).replace(sid, sid.removesuffix("-ipv6")))
        if v4 is None:
            continue
        cells = []
        for key in ("rtt.p50", "rtt.p99"):
            a, b = (x["metrics"].get(key, {}).get("value") for x in (v4, r))
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                rel = f" ({(b - a) / a:+.0%})" if a > 0 else ""
                cells.append(f"{key} {units.format_duration(a)} vs {units.format_duration(b)}{rel}")
        out.append(f"ipv4 vs ipv6 {v4['scenario']:<24} " + "  ".join(cells))
    return out


def append_to_step_summary(text: str) -> Path | None:
    """Append ``text`` to the file named by $GITHUB_STEP_SUMMARY, if set."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n\n")
    return Path(target)
