"""Exact order statistics, mean and spread of a long integer series, without sorting it.

``IntSeries`` collects int64 values (ns) as ``value - base`` in the narrowest unsigned type that
holds the interval given up front (10 M RTTs below 4.3 s: 40 MB instead of 80 MB of int64 or
float64). ``OrderStatistics`` finds only the order statistics asked for, exactly the ones a full
sort would put at those ranks: by counting each value when the span is small (linear time,
``np.bincount``; nothing of the series kept), else with one in-place ``np.partition`` of the narrow
offsets (introselect: linear time).

``Moments`` gives mean and sample variance over fixed blocks of ``BLOCK`` consecutive values
(numpy's pairwise sum within a block, Chan's update between blocks), so the result depends on the
values and their order only, never on how the series was fed in (chunked, streamed or whole).
"""

from __future__ import annotations

import math

import numpy as np

from netslo.stats.compact import offset_type

BLOCK = 1 << 16
NS = 1e-9
COUNT_LIMIT = 1 << 21       # spans up to this are counted value by value (16 MB of counts)
COUNT_SLICE = 1 << 20       # values counted at a time


def point_rank(n: int, q: float) -> int:
    """1-based nearest rank of percentile q (0..100] among n >= 1 values (the definition every
    percentile of netslo uses)."""
    return min(max(1, math.ceil(q / 100.0 * n - 1e-9)), n)


def nearest_rank(sorted_x: np.ndarray, q: float) -> float:
    """Nearest-rank percentile q (0..100] of an ascending array; NaN when it is empty."""
    n = len(sorted_x)
    if n == 0:
        return math.nan
    return float(sorted_x[point_rank(n, q) - 1])


def seconds(ns: np.ndarray) -> np.ndarray:
    """int64 ns -> float64 s, the same operation ``stats`` always used: ``ns * 1e-9``."""
    return np.asarray(ns, dtype=np.int64) * NS


class IntSeries:
    """int64 values known to lie in [lo, hi], held as ``value - lo`` in a narrow unsigned type."""

    def __init__(self, lo: int, hi: int, capacity: int):
        self.base = int(lo)
        self.span = int(hi) - int(lo)
        self.data = np.empty(capacity, dtype=offset_type(self.span))
        self.n = 0

    def append(self, values: np.ndarray) -> None:
        k = len(values)
        if not k:
            return
        off = (np.asarray(values, dtype=np.int64) - np.int64(self.base)).view(np.uint64)
        if int(off.max()) > self.span:
            raise ValueError(f"IntSeries: value outside [{self.base}, {self.base + self.span}]")
        self.data[self.n:self.n + k] = off.astype(self.data.dtype)
        self.n += k

    @property
    def offsets(self) -> np.ndarray:
        """The collected ``value - base`` (a view)."""
        return self.data[:self.n]


class OrderStatistics:
    """Exact order statistics of an int64 series known to lie in [lo, hi], fed piece by piece.

    A small span (at most ``COUNT_LIMIT``, 16 MB of counts) is counted value by value and no copy
    of the series is kept; a larger one is kept as narrow offsets (``IntSeries``), then counted if
    the values turn out to span little, else partitioned in place. Either way ``pick`` gives
    exactly what a sort of the whole series would."""

    def __init__(self, lo: int, hi: int, capacity: int):
        self.lo, self.span, self.n = int(lo), int(hi) - int(lo), 0
        self.counting = self.span <= COUNT_LIMIT and self.span <= 4 * max(capacity, 1)
        self.hist = np.zeros(self.span + 1, dtype=np.int64) if self.counting else None
        self.series = None if self.counting else IntSeries(lo, hi, capacity)
        self._pending, self._pending_n = [], 0      # offsets waiting to be counted in one go

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        if self.counting:   # range checked where counted: bincount refuses < 0, and > span lengthens it
            off = np.asarray(values, dtype=np.int64)
            if self.lo:
                off = off - np.int64(self.lo)
            self._pending.append(off)
            self._pending_n += len(off)
            if self._pending_n >= COUNT_SLICE:
                self._count()
        else:
            self.series.append(values)
        self.n += len(values)

    def _count(self) -> None:
        if self._pending:
            off = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
            try:
                counts = np.bincount(off, minlength=self.span + 1)
            except ValueError:          # a negative offset
                counts = None
            if counts is None or len(counts) > self.span + 1:
                raise ValueError(f"OrderStatistics: value outside [{self.lo}, {self.lo + self.span}]")
            self.hist += counts
            self._pending, self._pending_n = [], 0

    def pick(self, ranks) -> dict:
        """{rank: value (int)} of the 1-based ``ranks`` (those outside 1..n are left out)."""
        ranks = sorted({int(r) for r in ranks if 1 <= r <= self.n})
        if self.counting:
            self._count()
            below = np.cumsum(self.hist)
            return {r: self.lo + int(np.searchsorted(below, r)) for r in ranks}
        data = self.series.offsets
        if self.n and self._count_kept(data):
            return self.pick(ranks)
        if ranks:
            data.partition([r - 1 for r in ranks])
        return {r: self.lo + int(data[r - 1]) for r in ranks}

    def _count_kept(self, data: np.ndarray) -> bool:
        """Switch to counting when the values kept turn out to span little (the interval given up
        front can be much wider, e.g. a difference of differences)."""
        low, high = int(data.min()), int(data.max())
        if high - low > COUNT_LIMIT or high - low > 4 * self.n:
            return False
        hist = np.zeros(high - low + 1, dtype=np.int64)
        for i in range(0, len(data), COUNT_SLICE):
            # offset from ``low`` in the offsets' own unsigned type: offsets past 2^63 (a series bounded
            # only by int64) would wrap as int64
            hist += np.bincount((data[i:i + COUNT_SLICE] - data.dtype.type(low)).astype(np.int64), minlength=len(hist))
        self.lo, self.span, self.hist, self.series, self.counting = self.lo + low, high - low, hist, None, True
        return True


class Moments:
    """Count, mean and sum of squared deviations of a stream of floats, block by fixed block."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self._pending: list[np.ndarray] = []
        self._pending_n = 0

    def add(self, values: np.ndarray) -> None:
        """Feed values (float64) in series order; full blocks are folded in at once."""
        v = np.asarray(values, dtype=np.float64)
        if not len(v):
            return
        if self._pending_n:             # complete the partial block first (the only copy made)
            need = BLOCK - self._pending_n
            if len(v) < need:
                self._pending.append(v.copy())
                self._pending_n += len(v)
                return
            self._fold(np.concatenate([*self._pending, v[:need]]))
            self._pending, self._pending_n, v = [], 0, v[need:]
        full = len(v) - len(v) % BLOCK
        for i in range(0, full, BLOCK):
            self._fold(v[i:i + BLOCK])
        if full < len(v):
            self._pending, self._pending_n = [v[full:].copy()], len(v) - full

    def add_blocks(self, blocks) -> "Moments":
        for b in blocks:
            self.add(b)
        return self

    def _fold(self, block: np.ndarray) -> None:
        nb = len(block)
        mb = float(np.sum(block)) / nb
        d = block - mb
        m2b = float(np.sum(np.multiply(d, d, out=d)))
        if self.n == 0:
            self.n, self.mean, self.m2 = nb, mb, m2b
            return
        total = self.n + nb
        d = mb - self.mean
        self.mean += d * nb / total
        self.m2 += m2b + d * d * self.n * nb / total
        self.n = total

    def finish(self) -> "Moments":
        """Fold in the last, partial block."""
        if self._pending_n:
            self._fold(np.concatenate(self._pending))
            self._pending, self._pending_n = [], 0
        return self

    def std(self) -> float:
        """Sample standard deviation (ddof 1); nan below two values."""
        return float(np.sqrt(self.m2 / (self.n - 1))) if self.n > 1 else float("nan")
