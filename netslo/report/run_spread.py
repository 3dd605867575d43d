"""Regression against a baseline of several past runs: judge the current run by the runs' spread.

On a shared runner a metric moves between runs far more than its within-run sampling error says:
on the project's 2-core VM the RTT P50 of the same unchanged path wandered 55-170 µs between runs
and within one long run (coefficient of variation 25-35 % between runs, P99 30-70 %), and neither
longer runs nor CPU pinning removed it. A within-run bootstrap cannot see that; a baseline of K >= 3
runs can. Each baseline run gives one value per test x metric; on the log scale (delays are
multiplicative) their mean m and standard deviation s predict the next run of the unchanged system.

  allowed   = max(min_effect_rel x exp(m), min_effect_abs)              the smallest change that matters
  t         = (log current - m - log(1 + allowed / exp(m))) / (s x sqrt(1 + 1/K))
  p         = P(T_{K-1} >= t)            one-sided Student-t prediction: "no regression beyond allowed"

Loss is a count: p = P(X >= lost | Binomial(n_current, baseline rate + min_loss_abs)).

A regression of the pod network moves many tests at once, while run-to-run noise is partly
independent between tests, so the **gate index** — the geometric mean of a delay metric over all
tests (and the summed loss) — is judged the same way: it catches a +10 % shift of every test that
no single test can tell from noise. Test and index comparisons share one Holm family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

INDEX_TEST = "gate index"     # the test name of index comparisons in reports
MIN_SPREAD = 0.01             # log-scale floor of s: no run-to-run spread below 1 % is believed


@dataclass(frozen=True)
class Prediction:
    """What K baseline runs predict for the next run of a delay metric (values in seconds)."""

    runs: int
    center: float          # geometric mean of the runs' values, s
    spread: float          # standard deviation of log(value) over the runs (>= MIN_SPREAD)

    @classmethod
    def of(cls, values) -> "Prediction | None":
        """None unless there are >= 2 positive finite values."""
        v = np.asarray([x for x in values if x is not None and math.isfinite(x) and x > 0], dtype=float)
        if len(v) < 2:
            return None
        logs = np.log(v)
        return cls(len(v), float(math.exp(logs.mean())), max(float(logs.std(ddof=1)), MIN_SPREAD))

    @property
    def scale(self) -> float:
        """Log-scale standard deviation of a new run around the center (prediction, not mean)."""
        return self.spread * math.sqrt(1.0 + 1.0 / self.runs)

    def p_above(self, current: float, allowed: float) -> float:
        """One-sided p of 'current <= center + allowed' (a Student-t prediction with K-1 df)."""
        if not (math.isfinite(current) and current > 0):
            return math.nan
        t = (math.log(current) - math.log(self.center + allowed)) / self.scale
        return float(sps.t.sf(t, self.runs - 1))

    def band(self, confidence: float) -> tuple[float, float]:
        """Range (s) that a new run of the unchanged system falls in with ``confidence``."""
        q = float(sps.t.ppf(0.5 + confidence / 2.0, self.runs - 1))
        return self.center * math.exp(-q * self.scale), self.center * math.exp(q * self.scale)

    def flag_above(self, allowed: float, alpha: float) -> float:
        """Smallest current value (s) flagged at one-sided level ``alpha`` (before multiplicity)."""
        q = float(sps.t.isf(alpha, self.runs - 1))
        return (self.center + allowed) * math.exp(q * self.scale)


def loss_p(lost_base: int, n_base: int, lost_cur: int, n_cur: int, allowed: float) -> float:
    """One-sided p of 'current loss rate <= baseline rate + allowed' (exact binomial tail)."""
    if n_cur <= 0 or n_base <= 0:
        return math.nan
    if lost_cur <= 0:
        return 1.0
    p0 = min(1.0, lost_base / n_base + allowed)
    return float(sps.binom.sf(lost_cur - 1, n_cur, p0))


def geometric_index(values_by_test: dict) -> float:
    """exp(mean(log v)) over tests; NaN if any value is missing or not positive."""
    v = np.asarray(list(values_by_test.values()), dtype=float)
    if not len(v) or not np.all(np.isfinite(v)) or np.any(v <= 0):
        return math.nan
    return float(math.exp(np.log(v).mean()))


NOISE_P = 0.05   # the sender's timer error is "unusually high" below this one-sided prediction p


def timer_canary(base_values: dict, cur_values: dict) -> dict:
    """Was the host unusually busy during the current run, judged by the baseline runs' spread?

    ``base_values``/``cur_values``: {percentile: [per-run timer error (s)]} / {percentile: value}.
    Returns {"noisier": bool, "ratio": how many times the timer error exceeds its prediction center
    (the largest over the percentiles that are outliers), "p50"/"p99": (center, current)}."""
    out = {"noisier": False, "ratio": 1.0}
    for q in sorted(base_values):
        pred = Prediction.of(base_values[q])
        cur = cur_values.get(q, math.nan)
        out[f"p{q:g}"] = (pred.center if pred else math.nan, cur)
        if pred is None or not (math.isfinite(cur) and cur > 0):
            continue
        if pred.p_above(cur, 0.0) < NOISE_P and cur > pred.center:
            out["noisier"] = True
            out["ratio"] = max(out["ratio"], cur / pred.center)
    return out
