"""Two sides measured in interleaved pairs of blocks: how much worse B is than A, with a confidence
interval that respects the blocks, and the non-inferiority decision on it.

A comparison is ``m`` pairs; pair ``i`` holds one block of A and one block of B measured one right
after the other (in random order), so whatever the host did during that pair hit both. The
**paired block bootstrap** resamples whole pairs with replacement (both blocks of a pair together:
the pairing, and every correlation inside a block, is kept) and recomputes the statistic on the
concatenated blocks of each side.

Statistics (B relative to A):
- ``rtt.pXX`` ratio: P_q(RTTs of B) / P_q(RTTs of A), nearest rank as everywhere in netslo;
- ``loss`` difference: lost/sent of B minus lost/sent of A (a fraction).

Non-inferiority with a margin δ (ratio: B may be up to 1+δ times A; loss: up to δ more): with the
bootstrap distribution of the statistic, ``p_worse`` = the share of replicates at or below the
margin (with the usual +1 correction) is the one-sided p-value of "B is worse than the margin";
``upper`` is the one-sided ``confidence`` upper bound. **fail** when ``p_worse`` (Holm-adjusted
over every check of the run) is below 1 − confidence, **pass** when ``upper`` is within the margin,
otherwise **inconclusive** (the caller measures more pairs, then says it could not decide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netslo.stats.order_stats import point_rank

N_BOOT = 2000
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass(frozen=True)
class Pair:
    """One interleaved pair: the answered RTTs (s) and the sent/lost counts of each side's block."""

    a: np.ndarray
    b: np.ndarray
    sent_a: int
    lost_a: int
    sent_b: int
    lost_b: int
    b_first: bool = False


@dataclass(frozen=True)
class Relative:
    """B relative to A for one statistic: the point value, its two-sided CI, the one-sided upper
    bound, and ``p_worse`` against ``margin`` (all in the statistic's unit: a ratio, or a fraction)."""

    metric: str
    kind: str              # "ratio" | "difference"
    value: float
    lo: float
    hi: float
    upper: float
    margin: float          # the largest value still acceptable (1 + δ for a ratio, δ for a difference)
    p_worse: float
    pairs: int
    a: float = math.nan    # the statistic of each side over all its blocks (s, or a fraction)
    b: float = math.nan

    def verdict(self, p_adjusted: float, confidence: float) -> str:
        if p_adjusted < 1.0 - confidence:
            return FAIL
        if self.upper <= self.margin:
            return PASS
        return INCONCLUSIVE


def holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


def _quantile(parts: list[np.ndarray], q: float) -> float:
    x = np.concatenate(parts) if parts else np.empty(0)
    if not len(x):
        return math.nan
    k = point_rank(len(x), q)          # nearest rank, as every netslo percentile
    return float(np.partition(x, k - 1)[k - 1])


@dataclass(frozen=True)
class Replicates:
    """A statistic of B relative to A over the pairs: its point value, each side's value over all its
    blocks, and its paired block bootstrap replicates. ``against`` judges it for one margin (the
    replicates do not depend on the margin, so several margins cost one bootstrap)."""

    metric: str
    kind: str              # "ratio" | "difference"
    point: float
    a: float
    b: float
    boot: np.ndarray
    pairs: int

    def against(self, margin: float, confidence: float) -> Relative:
        """The CI at ``confidence``, its one-sided upper bound and ``p_worse`` for ``margin`` (the
        largest acceptable value: 1 + δ for a ratio, δ for a difference)."""
        alpha = 1.0 - confidence
        boot = self.boot[np.isfinite(self.boot)]
        if not len(boot) or not math.isfinite(self.point):
            return Relative(self.metric, self.kind, self.point, -math.inf, math.inf, math.inf, margin, 1.0,
                            self.pairs, self.a, self.b)
        lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
        upper = float(np.quantile(boot, 1 - alpha))
        p_worse = (1 + int(np.count_nonzero(boot <= margin))) / (1 + len(boot))
        return Relative(self.metric, self.kind, self.point, float(lo), float(hi), upper, margin, p_worse,
                        self.pairs, self.a, self.b)


def percentile_replicates(pairs: list[Pair], q: float, n_boot: int = N_BOOT, seed: int = 0) -> Replicates:
    """P_q(B) / P_q(A) over the pairs and its paired block bootstrap replicates."""
    point_a, point_b = _quantile([p.a for p in pairs], q), _quantile([p.b for p in pairs], q)
    point = point_b / point_a if point_a > 0 else math.nan
    rng = np.random.default_rng(seed)
    m = len(pairs)
    counts = _resample_counts(rng, m, n_boot)
    qa = _boot_quantiles([p.a for p in pairs], q, counts)
    qb = _boot_quantiles([p.b for p in pairs], q, counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.where(qa > 0, qb / np.where(qa > 0, qa, 1.0), math.nan)
    return Replicates(f"rtt.p{q:g}", "ratio", point, point_a, point_b, boot, m)


def _resample_counts(rng: np.random.Generator, m: int, n_boot: int) -> np.ndarray:
    """(n_boot, m): how often each pair is drawn in each replicate (m draws with replacement; the same
    draws, in the same order, as ``rng.integers(0, m, m)`` once per replicate)."""
    idx = rng.integers(0, m, (n_boot, m)) if m else np.empty((n_boot, 0), dtype=np.int64)
    counts = np.zeros((n_boot, m), dtype=np.int32)
    np.add.at(counts, (np.repeat(np.arange(n_boot), m), idx.ravel()), 1)
    return counts


def _boot_quantiles(parts: list[np.ndarray], q: float, counts: np.ndarray) -> np.ndarray:
    """Per replicate (a row of ``counts``: each part's multiplicity), the nearest-rank P_q of the parts
    taken that often, without concatenating them: the values sorted once with, at each, how many of
    every part lie at or below it; each replicate's rank is then found by bisection over them (NaN for
    a replicate with no values)."""
    sizes = np.array([len(x) for x in parts], dtype=np.int64)
    values = np.sort(np.concatenate(parts)) if parts else np.empty(0)
    out = np.full(len(counts), math.nan)
    if not len(values):
        return out
    # below[i, j]: values of part j that are <= values[i] (ties: all of them, as a sort places them)
    below = np.stack([np.searchsorted(np.sort(x), values, side="right") for x in parts], axis=1)
    total = counts @ sizes
    rank = np.ceil(q / 100.0 * total - 1e-9).astype(np.int64).clip(1, None)    # order_stats.point_rank
    lo, hi = np.zeros(len(counts), dtype=np.int64), np.full(len(counts), len(values) - 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        enough = np.einsum("rj,rj->r", counts, below[mid]) >= rank
        lo, hi = np.where(enough, lo, mid + 1), np.where(enough, mid, hi)
    ok = total > 0
    out[ok] = values[lo[ok]]
    return out


def percentile_ratio(pairs: list[Pair], q: float, delta: float, confidence: float = 0.95,
                     n_boot: int = N_BOOT, seed: int = 0) -> Relative:
    """P_q(B) / P_q(A) over the pairs, paired block bootstrap; acceptable up to 1 + ``delta``."""
    return percentile_replicates(pairs, q, n_boot, seed).against(1.0 + delta, confidence)


def loss_replicates(pairs: list[Pair], n_boot: int = N_BOOT, seed: int = 0) -> Replicates:
    """loss(B) − loss(A) over the pairs (a fraction) and its paired block bootstrap replicates."""
    c = np.array([(p.sent_a, p.lost_a, p.sent_b, p.lost_b) for p in pairs], dtype=float).reshape(-1, 4)
    sent_a, lost_a, sent_b, lost_b = c.T

    def diff(w):
        sa, sb = (w * sent_a).sum(axis=-1), (w * sent_b).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w * lost_b).sum(axis=-1) / sb - (w * lost_a).sum(axis=-1) / sa
    rng = np.random.default_rng(seed)
    m = len(pairs)
    weights = np.stack([np.bincount(rng.integers(0, m, m), minlength=m) for _ in range(n_boot)]) if m else np.zeros((0, 0))
    point = float(diff(np.ones(m))) if m else math.nan
    loss_a = float(lost_a.sum() / sent_a.sum()) if m and sent_a.sum() else math.nan
    loss_b = float(lost_b.sum() / sent_b.sum()) if m and sent_b.sum() else math.nan
    return Replicates("loss", "difference", point, loss_a, loss_b, diff(weights) if m else np.empty(0), m)


def loss_difference(pairs: list[Pair], delta: float, confidence: float = 0.95, n_boot: int = N_BOOT,
                    seed: int = 0) -> Relative:
    """loss(B) − loss(A) over the pairs, paired block bootstrap; acceptable up to ``delta``."""
    return loss_replicates(pairs, n_boot, seed).against(delta, confidence)
