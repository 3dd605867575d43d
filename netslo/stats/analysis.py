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

from netslo.core.phase_times import timed_call
from netslo.stats import delays
from netslo.stats.delays import ChunkDelays
from netslo.stats.dns import lookup_counts
from netslo.stats.order_stats import NS, Moments, OrderStatistics, nearest_rank, point_rank, seconds  # noqa: F401 (nearest_rank: stats' API)
from netslo.stats.samples import SampleSet

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


@timed_call("analysis")
def analyze(samples: SampleSet, confidence: float = DEFAULT_CONFIDENCE) -> Analysis:
    """Compute RTT, one-way delay, jitter, loss, duplicate and reorder statistics from raw rows.

    ``rtt``, ``owd_*``, ``ipdv*`` and ``pdv`` are at the clock points of ``meta['timestamps']``
    (kernel TX to kernel RX where the probe had kernel stamps), ``rtt`` without the responder's
    residence where the responder stamped it (``netslo.stats.delays``); ``rtt_app`` and ``ipdv_app`` are
    user space to user space with everything in between, the application-visible time (docs/metrics.md).

    Works on the compact chunks (``SampleSet.chunks()``), one delay series at a time, and finds
    only the order statistics the estimates need, counted or partitioned on integer ns
    (``netslo.stats.order_stats``): 10 M requests take about 70 MB beyond their 100 MB of samples, not
    GB. Every percentile, CI bound, min/max, count and proportion is the one the sorted-array
    definitions above give, bit for bit (|IPDV| differenced in integer ns, then seconds: exact, where
    ``ipdv`` differences the seconds); means are summed in fixed blocks of the series (the last
    digit may differ from a sum in sorted order), so chunked, streamed and whole sets agree exactly."""
    chunks = samples.chunks()
    n = len(samples)
    c = _counts(chunks)
    received = c["received"]
    m = {}

    jitter = Rfc3550() if c["in_order"] else None
    rtt, rtt_moments = _series(chunks, "rtt", n, jitter)
    rtt_at = rtt.pick(_needed_ranks(rtt.n, confidence))
    m.update(_estimates("rtt", rtt.n, lambda r: float(seconds(rtt_at[r])), rtt_moments, confidence))
    pdv_moments = None
    if rtt.n:   # PDV = RTT - min RTT as floats, as ``pdv`` computes it
        rtt_min = seconds(rtt_at[1])
        pdv_moments = Moments().add_blocks(seconds(v) - rtt_min for v in _values(chunks, "rtt")).finish()
    del rtt

    any_srv = any(ChunkDelays(ch).srv.any() for ch in chunks)
    shared_clock = bool(samples.meta.get("shared_clock", False))
    if any_srv:
        m.update(_describe_series(chunks, "server_time", n, confidence))
    if shared_clock and any_srv:
        m.update(_describe_series(chunks, "owd_up", n, confidence))
        m.update(_describe_series(chunks, "owd_down", n, confidence))
        m.update(_describe_ipdv(chunks, "owd_up", n, confidence, "ipdv_up"))
        m.update(_describe_ipdv(chunks, "owd_down", n, confidence, "ipdv_down"))
    m.update(_describe_ipdv(chunks, "rtt", n, confidence, "ipdv"))
    m.update(_estimates("pdv", received, lambda r: float(seconds(rtt_at[r]) - rtt_min),
                        pdv_moments, confidence))
    m.update(_describe_series(chunks, "rtt_app", n, confidence))
    m.update(_describe_ipdv(chunks, "rtt_app", n, confidence, "ipdv_app"))

    if jitter is None:
        j, c["reordered"] = _arrival_order_fallback(chunks)
    else:
        j = jitter.value()
    m["rfc3550"] = Estimate(j, j, j, received)
    m.update(_describe_series(chunks, "timer_error", n, confidence))

    lost = n - received
    up_lost, down_lost, unknown_split = c["lost_up"], c["lost_down"], c["lost_unknown_direction"]
    m["loss"] = proportion(lost, n, confidence)
    if unknown_split == 0:
        m["loss_up"] = proportion(up_lost, n, confidence)
        m["loss_down"] = proportion(down_lost, max(n - up_lost, 0), confidence)
    m["dup"] = proportion(c["duplicates"], max(received, 1), confidence)
    m["reorder"] = proportion(c["reordered"], max(received, 1), confidence)
    counts = {"sent": n, "received": received, "lost": lost, "lost_up": up_lost,
              "lost_down": down_lost, "lost_unknown_direction": unknown_split,
              "duplicates": c["duplicates"], "reordered": c["reordered"]}
    if samples.meta.get("protocol") == "dns":
        _dns(samples.meta.get("per_row", {}), m, counts, confidence)
    return Analysis(m, counts)


def _dns(per_row: dict, m: dict, counts: dict, confidence: float) -> None:
    """The dns.* metrics of a dns probe's set (docs/metrics.md): the lookup time is the set's RTT
    (first query sent -> last needed answer), ``dns.fail`` its loss (a failed lookup has no answer
    time), ``dns.retry`` the lookups that had a query send expire (counted by ``netslo.stats.dns``)."""
    m.update({"dns." + k[4:]: v for k, v in list(m.items()) if k.startswith("rtt.")})
    m["dns.fail"] = m["loss"]
    retried, dns_counts = lookup_counts(per_row, counts["sent"])
    if retried is not None:
        m["dns.retry"] = proportion(retried, counts["sent"], confidence)
    counts.update(dns_counts)


def percentile_ranks(n: int, q: float, confidence: float = DEFAULT_CONFIDENCE) -> tuple[int, int, int]:
    """1-based ranks (point, CI low, CI high) of percentile q of n values, as ``percentile_estimate``
    reads them (CI ranks 0 or n+1 = unbounded)."""
    return (point_rank(n, q), *percentile_ci_ranks(n, q, confidence))


def _needed_ranks(n: int, confidence: float) -> set:
    ranks = {1, n}
    for q in PERCENTILES:
        ranks.update(percentile_ranks(n, q, confidence))
    return {r for r in ranks if 1 <= r <= n}


def _estimates(prefix: str, n: int, at, moments, confidence: float) -> dict:
    """min/mean/percentiles/max Estimates as ``describe`` makes them; ``at(rank)`` = the value of
    1-based rank ``rank`` in ascending order (seconds)."""
    if n == 0:
        nan = Estimate(math.nan, -math.inf, math.inf, 0)
        return {f"{prefix}.{k}": nan for k in ["min", "mean", *map(q_name, PERCENTILES), "max"]}
    from scipy import stats as sps
    out = {}
    lo = at(1)
    out[f"{prefix}.min"] = Estimate(lo, lo, lo, n)
    mean = moments.mean
    half = float(sps.norm.ppf(0.5 + confidence / 2) * moments.std() / math.sqrt(n)) if n > 1 else math.inf
    out[f"{prefix}.mean"] = Estimate(mean, mean - half, mean + half, n)
    for q in PERCENTILES:
        point, lo_r, hi_r = percentile_ranks(n, q, confidence)
        out[f"{prefix}.{q_name(q)}"] = Estimate(at(point), at(lo_r) if lo_r >= 1 else -math.inf,
                                                at(hi_r) if hi_r <= n else math.inf, n)
    hi = at(n)
    out[f"{prefix}.max"] = Estimate(hi, hi, hi, n)
    return out


def _values(chunks, name: str):
    """Series ``name`` (see ``netslo.stats.delays``) chunk by chunk, in row order (int64 ns)."""
    for ch in chunks:
        yield ChunkDelays(ch).series(name)


def _series(chunks, name: str, capacity: int, jitter=None) -> tuple[OrderStatistics, Moments]:
    """Series ``name`` of every chunk fed to an ``OrderStatistics`` and ``Moments`` (seconds);
    ``jitter``, if given, gets the seconds too, in row order."""
    lo, hi = delays.bounds(chunks, name) or (0, 0)
    stats, moments = OrderStatistics(lo, hi, capacity), Moments()
    for v in _values(chunks, name):
        stats.add(v)
        f = seconds(v)
        moments.add(f)
        if jitter is not None:
            jitter.add(f)
    return stats, moments.finish()


def _describe_series(chunks, name: str, capacity: int, confidence: float) -> dict:
    s, moments = _series(chunks, name, capacity)
    at = s.pick(_needed_ranks(s.n, confidence))
    return _estimates(name, s.n, lambda r: float(seconds(at[r])), moments, confidence)


INT64_MAX = 2**63 - 1


def _describe_ipdv(chunks, name: str, capacity: int, confidence: float, prefix: str) -> dict:
    """|IPDV| of series ``name`` as ``prefix``: |D_i - D_{i-1}| of consecutive requests that both have
    it, differenced in integer ns (exact), then in seconds as ``seconds`` makes them. ns -> s is
    monotone, so the order statistics of the integer differences, counted or selected without a
    sort, are those of the seconds: one pass."""
    lo, hi = delays.bounds(chunks, name) or (0, 0)
    moments = Moments()
    if hi - lo > INT64_MAX:      # bounded only by int64 (the headers cannot say more): the floats, sorted
        parts = [np.abs(np.diff(x.astype(np.float64)))[pair] * NS for x, pair in delays.pairs(chunks, name)]
        moments.add_blocks(parts)
        v = np.sort(np.concatenate(parts)) if parts else np.empty(0)
        return _estimates(prefix, len(v), lambda r: float(v[r - 1]), moments.finish(), confidence)
    keys = OrderStatistics(0, hi - lo, capacity)
    for x, pair in delays.pairs(chunks, name):
        k = delays.abs_ipdv_ns(x, pair)
        keys.add(k)
        moments.add(seconds(k))
    moments.finish()
    at = keys.pick(_needed_ranks(keys.n, confidence))
    return _estimates(prefix, keys.n, lambda r: float(seconds(at[r])), moments, confidence)


class Rfc3550:
    """``rfc3550_jitter`` of transit times fed in arrival order, piece by piece (the same filter
    state carried from piece to piece, so the result does not depend on the pieces)."""

    def __init__(self):
        self.zi = np.zeros(1)
        self.last = None
        self.y = math.nan

    def add(self, t: np.ndarray) -> None:
        if not len(t):
            return
        from scipy import signal
        d = np.abs(np.diff(t if self.last is None else np.concatenate([self.last, t])))
        self.last = t[-1:]
        if len(d):
            y, self.zi = signal.lfilter([1 / 16.0], [1.0, -15 / 16.0], d, zi=self.zi)
            self.y = float(y[-1])

    def value(self) -> float:
        return self.y


def _counts(chunks) -> dict:
    """Received/lost/duplicate counts, and whether responses arrived in seq order (then also the
    reordered count: arrivals whose seq is lower than one already arrived)."""
    c = {"received": 0, "lost_up": 0, "lost_down": 0, "lost_unknown_direction": 0, "duplicates": 0,
         "reordered": 0, "in_order": True}
    last_arrival, top_seq = None, None
    for ch in chunks:
        got = ChunkDelays(ch).got
        lost = ~got
        c["received"] += int(got.sum())
        seen = ch.constant("srv_seen")
        if seen is None:
            seen = ch.values("srv_seen")
            c["lost_up"] += int(((seen == 0) & lost).sum())
            c["lost_down"] += int(((seen == 1) & lost).sum())
            c["lost_unknown_direction"] += int(((seen < 0) & lost).sum())
        elif seen in (0, 1) or seen < 0:
            c["lost_up" if seen == 0 else ("lost_down" if seen == 1 else "lost_unknown_direction")] += int(lost.sum())
        c["duplicates"] += ch.total("dups")
        arrival = ch.values("arrival")[got]
        seq = ch.values("seq")[got]
        if not len(arrival) or not c["in_order"]:
            continue
        a = arrival if last_arrival is None else np.concatenate([[last_arrival], arrival])
        if (np.diff(a) <= 0).any() or arrival[-1] == np.iinfo(np.int64).max:
            c["in_order"] = False
            continue
        last_arrival = arrival[-1]
        s = seq if top_seq is None else np.concatenate([[top_seq], seq])
        running = np.maximum.accumulate(s)
        c["reordered"] += int((s[1:] < running[:-1]).sum())
        top_seq = running[-1]
    return c


def _arrival_order_fallback(chunks) -> tuple[float, int]:
    """rfc3550 jitter and reordered count when responses did not arrive in seq order: the
    definitions above on whole columns (a stable sort by arrival)."""
    def col(name):
        return np.concatenate([ch.values(name) for ch in chunks])
    got = np.concatenate([ChunkDelays(ch).got for ch in chunks])
    rtt_by_seq = np.full(len(got), np.nan)
    rtt_by_seq[got] = seconds(delays.series_ns(chunks, "rtt"))
    order = np.argsort(np.where(got, col("arrival"), np.iinfo(np.int64).max), kind="stable")[:int(got.sum())]
    return rfc3550_jitter(rtt_by_seq[order]), reorder_count(col("seq")[order])


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
