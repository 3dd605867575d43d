"""SLO regression against a baseline: per test x metric, on raw samples.

For every test present in both runs and every metric (default rtt.p50, rtt.p99, loss):

  delta      = metric(current) - metric(baseline)   (nearest-rank percentile, or the loss fraction)
  allowed    = max(min_effect_rel x baseline, min_effect_abs)     the smallest change that matters
  p          = bootstrap probability that delta <= allowed  (one-sided: "no regression beyond allowed")
  regression = Holm-adjusted p < alpha over all comparisons of the session (family-wise error rate)

The bootstrap resamples non-overlapping **blocks** of consecutive requests spanning ``block_s`` of the
send schedule (default 0.2 s = 100 requests at a 2 ms interval), because delays on a shared host come in bursts: an i.i.d. bootstrap (and the
Mann-Whitney U test, which also assumes independent samples) treats one 50 ms scheduling stall as 25
independent slow requests and calls run-to-run noise significant. With a baseline of several runs the
blocks of all runs are pooled (a block never spans two runs). The Mann-Whitney U p-value (one-sided,
current > baseline) and its effect size A = P(current > baseline) are reported for the whole series
as context, not used for the verdict.

With a baseline of ``spread_min_runs`` (3) or more past runs, a test is judged instead by how much
its metrics move from run to run (``run_spread``: Student-t prediction from the baseline runs, plus
a gate index over all tests); the bootstrap is for a baseline of one or two runs, which cannot show
that spread and so only flags large effects.

``python -m netslo.report.regression --baseline B --current C`` compares two results directories
(or results.json files; B may be a directory of past runs) and exits 1 on a regression.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from scipy import stats as sps

from .. import stats, units
from ..samples import SampleSet
from . import run_spread
from .series import DELAY_SERIES, series, split_metric

DEFAULT_METRICS = ("rtt.p50", "rtt.p99", "loss")
GROUPS = 2000            # rank groups per side; exact when a side has at most this many samples
MAX_BLOCKS = 200         # blocks per side; longer blocks when a side has more than 200 x block samples
MIN_TAIL = 5             # a percentile needs this many samples above it (P99: n >= 500)

REGRESSED, IMPROVED, UNCHANGED, INSUFFICIENT = "regressed", "improved", "unchanged", "insufficient data"
HOST_NOISE = "host noise"   # would be a regression, but the sender's own timer error grew as much
NOT_CONFIRMED = "not confirmed"   # would be a regression, but a re-measurement of the test did not show it
BOOTSTRAP, SPREAD = "block bootstrap", "run spread"   # Comparison.mode


@dataclass(frozen=True)
class Policy:
    """How a regression is decided. Delays in seconds, loss and relative effects as fractions."""

    metrics: tuple = DEFAULT_METRICS
    min_effect_rel: float = 1.0        # of the baseline value (1.0 = the metric doubled)
    min_effect_abs: float = 200e-6     # seconds, for delay metrics
    min_loss_abs: float = 0.005        # fraction (0.5 percentage points), for loss
    alpha: float = 0.01                # family-wise over the whole comparison (Holm)
    block_s: float = 0.2               # bootstrap block length in seconds of the send schedule
    n_boot: int = 4000                 # at least; raised so that Holm can reach alpha (2 m / alpha)
    spread_min_runs: int = 3           # baseline runs of a test from which its run spread is used
    spread_min_effect_rel: float = 0.02   # allowed effects when the run spread is known ...
    spread_min_effect_abs: float = 5e-6   # ... (s) ...
    spread_min_loss_abs: float = 0.001    # ... and for loss (0.1 percentage points)
    gate_index: bool = True            # also judge the geometric mean over tests (run-spread mode)
    confidence: float = 0.95           # of the reported CI of delta
    seed: int = 0
    noise_guard: bool = True           # see host_noise()
    noise_ratio: float = 2.0           # timer-error P50/P99 growth that marks a run as noisier ...
    noise_abs_p50: float = 20e-6       # ... if the P50 also grew by at least this (s)
    noise_abs_p99: float = 0.5e-3      # ... or the P99 by at least this (s)

    def effects(self, metric: str, mode: str = BOOTSTRAP) -> tuple[float, float]:
        """(relative effect, absolute floor: s for delays, fraction for loss) of ``metric`` in ``mode``."""
        loss = split_metric(metric)[1] is None
        if mode == SPREAD:
            return self.spread_min_effect_rel, self.spread_min_loss_abs if loss else self.spread_min_effect_abs
        return self.min_effect_rel, self.min_loss_abs if loss else self.min_effect_abs

    def allowed(self, metric: str, base: float, mode: str = BOOTSTRAP) -> float:
        """Largest increase (s or fraction) that does not count as a regression (loss: the floor alone)."""
        rel, floor = self.effects(metric, mode)
        return floor if split_metric(metric)[1] is None else max(rel * abs(base), floor)

    def allowed_drop(self, metric: str, base: float, mode: str = BOOTSTRAP) -> float:
        """Largest decrease that is not reported as an improvement: the same ratio the other way
        (x(1+rel) up <-> /(1+rel) down), at least the absolute floor."""
        rel, floor = self.effects(metric, mode)
        return max(abs(base) * rel / (1.0 + rel), floor)


# ---- loading runs ------------------------------------------------------------------------------

@dataclass
class Run:
    """Raw samples of one or more sessions: test id -> list of SampleSets (one per session)."""

    samples: dict = field(default_factory=dict)
    environment: list = field(default_factory=list)   # one dict per session
    sources: list = field(default_factory=list)       # results.json paths
    session_of: dict = field(default_factory=dict)    # test -> session index of each SampleSet

    @property
    def sessions(self) -> int:
        return max(1, len(self.sources))

    def add(self, test: str, s: SampleSet, session: int | None = None) -> None:
        """Add one session's samples of ``test`` (default session: the latest source)."""
        self.samples.setdefault(test, []).append(s)
        self.session_of.setdefault(test, []).append(max(0, len(self.sources) - 1) if session is None else session)


def results_files(path) -> list[Path]:
    """``path`` is a results.json, a results directory, or a directory of past runs (searched
    recursively). Raises FileNotFoundError naming the path when there is none."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        found = sorted(p.rglob("results.json"))
        if found:
            return found
    raise FileNotFoundError(f"--netslo-baseline: value {str(path)!r} — expected a results.json file or a "
                            f"directory containing results.json files (netslo-results/ of past runs)")


def load(path) -> Run:
    """Read every results.json under ``path`` and the raw samples each record points to."""
    run = Run()
    for f in results_files(path):
        doc = json.loads(f.read_text())
        run.environment.append(doc.get("environment", {}))
        run.sources.append(str(f))
        for rec in doc.get("results", []):
            if rec.get("samples_file"):
                run.add(rec["test"], SampleSet.load(f.parent / rec["samples_file"]), len(run.sources) - 1)
    return run


# ---- the block bootstrap -----------------------------------------------------------------------

class BlockSide:
    """One side of a comparison: the series of each run cut into blocks, ready to resample."""

    def __init__(self, parts: list[np.ndarray], block: int):
        n = sum(len(p) for p in parts)
        block = max(1, block, math.ceil(n / MAX_BLOCKS))
        ids, offset = [], 0
        for p in parts:                                   # blocks never span two runs
            k = max(1, math.ceil(len(p) / block))
            ids.append(offset + np.minimum(np.arange(len(p)) // block, k - 1))
            offset += k
        self.values = np.concatenate(parts) if parts else np.empty(0)
        self.block_of = np.concatenate(ids) if ids else np.empty(0, dtype=np.int64)
        self.n_blocks = offset
        self.n = len(self.values)
        self.block = block
        order = np.argsort(self.values, kind="stable")
        self.sorted = self.values[order]
        g = min(self.n, GROUPS)
        self.group_start = (np.arange(g) * self.n) // g if g else np.empty(0, dtype=np.int64)
        self.group_size = np.diff(np.append(self.group_start, self.n))
        group_of_rank = np.repeat(np.arange(g), self.group_size)
        # samples of block b that fall in rank group j
        self.matrix = np.bincount(self.block_of[order] * g + group_of_rank,
                                  minlength=self.n_blocks * g).reshape(self.n_blocks, g).astype(float)
        self.block_size = np.bincount(self.block_of, minlength=self.n_blocks).astype(float)
        self.block_sum = np.bincount(self.block_of, weights=self.values, minlength=self.n_blocks)

    def counts(self, rng, n_boot: int) -> np.ndarray:
        """How often each block is drawn in each of ``n_boot`` resamples (n_boot x n_blocks)."""
        return rng.multinomial(self.n_blocks, np.full(self.n_blocks, 1.0 / self.n_blocks), size=n_boot).astype(float)

    def quantiles(self, counts: np.ndarray, q: float) -> np.ndarray:
        """Nearest-rank percentile q of each resample (exact when n <= GROUPS)."""
        per_group = counts @ self.matrix                  # resampled count in each rank group
        cum = np.cumsum(per_group, axis=1)
        total = cum[:, -1]
        k = np.maximum(1.0, np.ceil(q / 100.0 * total - 1e-9))
        g = np.minimum((cum < k[:, None]).sum(axis=1), cum.shape[1] - 1)
        before = np.where(g > 0, cum[np.arange(len(g)), g - 1], 0.0)
        inside = per_group[np.arange(len(g)), g]
        frac = np.clip((k - before) / np.maximum(inside, 1e-12), 0.0, 1.0)
        idx = self.group_start[g] + np.minimum(np.floor(frac * self.group_size[g] - 1e-9).astype(int),
                                               self.group_size[g] - 1)
        return self.sorted[np.maximum(idx, self.group_start[g])]

    def means(self, counts: np.ndarray) -> np.ndarray:
        return (counts @ self.block_sum) / np.maximum(counts @ self.block_size, 1.0)


def nearest_rank(values: np.ndarray, q: float) -> float:
    """Nearest-rank percentile q of unsorted ``values`` (NaN when empty)."""
    return stats.nearest_rank(np.sort(values), q)


# ---- one comparison ----------------------------------------------------------------------------

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


def _enough(n: int, q: float | None) -> bool:
    return n > 0 if q is None else n * (1.0 - q / 100.0) >= MIN_TAIL


def block_requests(parts: list[SampleSet], block_s: float) -> int:
    """Requests per bootstrap block: ``block_s`` divided by the median send interval."""
    gaps = [np.diff(s.column("sched_ns")) for s in parts if len(s) > 1]
    gaps = np.concatenate(gaps) if gaps else np.empty(0)
    interval = float(np.median(gaps)) * 1e-9 if len(gaps) else 0.0
    return max(1, round(block_s / interval)) if interval > 0 else 1


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
    if not (_enough(len(b_all), q) and _enough(len(c_all), q)):
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
    return (nearest_rank(values, q) if _enough(len(values), q) else math.nan), 0, len(values)


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


def by_session(baseline: "Run", parts_by_test: dict) -> dict:
    """{session: {test: part}} over the baseline sessions that hold every test of ``parts_by_test``
    ({test: that test's baseline parts, in the order of ``baseline.session_of[test]``}), sorted."""
    sessions = set.intersection(*(set(baseline.session_of[t]) for t in parts_by_test))
    out = {j: {} for j in sorted(sessions)}
    for t, parts in parts_by_test.items():
        for j, p in zip(baseline.session_of[t], parts):
            if j in out:
                out[j][t] = p
    return out


def compare_index(metric: str, per_test: dict, current: "Run", baseline: "Run", policy: Policy) -> Comparison | None:
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


def host_noise(base_parts: list[np.ndarray], cur_parts: list[np.ndarray], policy: Policy) -> dict:
    """Sender timer error (s) of both runs and whether the current run's host was busier.

    The open-loop sender records how late each request left against its schedule: CPU contention on
    the client host, not the network. When its P50 or its P99 grew ``noise_ratio``-fold (and by at
    least ``noise_abs_p50`` / ``noise_abs_p99``), the host was busier during the current run, and a
    delay regression of that test is reported as host noise (not failed): repeat the run on a quieter
    runner to judge the network. With several baseline runs the baseline value is the median of
    the runs' values (a pooled P99 would be set by the noisiest baseline run)."""
    c = np.concatenate(cur_parts) if cur_parts else np.empty(0)
    out = {"noisier": False}
    for q, floor in ((50.0, policy.noise_abs_p50), (99.0, policy.noise_abs_p99)):
        per_run = [nearest_rank(p, q) for p in base_parts if len(p)]
        vb, vc = (float(np.median(per_run)) if per_run else math.nan), nearest_rank(c, q)
        out[f"p{q:g}"] = (vb, vc)
        if math.isfinite(vb) and math.isfinite(vc) and vc > policy.noise_ratio * vb and vc - vb >= floor:
            out["noisier"] = True
    return out


def spread_canary(base_parts: list[np.ndarray], cur_parts: list[np.ndarray]) -> dict:
    """run_spread.timer_canary on the timer-error P50 and P99 of each baseline run."""
    cur = np.concatenate(cur_parts) if cur_parts else np.empty(0)
    base = {q: [nearest_rank(p, q) for p in base_parts if len(p)] for q in (50.0, 99.0)}
    return run_spread.timer_canary(base, {q: nearest_rank(cur, q) for q in base})


def index_canary(timers: dict, baseline: "Run", tests: list) -> dict:
    """timer_canary on the geometric mean over ``tests`` of the timer-error P50/P99, per run."""
    runs = by_session(baseline, {t: timers[t][0] for t in tests})
    base, cur = {}, {}
    for q in (50.0, 99.0):
        base[q] = [run_spread.geometric_index({t: nearest_rank(p, q) for t, p in run.items()}) for run in runs.values()]
        cur[q] = run_spread.geometric_index({t: nearest_rank(np.concatenate(timers[t][1]), q) for t in tests})
    return run_spread.timer_canary(base, cur)


def _explained_by_host(c: Comparison, timer_parts) -> bool:
    """Could the busier host explain this delay regression? Yes when the lower CI bound of delta
    is within the allowed effect plus twice the growth of the sender's timer error at the same
    percentile (a stall delays the client's send and, as often, the responder's reply)."""
    q = split_metric(c.metric)[1]
    if q is None:
        return False   # loss is counted by sequence number; host stalls do not drop requests
    base, cur = (np.concatenate(p) if p else np.empty(0) for p in timer_parts)
    growth = max(0.0, nearest_rank(cur, q) - nearest_rank(base, q)) if len(base) and len(cur) else 0.0
    return c.delta_lo <= c.allowed + 2.0 * growth


def holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


# ---- a whole comparison ------------------------------------------------------------------------

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
            "rerun": sorted(self.rerun.samples) if self.rerun else [],
        }

    def to_markdown(self) -> str:
        """regression.md: verdict, the regressions table, then every comparison (for $GITHUB_STEP_SUMMARY)."""
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
    enough runs); Holm over all comparisons with enough data."""
    rng = np.random.default_rng(policy.seed)
    comps = []
    common = [t for t in current.samples if t in baseline.samples]
    family_bound = (len(common) + 1) * len(policy.metrics)
    boot = replace(policy, n_boot=max(policy.n_boot, math.ceil(2 * family_bound / policy.alpha)))
    noisy, timers, sides, ratios = {}, {}, {}, {}
    spread_series: dict = {m: {} for m in policy.metrics}   # metric -> {test: (base parts, cur parts)}
    for test in common:
        timers[test] = ([series(s, "timer_error") for s in baseline.samples[test]],
                        [series(s, "timer_error") for s in current.samples[test]])
        spread = len(baseline.samples[test]) >= policy.spread_min_runs
        canary = (spread_canary(*timers[test]) if spread else host_noise(*timers[test], policy))
        noisy[test], ratios[test] = canary["noisier"], canary.get("ratio", 1.0)
        block = block_requests(baseline.samples[test] + current.samples[test], policy.block_s)
        cache = {}
        for metric in policy.metrics:
            name, _ = split_metric(metric)
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
                explained = _explained_by_host(c, timers[c.test])
            c.verdict = HOST_NOISE if (policy.noise_guard and noisy[c.test] and explained) else REGRESSED
        elif math.isfinite(c.delta_hi) and c.delta_hi < -policy.allowed_drop(c.metric, c.baseline, c.mode):
            c.verdict = IMPROVED
    return Report(policy, comps, baseline, current, baseline_label,
                  only_baseline=sorted(set(baseline.samples) - set(current.samples)),
                  only_current=sorted(set(current.samples) - set(baseline.samples)))


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


# ---- regression.md -----------------------------------------------------------------------------

def _fmt(value: float, unit: str, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    text = units.format_percent(value) if unit == "1" else units.format_duration(value)
    return ("+" + text) if signed and value > 0 else text


def _p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "–"
    if p == 0.0:
        return "<1e-300"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _row(c: Comparison, with_verdict: bool) -> str:
    rel = f"{c.rel:+.0%}" if math.isfinite(c.rel) else "–"
    cells = [f"`{c.test}`", c.metric, _fmt(c.baseline, c.unit), _fmt(c.current, c.unit),
             f"{_fmt(c.delta, c.unit, True)} ({_fmt(c.delta_lo, c.unit, True)} … {_fmt(c.delta_hi, c.unit, True)})",
             rel, _fmt(c.allowed, c.unit), _p(c.p_adj), _p(c.p_mw), "–" if c.a12 is None else f"{c.a12:.2f}"]
    if with_verdict:
        cells.append({REGRESSED: "❌ regressed", IMPROVED: "✅ improved", UNCHANGED: "unchanged",
                      HOST_NOISE: "⚠️ host noise", NOT_CONFIRMED: "⚠️ not confirmed"}.get(c.verdict, c.verdict))
    return "| " + " | ".join(cells) + " |"


HEADER = ("| test | metric | baseline | current | Δ (95% CI) | Δ % | allowed Δ | p (Holm) | MW p | A |",
          "|---|---|---:|---:|---|---:|---:|---:|---:|---:|")


def _sharpness(family: list) -> list[str]:
    """'rtt.p99: median +35 % per test, +9 % gate index' per delay metric of run-spread comparisons."""
    out = []
    metrics = sorted({c.metric for c in family if c.prediction is not None})
    for m in metrics:
        per_test = [c.flag_above / c.baseline - 1 for c in family if c.metric == m and c.prediction is not None
                    and not c.test.startswith(run_spread.INDEX_TEST)]
        index = [c.flag_above / c.baseline - 1 for c in family if c.metric == m and c.prediction is not None
                 and c.test.startswith(run_spread.INDEX_TEST)]
        parts = []
        if per_test:
            parts.append(f"median {float(np.median(per_test)):+.0%} per test")
        if index:
            parts.append(f"{index[0]:+.0%} {run_spread.INDEX_TEST}")
        out.append(f"{m} {', '.join(parts)}")
    return out


def markdown(report: "Report") -> str:
    pol = report.policy
    regs = report.regressions
    family = [c for c in report.comparisons if c.verdict != INSUFFICIENT]
    tests = sorted({c.test for c in regs})
    head = (f"❌ {len(regs)} regression{'s' if len(regs) != 1 else ''} in {len(tests)} test{'s' if len(tests) != 1 else ''}"
            if regs else "✅ no regression")
    if report.missing:
        head += f"; ❌ {len(report.missing)} baseline test{'s' if len(report.missing) != 1 else ''} not measured"
    lines = [f"### netslo SLO regression vs baseline: {head}", ""]
    cur_env = report.current.environment[-1] if report.current.environment else {}
    lines.append(f"Baseline `{report.baseline_label or ', '.join(report.baseline.sources)}` "
                 f"({report.baseline.sessions} run{'s' if report.baseline.sessions != 1 else ''}); current run "
                 f"`{cur_env.get('run_id', '?')}`; {len(family)} comparisons of {', '.join(pol.metrics)}.")
    lines.append("")
    modes = {c.mode for c in family}
    if BOOTSTRAP in modes:
        lines.append(f"Block bootstrap (baseline of fewer than {pol.spread_min_runs} runs): a regression is a metric "
                     f"that grew by more than the allowed Δ = max({pol.min_effect_rel:.0%} of the baseline, "
                     f"{units.format_duration(pol.min_effect_abs)}) for delays or {units.format_percent(pol.min_loss_abs)} "
                     f"for loss, with a one-sided block-bootstrap p-value (blocks of {units.format_duration(pol.block_s)} "
                     f"of requests). One baseline run cannot show how much this runner moves between runs, so "
                     f"only large effects are flagged; a baseline of {pol.spread_min_runs}+ past runs is much sharper.")
        lines.append("")
    if SPREAD in modes:
        lines.append(f"Run spread (baseline of {pol.spread_min_runs}+ runs): each metric is judged against how much it "
                     f"moved between the baseline runs (one-sided Student-t prediction on the log scale); allowed Δ = "
                     f"max({pol.spread_min_effect_rel:.0%}, {units.format_duration(pol.spread_min_effect_abs)}) for delays, "
                     f"{units.format_percent(pol.spread_min_loss_abs)} for loss (exact binomial). The *{run_spread.INDEX_TEST}* "
                     f"rows judge the geometric mean over all tests, which catches a shift of every test that no "
                     f"single test can tell from noise.")
        lines.append("")
        sharp = _sharpness(family)
        if sharp:
            lines.append("Smallest increase this baseline can flag: " + "; ".join(sharp) + ".")
            lines.append("")
    lines.append(f"p (Holm) < {pol.alpha:.0%} over all {len(family)} comparisons fails the gate. MW p / A: "
                 f"Mann–Whitney U (current > baseline) and P(current > baseline), context only.")
    lines.append("")
    if regs:
        lines += ["#### Regressions", "", *HEADER]
        lines += [_row(c, False) for c in regs]
        lines.append("")
    noisy = [c for c in report.comparisons if c.verdict == HOST_NOISE]
    if noisy:
        lines += ["⚠️ Set aside as host noise (not failed; repeat on a quieter runner): " + "; ".join(
            f"`{c.test}` {c.metric} {_fmt(c.baseline, c.unit)} → {_fmt(c.current, c.unit)} while the sender's "
            f"timer error P99 went {_fmt(c.timer_p99[0], 's')} → {_fmt(c.timer_p99[1], 's')}" for c in noisy), ""]
    unconfirmed = [c for c in report.comparisons if c.verdict == NOT_CONFIRMED]
    if unconfirmed:
        lines += ["⚠️ Not confirmed (not failed; the re-measurement in this session did not regress): " + "; ".join(
            f"`{c.test}` {c.metric} {_fmt(c.baseline, c.unit)} → {_fmt(c.current, c.unit)}, re-measured "
            f"{_fmt(c.confirm[0], c.unit) if c.confirm else '?'}" for c in unconfirmed), ""]
    if report.rerun is not None:
        lines += [f"Re-measured in this session because they looked regressed ({len(report.rerun.samples)}): "
                  + ", ".join(f"`{t}`" for t in sorted(report.rerun.samples)), ""]
    changes = report.environment_changes()
    if changes:
        lines += ["⚠️ The environment differs from the baseline: " + "; ".join(changes), ""]
    if report.missing:
        lines += ["❌ Tests in the baseline but not measured in this run (fail the regression check): "
                  + ", ".join(f"`{t}`" for t in report.missing), ""]
    if report.excused:
        lines += ["Tests in the baseline left out on purpose: "
                  + ", ".join(f"`{t}` ({why})" for t, why in sorted(report.excused.items())), ""]
    if report.only_current:
        lines += ["New tests without a baseline: " + ", ".join(f"`{t}`" for t in report.only_current), ""]
    lines += [f"<details><summary>All {len(report.comparisons)} comparisons</summary>", "",
              HEADER[0][:-1] + "| verdict |", HEADER[1] + "---|"]
    lines += [_row(c, True) for c in report.comparisons]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


# ---- options shared by the CLI and the pytest plugin ------------------------------------------

def policy_from_text(metrics: str | None = None, min_effect: str | None = None, min_abs: str | None = None,
                     min_loss: str | None = None, alpha: str | None = None, block: str | None = None,
                     n_boot: str | None = None) -> Policy:
    """Build a Policy from option strings ('20%', '100us', ...); SpecError names the bad option."""
    from ..errors import SpecError
    p = Policy()
    kw = {}
    if metrics:
        ms = tuple(m.strip() for m in metrics.split(",") if m.strip())
        for m in ms:
            try:
                name, q = split_metric(m)
                if name not in ("loss",) + DELAY_SERIES or (name == "loss") != (q is None) or (q is not None and not 0 < q < 100):
                    raise ValueError
            except ValueError:
                raise SpecError("--netslo-regression-metrics", m, "comma-separated metrics like rtt.p50,rtt.p99,"
                                "ipdv.p99,loss (series.pQ with 0<Q<100, or loss)") from None
        kw["metrics"] = ms
    if min_effect:   # an explicit effect applies in both modes
        kw["min_effect_rel"] = kw["spread_min_effect_rel"] = units.percent(min_effect, "--netslo-regression-min-effect")
    if min_abs:
        kw["min_effect_abs"] = kw["spread_min_effect_abs"] = units.duration(min_abs, "--netslo-regression-min-abs")
    if min_loss:
        kw["min_loss_abs"] = kw["spread_min_loss_abs"] = units.percent(min_loss, "--netslo-regression-min-loss")
    if alpha:
        kw["alpha"] = units.percent(alpha, "--netslo-regression-alpha")
        if not 0 < kw["alpha"] < 0.5:
            raise SpecError("--netslo-regression-alpha", alpha, "a percentage above 0% and below 50%, e.g. 5%")
    if block:
        kw["block_s"] = units.duration(block, "--netslo-regression-block")
        if kw["block_s"] <= 0:
            raise SpecError("--netslo-regression-block", block, "a duration > 0, e.g. '200ms'")
    if n_boot:
        if not str(n_boot).isdigit() or int(n_boot) < 200:
            raise SpecError("--netslo-regression-resamples", n_boot, "a whole number >= 200, e.g. 4000")
        kw["n_boot"] = int(n_boot)
    return Policy(**{**asdict(p), **kw})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netslo.report.regression", description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="results.json, results dir, or a dir of past runs")
    ap.add_argument("--current", required=True, help="results.json or results dir of the run to judge")
    ap.add_argument("--out", default=None, help="where to write regression.md/json (default: the current dir)")
    ap.add_argument("--metrics", default=None, help=f"default {','.join(DEFAULT_METRICS)}")
    ap.add_argument("--min-effect", default=None, help=f"relative, default {Policy.min_effect_rel:.0%} "
                    f"({Policy.spread_min_effect_rel:.0%} with a baseline of {Policy.spread_min_runs}+ runs)")
    ap.add_argument("--min-abs", default=None, help=f"delay floor, default {units.format_duration(Policy.min_effect_abs)} "
                    f"({units.format_duration(Policy.spread_min_effect_abs)} with {Policy.spread_min_runs}+ runs)")
    ap.add_argument("--min-loss", default=None, help=f"loss floor, default {units.format_percent(Policy.min_loss_abs)} "
                    f"({units.format_percent(Policy.spread_min_loss_abs)} with {Policy.spread_min_runs}+ runs)")
    ap.add_argument("--alpha", default=None, help=f"family-wise, default {Policy.alpha:.0%}")
    ap.add_argument("--block", default=None, help=f"bootstrap block length, default {units.format_duration(Policy.block_s)}")
    ap.add_argument("--resamples", default=None, help=f"bootstrap resamples, default {Policy.n_boot}")
    ap.add_argument("--quiet", action="store_true", help="print only the verdict line")
    a = ap.parse_args(argv)
    from ..errors import SpecError
    try:
        policy = policy_from_text(a.metrics, a.min_effect, a.min_abs, a.min_loss, a.alpha, a.block, a.resamples)
        base, cur = load(a.baseline), load(a.current)
    except (SpecError, FileNotFoundError) as e:
        print(f"netslo regression: {e}", file=sys.stderr)
        return 2
    report = compare(base, cur, policy, a.baseline)
    out = Path(a.out) if a.out else Path(results_files(a.current)[0]).parent
    _, md = report.write(out)
    print(md.read_text() if not a.quiet else
          f"{'REGRESSION' if report.failed else 'no regression'}: {len(report.regressions)} of "
          f"{len(report.comparisons)} comparisons ({md})")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
