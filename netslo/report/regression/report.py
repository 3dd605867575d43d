"""A whole comparison of a run with its baseline: every test x metric, Holm over the family,
host-noise and re-measurement verdicts, and what it writes (regression.json, regression.md)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from netslo.report import run_spread
from netslo.report.regression.blocks import block_requests
from netslo.report.regression.canaries import explained_by_host, host_noise, index_canary, spread_canary
from netslo.report.regression.comparison import compare_index, compare_metric, compare_spread, holm
from netslo.report.regression.decision import (
    HOST_NOISE,
    IMPROVED,
    INSUFFICIENT,
    NOT_CONFIRMED,
    REGRESSED,
    SPREAD,
    Policy,
)
from netslo.report.regression.definitions import Definitions
from netslo.report.regression.runs import Run
from netslo.report.series import series, split_metric


@dataclass
class Report:
    policy: Policy
    comparisons: list
    baseline: Run
    current: Run
    baseline_label: str = ""
    only_baseline: list = field(default_factory=list)   # tests missing from the current run
    only_current: list = field(default_factory=list)    # new tests (no baseline)
    rerun: Run | None = None                            # re-measured tests (see confirm())
    excused: dict = field(default_factory=dict)         # missing test -> why that is on purpose
    definitions: dict = field(default_factory=dict)     # test -> timestamps differ: converted/refused metrics

    @property
    def missing(self) -> list:
        """Baseline tests absent from this run without a reason (deselected or a declared skip):
        they fail the regression check, since a test that stopped measuring cannot regress."""
        return [t for t in self.only_baseline if t not in self.excused]

    @property
    def regressions(self) -> list:
        return [c for c in self.comparisons if c.verdict == REGRESSED]

    @property
    def failed(self) -> bool:
        return bool(self.regressions or self.missing)

    def environment_changes(self) -> list[str]:
        """Keys whose value differs between the baseline runs and the current run (run ids ignored)."""
        if not self.current.environment:
            return []
        cur = self.current.environment[-1]
        out = []
        for key in sorted(set(cur) - {"run_id"}):
            seen = {e.get(key) for e in self.baseline.environment}
            if seen and seen != {cur[key]}:
                out.append(f"{key}: baseline {', '.join(sorted(map(str, seen)))} → current {cur[key]}")
        return out

    def to_json(self) -> dict:
        def clean(x):
            if isinstance(x, float) and not math.isfinite(x):
                return None
            return x
        return {
            "schema": 1,
            "verdict": ("regression" if self.regressions else "missing tests") if self.failed else "no regression",
            "policy": {**asdict(self.policy), "metrics": list(self.policy.metrics)},
            "baseline": {"sources": self.baseline.sources, "runs": self.baseline.sessions},
            "current": {"sources": self.current.sources},
            "environment_changes": self.environment_changes(),
            "regressions": [{"test": c.test, "metric": c.metric} for c in self.regressions],
            "comparisons": [{k: clean(v) for k, v in asdict(c).items()} for c in self.comparisons],
            "only_baseline": self.only_baseline,
            "missing": self.missing,
            "excused": self.excused,
            "only_current": self.only_current,
            "timestamps_differ": self.definitions,
            "rerun": sorted(self.rerun.samples) if self.rerun else [],
        }

    def to_markdown(self) -> str:
        """regression.md: verdict, the regressions table, then every comparison (for $GITHUB_STEP_SUMMARY)."""
        from netslo.report.regression.markdown import markdown
        return markdown(self)

    def write(self, directory) -> tuple[Path, Path]:
        """Write regression.json and regression.md into ``directory``; returns both paths."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        j, m = d / "regression.json", d / "regression.md"
        j.write_text(json.dumps(self.to_json(), indent=1))
        m.write_text(self.to_markdown())
        return j, m


def compare(baseline: Run, current: Run, policy: Policy = Policy(), baseline_label: str = "") -> Report:
    """Every metric of every test found in both runs (plus the gate index when the baseline has
    enough runs); Holm over all comparisons with enough data. A test whose baseline was recorded
    at other clock points (``timestamps``) compares rtt and ipdv as rtt_app and ipdv_app and
    refuses the one-way series (``definitions``); the report says which."""
    rng = np.random.default_rng(policy.seed)
    comps = []
    common = [t for t in current.samples if t in baseline.samples]
    family_bound = (len(common) + 1) * len(policy.metrics)
    boot = replace(policy, n_boot=max(policy.n_boot, math.ceil(2 * family_bound / policy.alpha)))
    noisy, timers, sides, ratios, notes = {}, {}, {}, {}, {}
    spread_series: dict = {m: {} for m in policy.metrics}   # metric -> {test: (base parts, cur parts)}
    for test in common:
        timers[test] = ([series(s, "timer_error") for s in baseline.samples[test]],
                        [series(s, "timer_error") for s in current.samples[test]])
        spread = len(baseline.samples[test]) >= policy.spread_min_runs
        canary = (spread_canary(*timers[test]) if spread else host_noise(*timers[test], policy))
        noisy[test], ratios[test] = canary["noisier"], canary.get("ratio", 1.0)
        block = block_requests(baseline.samples[test] + current.samples[test], policy.block_s)
        cache, defs, converted, refused = {}, Definitions.of(baseline.samples[test], current.samples[test]), [], []
        for metric in policy.metrics:
            asked, _ = split_metric(metric)
            name = defs.series_name(asked)
            if name is None:
                refused.append(metric)
                continue
            if name != asked:
                converted.append(metric)
            if name not in cache:
                cache[name] = ([series(s, name) for s in baseline.samples[test]],
                               [series(s, name) for s in current.samples[test]])
            b, c = cache[name]
            if not sum(map(len, b)) and not sum(map(len, c)):
                continue   # series not measurable here (e.g. one-way delay without a shared clock)
            if spread:
                comp = compare_spread(test, metric, b, c, policy)
                if comp.verdict != INSUFFICIENT:
                    spread_series[metric][test] = (b, c)
            else:
                comp = compare_metric(test, metric, b, c, boot, rng, block, sides)
            comp.timer_p50, comp.timer_p99 = canary["p50"], canary["p99"]
            comps.append(comp)
        sides.clear()
        if defs.differ:
            notes[test] = defs.note(converted, refused)
    if policy.gate_index:
        for metric, per_test in spread_series.items():
            comp = compare_index(metric, per_test, current, baseline, policy)
            if comp is not None:
                canary = index_canary({t: timers[t] for t in per_test}, baseline, sorted(per_test))
                noisy[comp.test], ratios[comp.test] = canary["noisier"], canary["ratio"]
                comp.timer_p50, comp.timer_p99 = canary.get("p50", comp.timer_p50), canary.get("p99", comp.timer_p99)
                comps.append(comp)
                if canary["noisier"]:   # the whole run was busier: every test of the index may be
                    for t in per_test:
                        noisy[t], ratios[t] = True, max(ratios[t], canary["ratio"])
    family = [c for c in comps if c.verdict != INSUFFICIENT]
    index = [c for c in family if c.test.startswith(run_spread.INDEX_TEST)]
    tests = [c for c in family if not c.test.startswith(run_spread.INDEX_TEST)]
    alpha = policy.alpha / 2 if index else policy.alpha      # Bonferroni split: per-test | index
    for part in (tests, index):
        for c, p in zip(part, holm([c.p for c in part])):
            c.p_adj = min(1.0, p * policy.alpha / alpha)     # comparable with policy.alpha
            if c.prediction is not None:
                c.flag_above = c.prediction.flag_above(c.allowed, alpha / len(part))
    for c in family:
        p = c.p_adj
        if p < policy.alpha:
            if c.mode == SPREAD:   # up to the timer error's own growth factor above the band: the host
                band_hi = c.current - c.delta_lo
                explained = split_metric(c.metric)[1] is not None and c.current <= band_hi * ratios[c.test]
            else:
                explained = explained_by_host(c, timers[c.test])
            c.verdict = HOST_NOISE if (policy.noise_guard and noisy[c.test] and explained) else REGRESSED
        elif math.isfinite(c.delta_hi) and c.delta_hi < -policy.allowed_drop(c.metric, c.baseline, c.mode):
            c.verdict = IMPROVED
    return Report(policy, comps, baseline, current, baseline_label,
                  only_baseline=sorted(set(baseline.samples) - set(current.samples)),
                  only_current=sorted(set(current.samples) - set(baseline.samples)), definitions=notes)


def suspected(report: Report) -> list[str]:
    """Tests with any comparison at raw p < alpha: the ones worth re-measuring before the verdict
    (a superset of the regressions, whose Holm-adjusted p is never below the raw p)."""
    return sorted({c.test for c in report.comparisons if c.verdict != INSUFFICIENT and c.p < report.policy.alpha
                   and not c.test.startswith(run_spread.INDEX_TEST)})


def confirm(report: Report, rerun: Run) -> Report:
    """``report`` where a regression of a test that was measured again (``rerun``: test -> fresh
    samples, taken in the same session) stands only if the same comparison, with the fresh samples
    in place of the first ones, is a regression too; otherwise its verdict is NOT_CONFIRMED.

    A host that is slow for a few seconds rarely is again when the test is repeated, while a real
    regression is: a false alarm needs two independent flukes. Gate-index rows are re-judged the same
    way when any of their tests was re-measured."""
    if not rerun.samples or not report.failed:
        return replace(report, rerun=rerun if rerun.samples else None)
    second = Run(environment=report.current.environment, sources=report.current.sources)
    for test, parts in report.current.samples.items():
        for s in rerun.samples.get(test, parts):
            second.add(test, s)
    again = {(c.test, c.metric): c for c in compare(report.baseline, second, report.policy,
                                                    report.baseline_label).comparisons}
    comps = []
    for c in report.comparisons:
        index_row = c.test.startswith(run_spread.INDEX_TEST)
        if c.verdict == REGRESSED and (c.test in rerun.samples or index_row):
            c2 = again.get((c.test, c.metric))
            c = replace(c, confirm=(c2.current, c2.p_adj) if c2 else None,
                        verdict=REGRESSED if c2 is not None and c2.verdict == REGRESSED else NOT_CONFIRMED)
        comps.append(c)
    return replace(report, comparisons=comps, rerun=rerun)
