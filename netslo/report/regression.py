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

``python -m netslo.report.regression --baseline B --current C`` compares two results directories
(or results.json files; B may be a directory of past runs) and exits 1 on a regression.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as sps

from .. import units
from ..samples import SampleSet
from .series import DELAY_SERIES, series, split_metric

DEFAULT_METRICS = ("rtt.p50", "rtt.p99", "loss")
GROUPS = 2000            # rank groups per side; exact when a side has at most this many samples
MAX_BLOCKS = 200         # blocks per side; longer blocks when a side has more than 200 x block samples
MIN_TAIL = 5             # a percentile needs this many samples above it (P99: n >= 500)

REGRESSED, IMPROVED, UNCHANGED, INSUFFICIENT = "regressed", "improved", "unchanged", "insufficient data"
HOST_NOISE = "host noise"   # would be a regression, but the sender's own timer error grew as much


@dataclass(frozen=True)
class Policy:
    """How a regression is decided. Delays in seconds, loss and relative effects as fractions."""

    metrics: tuple = DEFAULT_METRICS
    min_effect_rel: float = 1.0        # of the baseline value (1.0 = the metric doubled)
    min_effect_abs: float = 200e-6     # seconds, for delay metrics
    min_loss_abs: float = 0.005        # fraction (0.5 percentage points), for loss
    alpha: float = 0.05                # family-wise over the whole comparison (Holm)
    block_s: float = 0.2               # bootstrap block length in seconds of the send schedule
    n_boot: int = 4000
    confidence: float = 0.95           # of the reported CI of delta
    seed: int = 0
    noise_guard: bool = True           # see host_noise()
    noise_ratio: float = 2.0           # timer-error P50/P99 growth that marks a run as noisier ...
    noise_abs_p50: float = 20e-6       # ... if the P50 also grew by at least this (s)
    noise_abs_p99: float = 0.5e-3      # ... or the P99 by at least this (s)

    def allowed(self, metric: str, base: float) -> float:
        """Largest increase (s or fraction) that does not count as a regression."""
        floor = self.min_loss_abs if split_metric(metric)[1] is None else self.min_effect_abs
        return max(self.min_effect_rel * abs(base), floor)

    def allowed_drop(self, metric: str, base: float) -> float:
        """Largest decrease that is not reported as an improvement: the same ratio the other way
        (x(1+rel) up <-> /(1+rel) down), at least the absolute floor."""
        floor = self.min_loss_abs if split_metric(metric)[1] is None else self.min_effect_abs
        return max(abs(base) * self.min_effect_rel / (1.0 + self.min_effect_rel), floor)


# ---- loading runs ------------------------------------------------------------------------------

@dataclass
class Run:
    """Raw samples of one or more sessions: test id -> list of SampleSets (one per session)."""

    samples: dict = field(default_factory=dict)
    environment: list = field(default_factory=list)   # one dict per session
    sources: list = field(default_factory=list)       # results.json paths

    @property
    def sessions(self) -> int:
        return max(1, len(self.sources))

    def add(self, test: str, s: SampleSet) -> None:
        self.samples.setdefault(test, []).append(s)


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
    raise FileNotFoundError(f"--baseline: value {str(path)!r} — expected a results.json file or a "
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
                run.add(rec["test"], SampleSet.load(f.parent / rec["samples_file"]))
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
    x = np.sort(values)
    return float(x[max(1, math.ceil(q / 100.0 * len(x) - 1e-9)) - 1]) if len(x) else math.nan


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


def _enough(n: int, q: float | None) -> bool:
    return n > 0 if q is None else n * (1.0 - q / 100.0) >= MIN_TAIL


def block_requests(parts: list[SampleSet], block_s: float) -> int:
    """Requests per bootstrap block: ``block_s`` divided by the median send interval."""
    gaps = [np.diff(s.rows["sched_ns"]) for s in parts if len(s) > 1]
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


def host_noise(base_parts: list[np.ndarray], cur_parts: list[np.ndarray], policy: Policy) -> dict:
    """Sender timer error (s) of both runs and whether the current run's host was busier.

    The open-loop sender records how late each request left against its schedule: CPU contention on
    the client host, not the network. When its P50 or its P99 grew ``noise_ratio``-fold (and by at
    least ``noise_abs_p50`` / ``noise_abs_p99``), the host was busier during the current run, and a
    delay regression of that test is reported as host noise (not failed): repeat the run on a quieter
    runner to judge the network."""
    b = np.concatenate(base_parts) if base_parts else np.empty(0)
    c = np.concatenate(cur_parts) if cur_parts else np.empty(0)
    out = {"noisier": False}
    for q, floor in ((50.0, policy.noise_abs_p50), (99.0, policy.noise_abs_p99)):
        vb, vc = nearest_rank(b, q), nearest_rank(c, q)
        out[f"p{q:g}"] = (vb, vc)
        if math.isfinite(vb) and math.isfinite(vc) and vc > policy.noise_ratio * vb and vc - vb >= floor:
            out["noisier"] = True
    return out


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

    @property
    def regressions(self) -> list:
        return [c for c in self.comparisons if c.verdict == REGRESSED]

    @property
    def failed(self) -> bool:
        return bool(self.regressions)

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
            "verdict": "regression" if self.failed else "no regression",
            "policy": {**asdict(self.policy), "metrics": list(self.policy.metrics)},
            "baseline": {"sources": self.baseline.sources, "runs": self.baseline.sessions},
            "current": {"sources": self.current.sources},
            "environment_changes": self.environment_changes(),
            "regressions": [{"test": c.test, "metric": c.metric} for c in self.regressions],
            "comparisons": [{k: clean(v) for k, v in asdict(c).items()} for c in self.comparisons],
            "only_baseline": self.only_baseline,
            "only_current": self.only_current,
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
    """Every metric of every test found in both runs; Holm over all comparisons with enough data."""
    rng = np.random.default_rng(policy.seed)
    comps = []
    common = [t for t in current.samples if t in baseline.samples]
    noisy, timers, sides = {}, {}, {}
    for test in common:
        canary = host_noise([series(s, "timer_error") for s in baseline.samples[test]],
                            [series(s, "timer_error") for s in current.samples[test]], policy)
        noisy[test] = canary["noisier"]
        timers[test] = ([series(s, "timer_error") for s in baseline.samples[test]],
                        [series(s, "timer_error") for s in current.samples[test]])
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
            comp = compare_metric(test, metric, b, c, policy, rng, block, sides)
            comp.timer_p50, comp.timer_p99 = canary["p50"], canary["p99"]
            comps.append(comp)
        sides.clear()
    family = [c for c in comps if c.verdict != INSUFFICIENT]
    for c, p in zip(family, holm([c.p for c in family])):
        c.p_adj = p
        if p < policy.alpha:
            c.verdict = HOST_NOISE if (policy.noise_guard and noisy[c.test] and _explained_by_host(c, timers[c.test])) \
                else REGRESSED
        elif math.isfinite(c.delta_hi) and c.delta_hi < -policy.allowed_drop(c.metric, c.baseline):
            c.verdict = IMPROVED
    return Report(policy, comps, baseline, current, baseline_label,
                  only_baseline=sorted(set(baseline.samples) - set(current.samples)),
                  only_current=sorted(set(current.samples) - set(baseline.samples)))


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
                      HOST_NOISE: "⚠️ host noise"}.get(c.verdict, c.verdict))
    return "| " + " | ".join(cells) + " |"


HEADER = ("| test | metric | baseline | current | Δ (95% CI) | Δ % | allowed Δ | p (Holm) | MW p | A |",
          "|---|---|---:|---:|---|---:|---:|---:|---:|---:|")


def markdown(report: "Report") -> str:
    pol = report.policy
    regs = report.regressions
    family = [c for c in report.comparisons if c.verdict != INSUFFICIENT]
    tests = sorted({c.test for c in regs})
    head = (f"❌ {len(regs)} regression{'s' if len(regs) != 1 else ''} in {len(tests)} test{'s' if len(tests) != 1 else ''}"
            if regs else "✅ no regression")
    lines = [f"### netslo SLO regression vs baseline: {head}", ""]
    cur_env = report.current.environment[-1] if report.current.environment else {}
    lines.append(f"Baseline `{report.baseline_label or ', '.join(report.baseline.sources)}` "
                 f"({report.baseline.sessions} run{'s' if report.baseline.sessions != 1 else ''}); current run "
                 f"`{cur_env.get('run_id', '?')}`; {len(family)} comparisons of {', '.join(pol.metrics)}.")
    lines.append("")
    lines.append(f"A regression is a metric that grew by more than the allowed Δ = max({pol.min_effect_rel:.0%} of "
                 f"the baseline, {units.format_duration(pol.min_effect_abs)}) for delays or "
                 f"{units.format_percent(pol.min_loss_abs)} for loss, with a one-sided block-bootstrap p-value "
                 f"(blocks of {units.format_duration(pol.block_s)} of requests, {pol.n_boot} resamples) below {pol.alpha:.0%} after Holm "
                 f"correction over all {len(family)} comparisons. MW p / A: Mann–Whitney U (current > baseline) "
                 f"and P(current > baseline), context only.")
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
    changes = report.environment_changes()
    if changes:
        lines += ["⚠️ The environment differs from the baseline: " + "; ".join(changes), ""]
    if report.only_baseline:
        lines += ["Tests in the baseline but not in this run: " + ", ".join(f"`{t}`" for t in report.only_baseline), ""]
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
                raise SpecError("--regression-metrics", m, "comma-separated metrics like rtt.p50,rtt.p99,"
                                "ipdv.p99,loss (series.pQ with 0<Q<100, or loss)") from None
        kw["metrics"] = ms
    if min_effect:
        kw["min_effect_rel"] = units.percent(min_effect, "--regression-min-effect")
    if min_abs:
        kw["min_effect_abs"] = units.duration(min_abs, "--regression-min-abs")
    if min_loss:
        kw["min_loss_abs"] = units.percent(min_loss, "--regression-min-loss")
    if alpha:
        kw["alpha"] = units.percent(alpha, "--regression-alpha")
        if not 0 < kw["alpha"] < 0.5:
            raise SpecError("--regression-alpha", alpha, "a percentage above 0% and below 50%, e.g. 5%")
    if block:
        kw["block_s"] = units.duration(block, "--regression-block")
        if kw["block_s"] <= 0:
            raise SpecError("--regression-block", block, "a duration > 0, e.g. '200ms'")
    if n_boot:
        if not str(n_boot).isdigit() or int(n_boot) < 200:
            raise SpecError("--regression-resamples", n_boot, "a whole number >= 200, e.g. 4000")
        kw["n_boot"] = int(n_boot)
    return Policy(**{**asdict(p), **kw})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netslo.report.regression", description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="results.json, results dir, or a dir of past runs")
    ap.add_argument("--current", required=True, help="results.json or results dir of the run to judge")
    ap.add_argument("--out", default=None, help="where to write regression.md/json (default: the current dir)")
    ap.add_argument("--metrics", default=None, help=f"default {','.join(DEFAULT_METRICS)}")
    ap.add_argument("--min-effect", default=None, help=f"relative, default {Policy.min_effect_rel:.0%}")
    ap.add_argument("--min-abs", default=None, help=f"delay floor, default {units.format_duration(Policy.min_effect_abs)}")
    ap.add_argument("--min-loss", default=None, help=f"loss floor, default {units.format_percent(Policy.min_loss_abs)}")
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
