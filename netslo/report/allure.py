"""Allure results for SLO tests: labels, severity, parameters, attachments, and the per-run files
(``environment.properties``, ``categories.json``, ``executor.json``) of an alluredir.

Label scheme: epic = provider/CNI (or netns datapath), feature = protocol, story = scenario id,
tags = datapath, placement, profile, impairment. Values that change from run to run (sample count,
batches, run id, kernel, duration) are ``excluded`` parameters so Allure's history id stays stable;
provider and datapath are included, so the same test on another datapath has its own history.
"""

from __future__ import annotations

import html
import json
import math
import os
import platform
from importlib import metadata
from pathlib import Path

from netslo import __version__
from netslo.core import evidence, units
from netslo.core.phase_times import timed_call
from netslo.report import plots
from netslo.report.series import received, rtt_by_seq, series, split_metric
from netslo.slo.spec import FAIL, PASS
from netslo.stats.samples import timestamps, timestamps_missing

SEVERITIES = ("blocker", "critical", "normal", "minor", "trivial")
PACKAGES = ("pytest", "allure-pytest", "numpy", "scipy", "matplotlib", "pyroute2", "pytest-benchmark")

# Ordered: Allure puts a result in the first category whose statuses and regexes match.
CATEGORIES = [
    {"name": "Impairment not realized", "matchedStatuses": ["broken", "failed"],
     "messageRegex": "(?s).*[Ii]mpairment not realized.*",
     "description": "netem/shaping was applied but the measured impairment is off beyond tolerance: "
                    "no SLO was judged"},
    {"name": "Infrastructure", "matchedStatuses": ["broken"],
     "messageRegex": "(?s).*(InfrastructureError|infrastructure error|could not keep its schedule|"
                     "TimeoutExpired|CalledProcessError|PermissionError).*",
     "description": "the cluster, a pod, an agent or the host failed; not an SLO verdict"},
    {"name": "SLO breach", "matchedStatuses": ["failed"], "messageRegex": "(?s).*SLO breach.*",
     "description": "a statistic's whole confidence interval (or, at max samples, its point estimate) "
                    "is above the threshold"},
    {"name": "Not enough samples", "matchedStatuses": ["broken"], "messageRegex": "(?s).*not enough samples.*",
     "description": "a check whose confidence interval too few answered samples could not bound: not judged, "
                    "the gate fails"},
    {"name": "Other test errors", "matchedStatuses": ["broken"],
     "description": "an unexpected exception in netslo or the test itself"},
]


# ---- labels ------------------------------------------------------------------------------------

def _short(value: str) -> str:
    """'bridge (kindnet/host-gw-like)' -> 'bridge'."""
    return str(value).split(" ")[0] if value else ""


def labels(scenario, environment: dict) -> dict:
    """epic/feature/story/tags of one scenario on one cluster (values are strings / lists)."""
    env = environment or {}
    provider = _short(env.get("provider", "")) or "?"
    network = env.get("cni") or _short(env.get("datapath", "")) or "?"
    impairment = getattr(scenario, "impairment", None) or env.get("impairment")
    tags = [f"datapath:{network}", f"placement:{scenario.placement}", f"profile:{scenario.profile}",
            f"impairment:{impairment or 'none'}", f"family:{getattr(scenario, 'family', 'ipv4')}"]
    if env.get("emulated") == "yes":
        tags.append("emulated")
    return {"epic": f"{provider}/{network}", "feature": scenario.protocol, "story": scenario.id, "tags": tags}


def severity(checks, overrides: dict | None = None) -> str:
    """Allure severity from the SLO tier of the test's objectives.

    ``overrides`` maps objective name -> severity (``--netslo-allure-severity``); an objective object with a
    ``tier`` attribute is honoured too. Otherwise: a gated tail (P99 and above) is critical, any other
    threshold normal, no threshold minor."""
    overrides = overrides or {}
    chosen = []
    for c in checks:
        t = c.threshold
        level = overrides.get(t.objective) or getattr(t, "tier", None)
        if level:
            chosen.append(level)
    if chosen:
        return min(chosen, key=SEVERITIES.index)
    if not checks:
        return "minor"
    tail = any((split_metric(c.threshold.metric)[1] or 0) >= 99 for c in checks)
    return "critical" if tail else "normal"


def parameters(outcome, environment: dict) -> list[tuple[str, str, bool]]:
    """(name, value, excluded) for allure.dynamic.parameter."""
    env = environment or {}
    return [
        ("provider", _short(env.get("provider", "?")), False),
        ("datapath", env.get("cni") or _short(env.get("datapath", "?")), False),
        # the clock points of rtt/owd (docs/metrics.md): another source is another metric, another history
        ("timestamps", timestamps(outcome.samples.meta), False),
        ("kernel stamps missing", str(timestamps_missing(outcome.samples.meta)), True),
        ("samples", str(len(outcome.samples)), True),
        ("batches", str(outcome.batches), True),
        ("run id", str(env.get("run_id", "?")), True),
        ("kernel", str(env.get("kernel", "?")), True),
        ("measured in", f"{outcome.seconds:.1f} s", True),
    ]


# ---- attachments -------------------------------------------------------------------------------

def _slo_lines(checks, series_name: str) -> list:
    out = []
    for c in checks:
        name, q = split_metric(c.threshold.metric)
        if name == series_name:
            out.append(plots.SloLine(q, c.threshold.limit, f"{c.threshold.metric} ≤ {c.threshold.text}"))
    return out


def _marks(outcome, series_name: str, lines) -> list:
    qs = sorted({s.q for s in lines if s.q is not None} | {50.0, 99.0})
    out = []
    for q in qs:
        e = outcome.analysis.metrics.get(f"{series_name}.p{q:g}")
        if e is not None and math.isfinite(e.value):
            out.append(plots.Mark(q, e.value, e.lo, e.hi))
    return out


def plots_of(outcome) -> list[tuple[str, plots.Plot]]:
    """(attachment name, plot): an ECDF per gated delay series (RTT always), the RTT
    histogram/box plot, and the RTT time series with losses."""
    sid = outcome.scenario.id
    delays = {name for name, q in map(split_metric, (c.threshold.metric for c in outcome.checks)) if q is not None}
    gated = ["rtt"] + sorted(delays - {"rtt"})
    out = []
    for name in gated:
        values = series(outcome.samples, name)
        lines = _slo_lines(outcome.checks, name)
        label = "RTT" if name == "rtt" else ("|IPDV|" if name.startswith("ipdv") else name)
        out.append((f"ECDF of {label}", plots.Plot("ecdf", (values,), dict(
            title=f"{sid}: ECDF of {label} (n={len(values)})", slo=lines,
            marks=_marks(outcome, name, lines), xlabel=f"{label} (ms)"))))
    rtt_lines = _slo_lines(outcome.checks, "rtt")
    rtt = series(outcome.samples, "rtt")
    out.append(("RTT histogram and box plot", plots.Plot("distribution", (rtt,), dict(
        title=f"{sid}: RTT distribution", slo=rtt_lines, xlabel="RTT (ms)"))))
    r = outcome.samples.rows
    got = received(outcome.samples)
    t = (r["sched_ns"] - (r["sched_ns"].min() if len(r) else 0)) * 1e-9
    out.append(("RTT time series", plots.Plot("timeseries", (t[got], rtt_by_seq(outcome.samples)[got], t[~got]), dict(
        title=f"{sid}: RTT per request, losses marked", slo=rtt_lines))))
    return out


def figures(outcome) -> list[tuple[str, bytes]]:
    """(attachment name, PNG bytes) of every plot of ``plots_of``, rendered now."""
    return [(name, plots.render(plot)) for name, plot in plots_of(outcome)]


def _fmt(value, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return units.format_percent(value) if unit == "1" else units.format_duration(value)


def stats_table_html(outcome) -> str:
    """A standalone HTML page: every statistic with its CI, n, and threshold/verdict where gated."""
    by_metric = {c.threshold.metric: c for c in outcome.checks}
    conf = getattr(outcome.analysis, "confidence", None)
    rows = []
    order = list(by_metric) + [m for m in outcome.analysis.metrics if m not in by_metric]
    for m in order:
        e = outcome.analysis.metrics.get(m)
        if e is None:
            continue
        c = by_metric.get(m)
        verdict = "" if c is None else c.verdict + (" (point estimate)" if c.by_point else "")
        cls = "" if c is None else ("pass" if c.verdict == PASS else "fail" if c.verdict == FAIL else "inc")
        rows.append(
            f"<tr class='{cls}'><td>{html.escape(m)}</td><td>{_fmt(e.value, e.unit)}</td>"
            f"<td>{_fmt(e.lo, e.unit)} – {_fmt(e.hi, e.unit)}</td><td>{e.n}</td>"
            f"<td>{html.escape(c.threshold.text) if c else ''}</td><td>{html.escape(c.threshold.objective) if c else ''}</td>"
            f"<td>{html.escape(verdict)}</td></tr>")
    counts = ", ".join(f"{k}={v}" for k, v in outcome.analysis.counts.items())
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(outcome.scenario.id)} statistics</title>
<style>body{{font:13px sans-serif;margin:12px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}tr.pass td{{background:#eaf7ea}}
tr.fail td{{background:#fbe3e3}}tr.inc td{{background:#fff6d9}}</style>
</head><body><h3>{html.escape(outcome.scenario.id)}: {html.escape(outcome.verdict.upper())}</h3>
<p>Delays from raw samples; percentiles by nearest rank; CI = distribution-free order-statistic interval
({'%g%%' % (conf * 100) if conf else 'SLO file confidence'}); loss-like fractions with Clopper–Pearson CIs.
Counts: {html.escape(counts)}.</p>
<table><thead><tr><th>statistic</th><th>value</th><th>CI</th><th>n</th><th>threshold</th><th>objective</th><th>verdict</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table></body></html>"""


@timed_call("reports")
def attach_outcome(outcome, environment: dict, severity_overrides: dict | None = None, later=None) -> None:
    """Labels, severity, parameters, description and every attachment of one judged scenario;
    call while the test's Allure result is open (during its call phase report). ``later``: a
    ``render_worker.DeferredPlots`` that renders the plots off the measurement path (None: now)."""
    import allure
    apply_labels(outcome.scenario, environment)
    allure.dynamic.severity(severity(outcome.checks, severity_overrides))
    for name, value, excluded in parameters(outcome, environment):
        allure.dynamic.parameter(name, value, excluded=excluded or None)
    allure.dynamic.description_html(
        f"<p><b>{html.escape(outcome.verdict.upper())}</b> — " + "<br>".join(html.escape(c.line()) for c in outcome.checks)
        + "</p><p>Plots, raw samples (CSV) and the full statistics table are attached.</p>")
    attach_files(outcome, later=later)


def attach_files(outcome, prefix: str = "", later=None) -> None:
    """The plots, the statistics table and the raw CSV of one outcome (names prefixed with ``prefix``);
    the plots rendered by ``later`` (a ``render_worker.DeferredPlots``) when given, else now."""
    import allure
    for name, plot in plots_of(outcome):
        if later is not None:
            later.attach(prefix + name, plot)
        else:
            allure.attach(plots.render(plot), name=prefix + name, attachment_type=allure.attachment_type.PNG)
    allure.attach(stats_table_html(outcome), name=prefix + "Statistics with CIs and thresholds",
                  attachment_type=allure.attachment_type.HTML)
    allure.attach(outcome.samples.to_csv(), name=f"{prefix}Raw samples ({len(outcome.samples)} requests, ns)",
                  attachment_type=allure.attachment_type.CSV)


def attach_evidence(exc: BaseException | None) -> int:
    """One text attachment per evidence section (``netslo.core.evidence``) that ``exc`` or an exception it
    was raised from carries, named 'evidence: <section>'; returns how many (0: none, nothing done).
    Call while the test's Allure result is open, e.g. from pytest_runtest_makereport."""
    sections = evidence.of(exc)
    if not sections:
        return 0
    import allure
    for name, text in sections.items():
        allure.attach(text, name=f"evidence: {name}", attachment_type=allure.attachment_type.TEXT)
    return len(sections)


def apply_labels(scenario, environment: dict) -> None:
    """epic/feature/story/tags only (also for tests that never got an outcome)."""
    import allure
    lab = labels(scenario, environment)
    allure.dynamic.epic(lab["epic"])
    allure.dynamic.feature(lab["feature"])
    allure.dynamic.story(lab["story"])
    allure.dynamic.tag(*lab["tags"])


# ---- per-run files ----------------------------------------------------------------------------

def _escape_properties(text: str, key: bool = False) -> str:
    """Java .properties escaping (ISO-8859-1 file: everything outside printable ASCII as \\uXXXX)."""
    out = []
    for i, ch in enumerate(str(text)):
        if ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == " " and (key or i == 0):
            out.append("\\ ")
        elif ch == "\n":
            out.append("\\n")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\u{u:04x}" for u in _utf16(ch))
    return "".join(out)


def _utf16(ch: str) -> list[int]:
    b = ch.encode("utf-16-be")
    return [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]


def environment_info(environment: dict, extra: dict | None = None) -> dict:
    """What the Environment widget shows: the cluster's environment plus netslo/Python/package versions."""
    info = {k: str(v) for k, v in (environment or {}).items()}
    info.update({k: str(v) for k, v in (extra or {}).items()})
    info["netslo"] = __version__
    info["python"] = info.get("python") or platform.python_version()
    for pkg in PACKAGES:
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return info


def environment_properties(info: dict) -> str:
    return "".join(f"{_escape_properties(k, key=True)}={_escape_properties(v)}\n" for k, v in info.items())


def categories(declared=()) -> list[dict]:
    """CATEGORIES plus the run's skip categories: skips of a declared category (``netslo.slo.skips``)
    are expected; every other skip fails the gate and gets a category of its own."""
    names = "|".join(sorted(declared)) or "(?!)"
    return CATEGORIES + [
        {"name": "Skipped, declared expected", "matchedStatuses": ["skipped"],
         "messageRegex": rf"(?s).*netslo\[({names})\].*",
         "description": "a capability this run lacks, declared expected (--netslo-allow-skip, allow_skips, "
                        "or the CNI limitation table)"},
        {"name": "Skipped, not declared (gate fails)", "matchedStatuses": ["skipped"],
         "description": "a skip nobody declared expected: the gate is not green"},
    ]


def write_run_files(alluredir, info: dict, declared=()) -> list[Path]:
    """environment.properties, categories.json and (on GitHub Actions) executor.json into ``alluredir``."""
    d = Path(alluredir)
    d.mkdir(parents=True, exist_ok=True)
    written = [d / "environment.properties", d / "categories.json"]
    written[0].write_text(environment_properties(info), encoding="latin-1")
    written[1].write_text(json.dumps(categories(declared), indent=1))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        repo, run = os.environ.get("GITHUB_REPOSITORY", ""), os.environ.get("GITHUB_RUN_ID", "")
        executor = {"name": "GitHub Actions", "type": "github", "buildName": f"{os.environ.get('GITHUB_WORKFLOW', '')} #{run}",
                    "buildUrl": f"{server}/{repo}/actions/runs/{run}", "reportName": "netslo SLO gate"}
        (d / "executor.json").write_text(json.dumps(executor, indent=1))
        written.append(d / "executor.json")
    return written
