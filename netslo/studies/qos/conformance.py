"""Rate conformance of a shaped flow from per-interval throughput (bins of e.g. 100 ms).

Given bin rates r_i (bits/s, application payload) and the configured limit L (bits/s on the wire):

  expected     E = L * payload_fraction, the goodput a wire rate L carries (TCP: MSS/(MSS+66) with
               Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 bytes per segment)
  steady state mean of the bins that start at or after ``steady_from`` s, with a Student-t CI
  verdict      conform when the whole CI lies in [E(1-tol), E(1+tol)], nonconform when it lies wholly
               outside, else decided on the point estimate (and said so)
  overshoot    peak bin rate, and peak / L
  time to conform  end of the last bin above max(E(1+tol), steady mean + 3 sd of the steady bins):
               from then on no bin exceeds the band by more than the flow's own steady-state noise
               (delivery comes in GSO quanta of up to 64 KiB, i.e. 5.2 Mbit per 100 ms bin);
               infinite when the steady state itself is above the band
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TCP_OVERHEAD_BYTES = 14 + 20 + 20 + 12


def tcp_payload_fraction(mtu: int = 1500) -> float:
    """Goodput share of the wire bytes for full-size TCP segments with timestamps on this MTU."""
    mss = mtu - 20 - 20 - 12
    return mss / (mss + TCP_OVERHEAD_BYTES)


@dataclass(frozen=True)
class Conformance:
    """Verdict and metrics of one shaped flow (rates in bits/s, times in s)."""

    limit_bps: float
    expected_bps: float
    tolerance: float
    steady_bps: float
    steady_lo: float
    steady_hi: float
    steady_bins: int
    verdict: str               # conform | nonconform
    by_point: bool
    peak_bps: float
    time_to_conform_s: float
    view: str = "delivered"

    @property
    def peak_ratio(self) -> float:
        return self.peak_bps / self.limit_bps

    @property
    def ok(self) -> bool:
        return self.verdict == "conform"

    def line(self) -> str:
        m = 1e6
        note = " (CI straddles the band: decided on the point estimate)" if self.by_point else ""
        return (f"{self.view} rate {self.steady_bps / m:.3f} Mbit/s (CI {self.steady_lo / m:.3f}–"
                f"{self.steady_hi / m:.3f}, {self.steady_bins} bins) vs expected {self.expected_bps / m:.3f} "
                f"± {self.tolerance:.0%} for limit {self.limit_bps / m:g} Mbit/s: {self.verdict}{note}; "
                f"overshoot peak {self.peak_bps / m:.2f} Mbit/s ({self.peak_ratio:.2f}x), "
                f"time to conform " + (f"{self.time_to_conform_s:.2f} s" if math.isfinite(self.time_to_conform_s)
                                       else "never"))


def judge(times: list, rates: list, limit_bps: float, tolerance: float, steady_from: float,
          payload_fraction: float = 1.0, confidence: float = 0.95, view: str = "delivered") -> Conformance:
    """Conformance of the bins (``times`` = bin end times in s, ``rates`` in bits/s)."""
    from scipy import stats as sps
    if len(times) != len(rates) or not rates:
        raise ValueError("conformance: needs equally long, non-empty times and rates")
    expected = limit_bps * payload_fraction
    lo_band, hi_band = expected * (1 - tolerance), expected * (1 + tolerance)
    bin_s = (times[-1] - times[0]) / max(len(times) - 1, 1) if len(times) > 1 else times[0]
    steady = [r for t, r in zip(times, rates) if t - bin_s >= steady_from - 1e-9]
    n = len(steady)
    mean = sum(steady) / n if n else math.nan
    if n > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in steady) / (n - 1))
        half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    else:
        sd, half = 0.0, math.inf
    lo, hi = mean - half, mean + half
    if n and lo_band <= lo and hi <= hi_band:
        verdict, by_point = "conform", False
    elif n and (hi < lo_band or lo > hi_band):
        verdict, by_point = "nonconform", False
    else:
        verdict = "conform" if n and lo_band <= mean <= hi_band else "nonconform"
        by_point = True
    ceiling = max(hi_band, mean + 3 * sd) if n else hi_band
    above = [t for t, r in zip(times, rates) if r > ceiling]
    settle = max(above) if above else 0.0
    if verdict == "nonconform" and mean > hi_band:
        settle = math.inf  # it never came down to the limit
    return Conformance(limit_bps, expected, tolerance, mean, lo, hi, n, verdict, by_point,
                       max(rates), settle, view)
