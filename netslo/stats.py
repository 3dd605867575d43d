"""Statistics on raw samples: percentiles with distribution-free CIs, jitter, loss, comparisons.

Units: every delay statistic is in **seconds** (float); fractions (loss, dup, reorder) are 0..1.

Percentile rule (one rule everywhere): nearest rank on the sorted sample, P_q = x_(ceil(q/100·n)),
i.e. the smallest sample x with ECDF F_n(x) >= q/100 (numpy ``method="inverted_cdf"``).

Confidence interval of a percentile: order statistics [x_(l), x_(u)] with l, u from the binomial
distribution of #{X_i <= true quantile} ~ Binom(n, q); coverage >= the confidence level whatever the
distribution. When n is too small the bound is -inf/+inf (e.g. P99.9 from 500 samples has no upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .samples import SampleSet

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A statistic with its confidence interval. ``unit`` is 's' (seconds) or '1' (fraction)."""

    value: float
    lo: float
    hi: float
    n: int
    unit: str = "s"

    def as_dict(self) -> dict:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n, "unit": self.unit}


def q_name(q: float) -> str:
    """50 -> 'p50', 99.9 -> 'p99.9'."""
    return "p" + (f"{q:g}")


def nearest_rank(sorted_x: np.ndarray, q: float) -> float:
    """Nearest-rank percentile q (0..100] of an ascending array."""
    n = len(sorted_x)
    if n == 0:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * n - 1e-9))
    return float(sorted_x[min(rank, n) - 1])


def percentile_ci_ranks(n: int, q: float, confidence: float = DEFAULT_CONFIDENCE) -> tuple[int, int]:
    """1-based ranks (l, u) of the order-statistic CI for percentile q; 0 or n+1 = unbounded."""
    from scipy import stats as sps
    p = q / 100.0
    alpha = 1.0 - confidence
    lo = int(sps.binom.ppf(alpha / 2, n, p))          # F(lo-1) < alpha/2
    hi = int(sps.binom.ppf(1 - alpha / 2, n, p)) + 1  # F(hi-1) >= 1-alpha/2
    return lo, hi


def percentile_estimate(sorted_x: np.ndarray, q: float, confidence: float = DEFAULT_CONFIDENCE,
                        unit: str = "s") -> Estimate:
    """Point estimate (nearest rank) and distribution-free CI of percentile q."""
    n = len(sorted_x)
    if n == 0:
        return Estimate(math.nan, -math.inf, math.inf, 0, unit)
    lo_r, hi_r = percentile_ci_ranks(n, q, confidence)
    lo = float(sorted_x[lo_r - 1]) if lo_r >= 1 else -math.inf
    hi = float(sorted_x[hi_r - 1]) if hi_r <= n else math.inf
    return Estimate(nearest_rank(sorted_x, q), lo, hi, n, unit)


def describe(values: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, prefix: str = "") -> dict:
    """min/mean/P50/P90/P99/P99.9/max of a delay series (seconds) as Estimates keyed 'prefix.stat'."""
    from scipy import stats as sps
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    out = {}
    if n == 0:
        nan = Estimate(math.nan, -math.inf, math.inf, 0)
        return {f"{prefix}.{k}": nan for k in ["min", "mean", *map(q_name, PERCENTILES), "max"]}
    out[f"{prefix}.min"] = Estimate(float(x[0]), float(x[0]), float(x[0]), n)
    mean = float(x.mean())
    half = float(sps.norm.ppf(0.5 + confidence / 2) * x.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    out[f"{prefix}.mean"] = Estimate(mean, mean - half, mean + half, n)
    for q in PERCENTILES:
        out[f"{prefix}.{q_name(q)}"] = percentile_estimate(x, q, confidence)
    out[f"{prefix}.max"] = Estimate(float(x[-1]), float(x[-1]), float(x[-1]), n)
    return out


def proportion(k: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> Estimate:
    """k events in n trials: fraction with its exact (Clopper-Pearson) CI."""
    from scipy import stats as sps
    if n <= 0:
        return Estimate(math.nan, 0.0, 1.0, 0, "1")
    ci = sps.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="exact")
    return Estimate(k / n, float(ci.low), float(ci.high), int(n), "1")


# ---- jitter ------------------------------------------------------------------------------------

def ipdv(delay_by_seq: np.ndarray) -> np.ndarray:
    """IPDV (RFC 3393/5481): D_i - D_{i-1} for consecutive sequence numbers both received.

    ``delay_by_seq`` is indexed by seq with NaN for lost packets; result is signed, seconds."""
    d = np.asarray(delay_by_seq, dtype=np.float64)
    diff = d[1:] - d[:-1]
    return diff[~np.isnan(diff)]


def pdv(delays: np.ndarray) -> np.ndarray:
    """PDV (RFC 5481): D_i - min(D) over received packets, seconds."""
    d = np.asarray(delays, dtype=np.float64)
    d = d[~np.isnan(d)]
    return d - d.min() if len(d) else d


def rfc3550_jitter(transit_in_arrival_order: np.ndarray) -> float:
    """RFC 3550 interarrival jitter: J += (|D(i-1,i)| - J)/16 over arrivals; final J in seconds.

    An EWMA (what iperf3 reports), not a distribution: never gate on it alone."""
    from scipy import signal
    t = np.asarray(transit_in_arrival_order, dtype=np.float64)
    if len(t) < 2:
        return math.nan
    absd = np.abs(np.diff(t))
    j = signal.lfilter([1 / 16.0], [1.0, -15 / 16.0], absd)
    return float(j[-1])


# ---- the analysis of one SampleSet -------------------------------------------------------------

@dataclass
class Analysis:
    """Every statistic of one scenario run: ``metrics`` (name -> Estimate) and raw ``counts``."""

    metrics: dict
    counts: dict

    def get(self, name: str) -> Estimate:
        return self.metrics[name]


def reorder_count(seq_in_arrival_order: np.ndarray) -> int:
    """Arrivals whose seq is lower than the highest seq already arrived (late / reordered)."""
    s = np.asarray(seq_in_arrival_order)
    if len(s) < 2:
        return 0
    running_max = np.maximum.accumulate(s)
    return int((s[1:] < running_max[:-1]).sum())


def analyze(samples: SampleSet, confidence: float = DEFAULT_CONFIDENCE) -> Analysis:
    """Compute RTT, one-way delay, jitter, loss, duplicate and reorder statistics from raw rows."""
    r = samples.rows
    n = len(r)
    got = r["recv_ns"] >= 0
    ns = 1e-9
    rtt_by_seq = np.where(got, (r["recv_ns"] - r["send_ns"]) * ns, np.nan)
    rtt = rtt_by_seq[got]
    m = describe(rtt, confidence, "rtt")

    shared_clock = bool(samples.meta.get("shared_clock", False))
    srv = got & (r["srv_rx_ns"] >= 0) & (r["srv_tx_ns"] >= 0)
    if srv.any():
        m.update(describe((r["srv_tx_ns"][srv] - r["srv_rx_ns"][srv]) * ns, confidence, "server_time"))
    if shared_clock and srv.any():
        up = np.where(srv, (r["srv_rx_ns"] - r["send_ns"]) * ns, np.nan)
        down = np.where(srv, (r["recv_ns"] - r["srv_tx_ns"]) * ns, np.nan)
        m.update(describe(up[srv], confidence, "owd_up"))
        m.update(describe(down[srv], confidence, "owd_down"))
        m.update(describe(np.abs(ipdv(up)), confidence, "ipdv_up"))
        m.update(describe(np.abs(ipdv(down)), confidence, "ipdv_down"))
    m.update(describe(np.abs(ipdv(rtt_by_seq)), confidence, "ipdv"))
    m.update(describe(pdv(rtt), confidence, "pdv"))

    arrival_order = np.argsort(np.where(got, r["arrival"], np.iinfo(np.int64).max), kind="stable")[:got.sum()]
    j = rfc3550_jitter(rtt_by_seq[arrival_order])
    m["rfc3550"] = Estimate(j, j, j, int(got.sum()))
    timer = (r["send_ns"] - r["sched_ns"]) * ns
    m.update(describe(timer[r["send_ns"] >= 0], confidence, "timer_error"))

    received = int(got.sum())
    lost = n - received
    up_lost = int(((r["srv_seen"] == 0) & ~got).sum())
    down_lost = int(((r["srv_seen"] == 1) & ~got).sum())
    unknown_split = int(((r["srv_seen"] < 0) & ~got).sum())
    dups = int(r["dups"].sum())
    reordered = reorder_count(r["seq"][arrival_order])
    m["loss"] = proportion(lost, n, confidence)
    if unknown_split == 0:
        m["loss_up"] = proportion(up_lost, n, confidence)
        m["loss_down"] = proportion(down_lost, max(n - up_lost, 0), confidence)
    m["dup"] = proportion(dups, max(received, 1), confidence)
    m["reorder"] = proportion(reordered, max(received, 1), confidence)
    counts = {"sent": n, "received": received, "lost": lost, "lost_up": up_lost,
              "lost_down": down_lost, "lost_unknown_direction": unknown_split,
              "duplicates": dups, "reordered": reordered}
    return Analysis(m, counts)


# ---- comparisons between two runs (regression detection) ---------------------------------------

def mann_whitney(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value that a and b come from the same distribution."""
    from scipy import stats as sps
    if len(a) == 0 or len(b) == 0:
        return math.nan
    return float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def bootstrap_quantile_diff(a: np.ndarray, b: np.ndarray, q: float, confidence: float = DEFAULT_CONFIDENCE,
                            n_boot: int = 2000, seed: int = 0) -> Estimate:
    """Percentile q of b minus that of a, with a percentile-bootstrap CI (seconds)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    point = nearest_rank(np.sort(b), q) - nearest_rank(np.sort(a), q)
    qa = np.quantile(rng.choice(a, (n_boot, len(a))), q / 100, axis=1, method="inverted_cdf")
    qb = np.quantile(rng.choice(b, (n_boot, len(b))), q / 100, axis=1, method="inverted_cdf")
    d = qb - qa
    alpha = 1 - confidence
    return Estimate(point, float(np.quantile(d, alpha / 2)), float(np.quantile(d, 1 - alpha / 2)),
                    min(len(a), len(b)))
