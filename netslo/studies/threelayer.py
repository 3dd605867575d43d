"""Three layers of one flow side by side: network (ICMP echo), transport (TCP_INFO), application RTT.

  application  RTT of the probe's requests as the application sees it (``rtt_app`` of
               ``stats.analyze``, the responder's time in it: P50 with its order-statistic CI)
  transport    the kernel's smoothed RTT of the SAME connection, ``tcpi_rtt`` sampled after every
               answer (``meta['tcp_info']`` of the ws/wss probe), with ``tcpi_rttvar``, ``tcpi_min_rtt``
               and retransmissions
  network      ICMP echo RTT to the same host (``probes.icmp``); diagnostic only, never gates

Consistency check: an application round trip contains at least one transport round trip of its own
connection (the request's segments are acknowledged at the latest by the answer), so both

    application P50 (upper CI bound)  >=  transport srtt P50  -  K_RTTVAR * rttvar P50
    application min                   >=  transport min_rtt   -  MIN_GRANULARITY

must hold; rttvar is the kernel's own mean deviation of the RTT (the band TCP itself trusts), and
``tcpi_min_rtt`` is a minimum over the connection's RTT samples reported in whole µs. A run that
breaks either measured something impossible (wrong clock or unit, wrong connection, timestamps taken
in the wrong place): the run is reported broken, not judged. Transport samples taken before the connection carried ``WARMUP``
answers are dropped (rttvar starts at 250 ms on a new connection).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from netslo.stats.analysis import Estimate, analyze, describe
from netslo.stats.samples import SampleSet

K_RTTVAR = 2.0
MIN_GRANULARITY = 2e-6  # s: tcpi_min_rtt and the application clock readings are in whole µs / ns
WARMUP = 16


@dataclass(frozen=True)
class Transport:
    """Transport-layer RTT of one connection over a run (seconds)."""

    srtt_p50: float
    rttvar_p50: float
    min_rtt: float
    retrans: int
    samples: int


@dataclass
class ThreeLayer:
    application: Estimate           # application RTT P50 with CI
    application_min: float
    transport: Transport | None
    network: Estimate | None        # ICMP RTT P50 with CI; None when not measured
    network_loss: float | None
    consistent: bool = True
    problems: list = field(default_factory=list)

    def ratios(self) -> dict:
        """Application P50 over the lower layers' RTT (how much the application adds)."""
        out = {}
        if self.transport and self.transport.srtt_p50 > 0:
            out["app/transport"] = self.application.value / self.transport.srtt_p50
        if self.network and self.network.value > 0 and math.isfinite(self.network.value):
            out["app/network"] = self.application.value / self.network.value
        return out

    def as_dict(self) -> dict:
        t = self.transport
        return {"application_p50": self.application.value, "application_p50_ci": [self.application.lo, self.application.hi],
                "application_min": self.application_min,
                "transport": None if t is None else t.__dict__,
                "network_p50": None if self.network is None else self.network.value,
                "network_loss": self.network_loss, "ratios": self.ratios(),
                "consistent": self.consistent, "problems": list(self.problems)}

    def line(self) -> str:
        us = lambda x: f"{x * 1e6:.0f} µs" if x is not None and math.isfinite(x) else "-"  # noqa: E731
        t = self.transport
        net = "filtered" if self.network is not None and self.network_loss == 1.0 else \
            us(self.network.value if self.network else None)
        return (f"application P50 {us(self.application.value)} | transport srtt P50 {us(t.srtt_p50 if t else None)} "
                f"(rttvar {us(t.rttvar_p50 if t else None)}, retrans {t.retrans if t else '-'}) | "
                f"network ICMP P50 {net}" + ("" if self.consistent else " | BROKEN: " + "; ".join(self.problems)))


def transport_of(samples: SampleSet, warmup: int = WARMUP) -> Transport | None:
    """Transport RTT from a probe's ``meta['tcp_info']`` series; None when the probe has none."""
    series = samples.meta.get("tcp_info")
    if not series:
        return None
    a = np.asarray(series, dtype=np.float64)
    steady = a[warmup:] if len(a) > 2 * warmup else a
    rtt, rttvar = steady[:, 1] * 1e-6, steady[:, 2] * 1e-6
    return Transport(srtt_p50=float(np.median(rtt)), rttvar_p50=float(np.median(rttvar)),
                     min_rtt=float(a[-1, 3] * 1e-6), retrans=int(a[-1, 5]), samples=len(steady))


def check(application: Estimate, application_min: float, transport: Transport | None,
          k: float = K_RTTVAR) -> list[str]:
    """Problems that make the measurement impossible (empty list = consistent)."""
    if transport is None or not math.isfinite(application.value):
        return []
    problems = []
    tolerance = k * transport.rttvar_p50
    if application.hi < transport.srtt_p50 - tolerance:
        problems.append(f"application RTT P50 {application.value * 1e6:.1f} µs (CI upper {application.hi * 1e6:.1f} µs) "
                        f"< transport srtt P50 {transport.srtt_p50 * 1e6:.1f} µs - {k:g}·rttvar "
                        f"{transport.rttvar_p50 * 1e6:.1f} µs")
    if application_min < transport.min_rtt - MIN_GRANULARITY:
        problems.append(f"application RTT min {application_min * 1e6:.1f} µs < transport min_rtt "
                        f"{transport.min_rtt * 1e6:.1f} µs - {MIN_GRANULARITY * 1e6:g} µs")
    return problems


def compare(app: SampleSet, icmp: SampleSet | None = None, confidence: float = 0.95) -> ThreeLayer:
    """The three layers of ``app`` (a ws/wss run) and, if given, an ICMP run to the same host."""
    a = analyze(app, confidence)
    transport = transport_of(app)
    network = loss = None
    if icmp is not None:
        r = icmp.rows
        got = r["recv_ns"] >= 0
        loss = 1.0 - float(got.mean()) if len(r) else None
        network = describe((r["recv_ns"][got] - r["send_ns"][got]) * 1e-9, confidence, "icmp")["icmp.p50"]
    app_p50, app_min = a.metrics["rtt_app.p50"], a.metrics["rtt_app.min"].value
    problems = check(app_p50, app_min, transport)
    return ThreeLayer(app_p50, app_min, transport, network, loss, not problems, problems)
