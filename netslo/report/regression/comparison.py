"""One test x metric compared: by block bootstrap (a baseline of one or two runs) or by the
run-to-run spread of the baseline runs, plus the gate index over tests and Holm's adjustment."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from netslo.report import run_spread
from netslo.report.regression.blocks import BlockSide, enough, nearest_rank
from netslo.report.regression.decision import BOOTSTRAP, INSUFFICIENT, SPREAD, UNCHANGED, Policy
from netslo.report.regression.runs import Run
from netslo.report.series import split_metric
from netslo.stats import analysis as stats
from netslo.stats.paired import holm  # noqa: F401  (part of the regression API: reg.holm)


@dataclass
class Comparison:
    """One test x metric. Delays in seconds; ``rel`` = delta / baseline."""

    test: str
    metric: str
    unit: str
    baseline: float
    current: float
    delta: float
    delta_lo: float
    delta_hi: float
    rel: float
    allowed: float
    p: float                  # one-sided bootstrap p of "delta <= allowed"
    p_adj: float = math.nan   # Holm-adjusted over the family
    p_mw: float | None = None  # Mann-Whitney U, one-sided current > baseline (assumes i.i.d.!)
    a12: float | None = None   # P(current sample > baseline sample), 0.5 = no shift
    n_baseline: int = 0
    n_current: int = 0
    runs_baseline: int = 1
    block: int = 0
    timer_p50: tuple = (math.nan, math.nan)   # sender timer error (host contention canary), s,
    timer_p99: tuple = (math.nan, math.nan)   # (baseline, current)
    verdict: str = UNCHANGED
    mode: str = BOOTSTRAP
    flag_above: float = math.nan   # run-spread mode: smallest current value that fails (Bonferroni bound)
    prediction: object = None      # run-spread mode: the run_spread.Prediction behind p (delays)
    confirm: tuple | None = None   # (current, p_adj) of the same comparison on the re-measurement


MW_MAX = 200_000   # Mann-Whitney U (context only) on at most this many values per side (random subset)


def _mann_whitney(cur: np.ndarray, base: np.ndarray, rng) -> tuple[float, float]:
    """One-sided p (current > baseline) and A = P(current > baseline) + P(tie)/2."""
    c = cur if len(cur) <= MW_MAX else rng.choice(cur, MW_MAX, replace=False)
    b = base if len(base) <= MW_MAX else rng.choice(base, MW_MAX, replace=False)
    mw = sps.mannwhitneyu(c, b, alternative="greater", method="asymptotic")
    return float(mw.pvalue), float(mw.statistic / (len(c) * len(b)))


def compare_metric(test: str, metric: str, base_parts: list[np.ndarray], cur_parts: list[np.ndarray],
                   policy: Policy, rng, block: int = 1, sides: dict | None = None) -> Comparison:
    """Compare one metric of one test; ``*_parts`` hold one series per run (schedule order),
    resampled in blocks of ``block`` consecutive values. ``sides`` caches BlockSides by series."""
    name, q = split_metric(metric)
    b_all = np.concatenate(base_parts) if base_parts else np.empty(0)
    c_all = np.concatenate(cur_parts) if cur_parts else np.empty(0)
    unit = "1" if q is None else "s"
    stat = (lambda v: float(v.mean()) if len(v) else math.nan) if q is None else (lambda v: nearest_rank(v, q))
    base, cur = stat(b_all), stat(c_all)
    allowed = policy.allowed(metric, base) if math.isfinite(base) else math.nan
    out = Comparison(test, metric, unit, base, cur, cur - base, math.nan, math.nan,
                     (cur - base) / base if base else math.nan, allowed, math.nan,
                     n_baseline=len(b_all), n_current=len(c_all), runs_baseline=len(base_parts))
    if not (enough(len(b_all), q) and enough(len(c_all), q)):
        out.verdict = INSUFFICIENT
        return out
    sides = {} if sides is None else sides
    key = (test, split_metric(metric)[0], block)
    if key not in sides:
        sides[key] = BlockSide(base_parts, block), BlockSide(cur_parts, block)
    sb, sc = sides[key]
    out.block = max(sb.block, sc.block)
    cb, cc = sb.counts(rng, policy.n_boot), sc.counts(rng, policy.n_boot)
    if q is None:
        d = sc.means(cc) - sb.means(cb)
    else:
        d = sc.quantiles(cc, q) - sb.quantiles(cb, q)
    a = (1.0 - policy.confidence) / 2
    out.delta_lo, out.delta_hi = float(np.quantile(d, a)), float(np.quantile(d, 1 - a))
    out.p = float((1 + np.count_nonzero(d <= allowed)) / (len(d) + 1))
    if q is not None:
        out.p_mw, out.a12 = _mann_whitney(c_all, b_all, rng)
    return out


def run_value(values: np.ndarray, metric: str) -> tuple[float, int, int]:
    """One run's metric value (s; for loss the fraction), plus (lost, n) for loss."""
    _, q = split_metric(metric)
    if q is None:
        return (float(values.mean()) if len(values) else math.nan), int(values.sum()), len(values)
    return (nearest_rank(values, q) if enough(len(values), q) else math.nan), 0, len(values)


def compare_spread(test: str, metric: str, base_parts: list[np.ndarray], cur_parts: list[np.ndarray],
                   policy: Policy) -> Comparison:
    """Judge the current run against the run-to-run spread of the baseline runs (``run_spread``)."""
    _, q = split_metric(metric)
    base_runs = [run_value(v, metric) for v in base_parts]
    cur, lost_c, n_c = run_value(np.concatenate(cur_parts) if cur_parts else np.empty(0), metric)
    unit = "1" if q is None else "s"
    out = Comparison(test, metric, unit, math.nan, cur, math.nan, math.nan, math.nan, math.nan, math.nan,
                     math.nan, n_baseline=sum(len(v) for v in base_parts), n_current=n_c,
                     runs_baseline=len(base_parts), mode=SPREAD)
    if q is None:
        lost_b, n_b = sum(r[1] for r in base_runs), sum(r[2] for r in base_runs)
        if not n_b or not n_c:
            out.verdict = INSUFFICIENT
            return out
        out.baseline = lost_b / n_b
        out.allowed = policy.allowed(metric, out.baseline, SPREAD)
        out.p = run_spread.loss_p(lost_b, n_b, lost_c, n_c, out.allowed)
        rate = stats.proportion(lost_c, n_c, policy.confidence)   # Clopper-Pearson interval of the current rate
        out.delta_lo, out.delta_hi = rate.lo - out.baseline, rate.hi - out.baseline
    else:
        return _predicted(out, [r[0] for r in base_runs], policy)
    out.delta = cur - out.baseline
    out.rel = out.delta / out.baseline if out.baseline else math.nan
    return out


def _predicted(out: Comparison, base_values: list, policy: Policy) -> Comparison:
    """Fill ``out`` (its ``current`` set) from the Student-t prediction of the baseline runs' values."""
    cur = out.current
    pred = run_spread.Prediction.of(base_values)
    if pred is None or pred.runs < policy.spread_min_runs or not math.isfinite(cur):
        out.verdict = INSUFFICIENT
        return out
    out.baseline = pred.center
    out.allowed = policy.allowed(out.metric, pred.center, SPREAD)
    out.p = pred.p_above(cur, out.allowed)
    band_lo, band_hi = pred.band(policy.confidence)
    out.delta, out.delta_lo, out.delta_hi = cur - pred.center, cur - band_hi, cur - band_lo
    out.rel = out.delta / pred.center
    out.prediction = pred
    return out


def by_session(baseline: Run, parts_by_test: dict) -> dict:
    """{session: {test: part}} over the baseline sessions that hold every test of ``parts_by_test``
    ({test: that test's baseline parts, in the order of ``baseline.session_of[test]``}), sorted."""
    sessions = set.intersection(*(set(baseline.session_of[t]) for t in parts_by_test))
    out = {j: {} for j in sorted(sessions)}
    for t, parts in parts_by_test.items():
        for j, p in zip(baseline.session_of[t], parts):
            if j in out:
                out[j][t] = p
    return out


def compare_index(metric: str, per_test: dict, current: Run, baseline: Run, policy: Policy) -> Comparison | None:
    """The gate index of ``metric`` over the tests in ``per_test`` ({test: (base parts, cur parts)}):
    geometric mean (delays) or summed loss per run, judged like one test. None if < 2 tests or
    fewer than ``spread_min_runs`` baseline runs hold all of them."""
    tests = sorted(per_test)
    if len(tests) < 2:
        return None
    runs = by_session(baseline, {t: per_test[t][0] for t in tests})
    if len(runs) < policy.spread_min_runs:
        return None
    cur = {t: np.concatenate(per_test[t][1]) for t in tests}
    name = f"{run_spread.INDEX_TEST} ({len(tests)} tests)"
    if split_metric(metric)[1] is None:
        base_parts = [np.concatenate([run[t] for t in tests]) for run in runs.values()]
        return compare_spread(name, metric, base_parts, [np.concatenate(list(cur.values()))], policy)
    base_vals = [run_spread.geometric_index({t: run_value(run[t], metric)[0] for t in tests})
                 for run in runs.values()]
    cur_val = run_spread.geometric_index({t: run_value(cur[t], metric)[0] for t in tests})
    out = Comparison(name, metric, "s", math.nan, cur_val, math.nan, math.nan, math.nan, math.nan, math.nan,
                     math.nan, n_baseline=sum(sum(len(v) for v in per_test[t][0]) for t in tests),
                     n_current=sum(len(v) for v in cur.values()), runs_baseline=len(runs), mode=SPREAD)
    return _predicted(out, base_vals, policy)
