"""The netslo reports plugin: Allure results, SLO regression against a baseline, pytest-benchmark
records and the GitHub job summary. Options only; the work is in ``netslo.report``.

  --netslo-baseline PATH             results.json / results dir / dir of past runs -> regression.md + .json;
                              the session fails on a regression (unless --netslo-regression-warn-only)
  --regression-*              the regression policy (metrics, effect floors, alpha, block, resamples)
  --netslo-regression-confirm MODE   'suspect' (default): a test that looks regressed against the baseline is
                              measured once more at once, and the regression must show again;
                              'off' judges the first measurement alone
  --netslo-benchmark[=SERIES] record each SLO test's raw delays (default rtt) as pytest-benchmark data,
                              so --benchmark-save/--benchmark-compare/--benchmark-compare-fail apply
  --netslo-allure-severity OBJ=LEVEL Allure severity per SLO objective (default: tail-gated critical, else normal)
Fixture ``netslo_record_outcome(outcome, name)``: report each extra Outcome of a multi-scenario test.
With --alluredir, every SLO test gets labels, plots, raw CSV and a statistics table, and the run
gets environment.properties and categories.json.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from types import SimpleNamespace

import pytest

from netslo.core.errors import SpecError
from netslo.core.helptext import help_text
from netslo.core.units import format_duration, format_percent
from netslo.gate.plugin.deselection import scenario_of
from netslo.gate.plugin.gate import excused_missing
from netslo.gate.plugin.hooks import GROUP, OPTIONS, OUTCOME, RESULTS, active
from netslo.report import regression as regression_mod
from netslo.report import summary as summary_mod
from netslo.report.series import DELAY_SERIES, series

STATE = pytest.StashKey["ReportState"]()


class ReportState:
    """What this plugin keeps during a session."""

    def __init__(self):
        self.baseline: regression_mod.Run | None = None
        self.baseline_label = ""
        self.policy = regression_mod.Policy()
        self.current = regression_mod.Run()
        self.rerun = regression_mod.Run()     # re-measurements of suspected tests (confirm mode)
        self.confirm = True
        self.report: regression_mod.Report | None = None
        self.written: list = []
        self.environment: dict = {}
        self.severity: dict = {}
        self.bench_series: tuple = ()
        self.plots = None     # render_worker.DeferredPlots of an Allure run, made at its first plot


def _later(config, state: ReportState):
    """The session's deferred plot renderer (Allure on): plots leave the measurement path."""
    if state.plots is None:
        from netslo.report.render_worker import DeferredPlots
        state.plots = DeferredPlots(config.option.allure_report_dir)
    return state.plots


def pytest_addoption(parser):
    g = parser.getgroup(*GROUP)
    g.addoption("--netslo-baseline", default=None, metavar="PATH", type=os.path.expanduser,
                help="compare with a baseline: results.json, a results dir, or a dir of past runs")
    g.addoption("--netslo-regression-metrics", default=None,
                help=f"metrics to compare (default {','.join(regression_mod.DEFAULT_METRICS)})")
    P = regression_mod.Policy
    g.addoption("--netslo-regression-min-effect", default=None,
                help=help_text(f"smallest relative change that counts (default {P.min_effect_rel:.0%}; "
                     f"{P.spread_min_effect_rel:.0%} with a baseline of {P.spread_min_runs}+ runs)"))
    g.addoption("--netslo-regression-min-abs", default=None,
                help=help_text(f"smallest delay change that counts (default {P.min_effect_abs * 1e6:g}us; "
                     f"{P.spread_min_effect_abs * 1e6:g}us with {P.spread_min_runs}+ runs)"))
    g.addoption("--netslo-regression-min-loss", default=None,
                help=help_text(f"smallest loss change that counts (default {P.min_loss_abs:.1%}; "
                     f"{P.spread_min_loss_abs:.1%} with {P.spread_min_runs}+ runs)"))
    g.addoption("--netslo-regression-alpha", default=None,
                help=help_text(f"family-wise error rate, Holm (default {regression_mod.Policy.alpha:.0%})"))
    g.addoption("--netslo-regression-block", default=None,
                help=f"bootstrap block length (default {regression_mod.Policy.block_s * 1e3:g}ms)")
    g.addoption("--netslo-regression-resamples", default=None,
                help=f"bootstrap resamples (default {regression_mod.Policy.n_boot})")
    g.addoption("--netslo-regression-report", default=None, metavar="DIR", type=os.path.expanduser,
                help="where to write regression.md/json (default: the --netslo-results dir)")
    g.addoption("--netslo-regression-confirm", default="suspect", metavar="MODE",
                help="'suspect' (default): re-measure a test that looks regressed and fail only if the "
                     "re-measurement shows it too; 'off': judge the first measurement alone")
    g.addoption("--netslo-regression-warn-only", action="store_true",
                help="report regressions without failing the session")
    g.addoption("--netslo-benchmark", nargs="?", const="rtt", default=None, metavar="SERIES",
                help="record SLO tests' raw delays in pytest-benchmark (comma-separated series, default rtt)")
    g.addoption("--netslo-allure-severity", default=None, metavar="OBJECTIVE=LEVEL,...",
                help="Allure severity per SLO objective (blocker/critical/normal/minor/trivial)")


def _parse_severity(text: str | None) -> dict:
    if not text:
        return {}
    from netslo.report.allure import SEVERITIES  # matplotlib with it: only when the option is given
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, level = part.partition("=")
        if not name or level not in SEVERITIES:
            raise SpecError("--netslo-allure-severity", part, f"OBJECTIVE=LEVEL with LEVEL one of {', '.join(SEVERITIES)}")
        out[name] = level
    return out


def pytest_configure(config):
    if not active(config):
        return
    state = ReportState()
    opt = config.getoption
    try:
        state.policy = regression_mod.policy_from_text(
            opt("--netslo-regression-metrics"), opt("--netslo-regression-min-effect"), opt("--netslo-regression-min-abs"),
            opt("--netslo-regression-min-loss"), opt("--netslo-regression-alpha"), opt("--netslo-regression-block"),
            opt("--netslo-regression-resamples"))
        state.severity = _parse_severity(opt("--netslo-allure-severity"))
        if opt("--netslo-regression-confirm") not in ("suspect", "off"):
            raise SpecError("--netslo-regression-confirm", opt("--netslo-regression-confirm"), "suspect or off")
        state.confirm = opt("--netslo-regression-confirm") == "suspect"
        bench = opt("--netslo-benchmark")
        if bench:
            state.bench_series = tuple(s.strip() for s in bench.split(",") if s.strip())
            bad = [s for s in state.bench_series if s not in DELAY_SERIES]
            if bad:
                raise SpecError("--netslo-benchmark", bad[0], f"comma-separated series of {', '.join(DELAY_SERIES)}")
            if not (config.pluginmanager.hasplugin("benchmark") or config.pluginmanager.hasplugin("pytest_benchmark.plugin")):
                raise SpecError("--netslo-benchmark", bench, "pytest-benchmark installed and enabled")
        if opt("--netslo-baseline"):
            # read now: the current run may overwrite the very directory the baseline lives in
            state.baseline = regression_mod.load(opt("--netslo-baseline"))
            state.baseline_label = opt("--netslo-baseline")
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None
    except FileNotFoundError as e:
        raise pytest.UsageError(f"netslo: {e}") from None
    except (OSError, ValueError, KeyError) as e:
        raise pytest.UsageError(f"netslo: --netslo-baseline: value {opt('--netslo-baseline')!r} — expected readable "
                                f"netslo results ({type(e).__name__}: {e})") from None
    config.stash[STATE] = state


def suspected_regression(config, test_id: str, samples) -> str | None:
    """Why ``test_id`` should be measured again before the regression verdict (its own comparison
    with the baseline has a metric at raw p < alpha), or None (no baseline, confirm off, no suspicion)."""
    state = config.stash.get(STATE, None)
    if state is None or state.baseline is None or not state.confirm or test_id not in state.baseline.samples:
        return None
    one = regression_mod.Run(sources=["current"])
    one.add(test_id, samples)
    rep = regression_mod.compare(state.baseline, one, replace(state.policy, gate_index=False))
    hits = [c for c in rep.comparisons if c.verdict != regression_mod.INSUFFICIENT and c.p < state.policy.alpha]
    return ", ".join(f"{c.metric} p={c.p:.2g}" for c in hits) or None


def record_rerun(item, outcome, why: str) -> None:
    """Keep the re-measurement of a suspected test for the session's regression verdict."""
    state = item.config.stash[STATE]
    state.rerun.add(item.nodeid, outcome.samples)
    item.stash[OUTCOME].notes.append(f"re-measured for the regression check (suspected: {why}); "
                                     f"a regression must show in both measurements")


def _allure_on(config) -> bool:
    return bool(getattr(config.option, "allure_report_dir", None))


def _environment_of(item, outcome) -> dict:
    if outcome is not None:
        return outcome.environment
    cluster = getattr(item, "funcargs", {}).get("netslo_cluster")
    if cluster is not None:
        try:
            return cluster.environment()
        except Exception:   # a half-built cluster: labels fall back to the options
            pass
    o = item.config.stash.get(OPTIONS, None)
    return {"provider": o.provider, "datapath": o.datapath, "nodes": str(o.nodes)} if o else {}


def _record_benchmark(item, outcome, state, suffix: str = "") -> None:
    """One pytest-benchmark entry per series whose 'rounds' are the raw per-request delays (s)."""
    from pytest_benchmark.stats import Metadata
    bs = getattr(item.config, "_benchmarksession", None)
    if bs is None or bs.disabled:
        return
    for name in state.bench_series:
        values = series(outcome.samples, name)
        if not len(values):
            continue
        owner = SimpleNamespace(
            name=f"{item.name}{suffix}::{name}", fullname=f"{item.nodeid}{suffix}::{name}", group=f"netslo {name} (s)",
            param=outcome.scenario.id, params={"scenario": outcome.scenario.id}, cprofile_stats=None,
            has_error=False,
            extra_info={"netslo_series": name, "samples": len(outcome.samples),
                        "p99": float(sorted(values)[max(0, math.ceil(0.99 * len(values)) - 1)])})
        meta = Metadata(owner, iterations=1, options={"netslo_series": name, "unit": "s"})
        for v in values.tolist():
            meta.update(v)
        bs.benchmarks.append(meta)


@pytest.fixture
def netslo_record_outcome(request):
    """For tests that measure several scenarios: ``netslo_record_outcome(outcome, name)`` reports one more
    Outcome under ``<test id>::<name>`` — results.json (so a later --netslo-baseline compares it), this
    run's regression comparison, pytest-benchmark (--netslo-benchmark) and, with --alluredir, an
    Allure step '<name>: <verdict>' holding its plots, statistics table and raw CSV."""
    config = request.config
    state = config.stash[STATE]

    def record(outcome, name: str) -> None:
        test_id = f"{request.node.nodeid}::{name}"
        writer = config.stash.get(RESULTS, None)
        if writer is not None:
            writer.add(test_id, outcome)
        state.current.add(test_id, outcome.samples)
        if not state.environment:
            state.environment = outcome.environment
        if not state.current.environment:
            state.current.environment.append(outcome.environment)
        if state.bench_series:
            _record_benchmark(request.node, outcome, state, suffix=f"::{name}")
        if _allure_on(config):
            import allure

            from netslo.report import allure as allure_mod
            with allure.step(f"{name}: {outcome.verdict}"):
                allure_mod.attach_files(outcome, prefix=f"{name}: ", later=_later(config, state))

    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    state = item.config.stash.get(STATE, None)
    if state is None:
        return
    if call.excinfo is not None and _allure_on(item.config):   # what a person would look at
        from netslo.report import allure as allure_mod
        allure_mod.attach_evidence(call.excinfo.value)
    outcome = item.stash.get(OUTCOME, None)
    scenario = scenario_of(item)
    if report.when == "call" and outcome is not None:
        state.environment = outcome.environment
        state.current.add(item.nodeid, outcome.samples)
        if not state.current.environment:
            state.current.environment.append(outcome.environment)
        if state.bench_series:
            _record_benchmark(item, outcome, state)
        if _allure_on(item.config):
            from netslo.report import allure as allure_mod
            allure_mod.attach_outcome(outcome, outcome.environment, state.severity,
                                      later=_later(item.config, state))
    elif report.when == "setup" and not report.passed and scenario is not None and _allure_on(item.config):
        from netslo.report import allure as allure_mod
        allure_mod.apply_labels(scenario, _environment_of(item, None))


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash.get(STATE, None)
    if state is not None and state.plots is not None:   # the plots the worker has not written yet
        state.plots.close()
    if state is None or getattr(config, "workerinput", None) is not None:
        return
    writer = config.stash.get(RESULTS, None)
    env = state.environment or (writer.environment if writer else {})
    if _allure_on(config):
        from netslo.report import allure as allure_mod
        o = config.stash.get(OPTIONS, None)
        extra = {"slo_file": o.slo.source, "samples_per_batch": o.slo.sampling.samples,
                 "max_samples": o.slo.sampling.max_samples,
                 "confidence": f"{o.slo.sampling.confidence:.0%}"} if o else {}
        if not env and o:
            extra.update({"provider": o.provider, "datapath": o.datapath, "nodes": o.nodes})
        state.written += allure_mod.write_run_files(config.option.allure_report_dir,
                                                    allure_mod.environment_info(env, extra),
                                                    o.allowed_skips if o else ())
    out_dir = config.getoption("--netslo-regression-report") or (writer.dir if writer else "netslo-results")
    tally = getattr(writer, "tally", None)
    tally = tally if tally is not None and tally.entries else None   # no `cni` test in this session
    summary = ""
    if writer and (writer.records or tally):
        summary = summary_mod.markdown(writer.records, env, tally) + "".join("\n" + part for part in writer.summary_parts)
        path = writer.dir / "summary.md"
        writer.dir.mkdir(parents=True, exist_ok=True)
        path.write_text(summary)
        state.written.append(path)
        if state.baseline is None:
            summary_mod.append_to_step_summary(summary)
    if state.baseline is not None:
        state.report = regression_mod.compare(state.baseline, state.current, state.policy, state.baseline_label)
        if state.rerun.samples:
            state.report = regression_mod.confirm(state.report, state.rerun)
        state.report.excused = excused_missing(config, state.report.only_baseline)
        state.written += list(state.report.write(out_dir))
        summary_mod.append_to_step_summary((summary + "\n" if summary else "") + state.report.to_markdown())
        if state.report.failed and not config.getoption("--netslo-regression-warn-only") \
                and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    state = config.stash.get(STATE, None)
    if state is None:
        return
    tr = terminalreporter
    rep = state.report
    if rep is not None:
        tr.section("netslo regression vs baseline")
        noisy = [c for c in rep.comparisons if c.verdict == regression_mod.HOST_NOISE]
        for c in rep.regressions:
            fmt = format_percent if c.unit == "1" else format_duration
            rel = f", {c.rel:+.0%}" if math.isfinite(c.rel) else ""
            tr.write_line(f"REGRESSION {c.test} {c.metric}: {fmt(c.baseline)} -> {fmt(c.current)} "
                          f"(delta {fmt(c.delta)}{rel}; allowed {fmt(c.allowed)}; p={c.p_adj:.2g} Holm)", red=True)
        for c in noisy:
            tr.write_line(f"host noise (not failed) {c.test} {c.metric}: {format_duration(c.baseline)} -> "
                          f"{format_duration(c.current)} while the sender's own timer error P99 went "
                          f"{format_duration(c.timer_p99[0])} -> {format_duration(c.timer_p99[1])}", yellow=True)
        for c in (c for c in rep.comparisons if c.verdict == regression_mod.NOT_CONFIRMED):
            fmt = format_percent if c.unit == "1" else format_duration
            again = fmt(c.confirm[0]) if c.confirm else "?"
            tr.write_line(f"not confirmed (not failed) {c.test} {c.metric}: {fmt(c.baseline)} -> {fmt(c.current)}, "
                          f"re-measured {again}", yellow=True)
        verdict = (f"{len(rep.regressions)} regression(s)" + (" (warn only)" if config.getoption("--netslo-regression-warn-only") else "")
                   if rep.failed else "no regression")
        tr.write_line(f"{verdict} in {len(rep.comparisons)} comparisons against {rep.baseline.sessions} baseline run(s)")
    for p in state.written:
        tr.write_line(f"netslo report: {p}")
