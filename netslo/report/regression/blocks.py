"""The block bootstrap: a side of a comparison cut into blocks of consecutive requests, resampled
as whole blocks (delays on a shared host come in bursts), and the percentiles it needs."""

from __future__ import annotations

import math

import numpy as np

from netslo.report.regression.decision import GROUPS, MAX_BLOCKS, MIN_TAIL
from netslo.stats import analysis as stats
from netslo.stats.samples import SampleSet


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


def enough(n: int, q: float | None) -> bool:
    """Are ``n`` samples enough for percentile ``q`` (``MIN_TAIL`` above it; any for a mean)?"""
    return n > 0 if q is None else n * (1.0 - q / 100.0) >= MIN_TAIL


def block_requests(parts: list[SampleSet], block_s: float) -> int:
    """Requests per bootstrap block: ``block_s`` divided by the median send interval."""
    gaps = [np.diff(s.column("sched_ns")) for s in parts if len(s) > 1]
    gaps = np.concatenate(gaps) if gaps else np.empty(0)
    interval = float(np.median(gaps)) * 1e-9 if len(gaps) else 0.0
    return max(1, round(block_s / interval)) if interval > 0 else 1
