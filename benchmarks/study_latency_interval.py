"""Does the send period change what the latency gate measures? 2 ms vs shorter periods, interleaved
(numbers printed, no pass/fail).

    [NETSLO_STUDY_ROUNDS=8] [NETSLO_STUDY_INTERVALS=2ms,1ms,500us] \
        python -m pytest benchmarks/study_latency_interval.py -s -p no:cacheprovider -m ""

Not collected by ``pytest benchmarks`` (run it by path). The gate's UDP and TCP-RR scenarios of
``netslo/gate/test_latency.py`` (both placements, every profile: 10 scenarios), each measured as the
gate measures it (``runner.run``, the SLO file's sample count) at every period in
``NETSLO_STUDY_INTERVALS``. One round measures every scenario at every period, the periods of a
scenario back to back in rotated order, so the arms of a comparison are minutes apart at most.
Printed per scenario, metric (RTT P50, RTT P99, IPDV P99) and period: the median over rounds, the
median of the per-round ratio to the first period (paired by round) with its range, and the
Wilcoxon signed-rank p of those pairs; beside it the A/A yardstick: the ratio of the first period's
value in round r+1 to round r (what repetition alone moves). A shorter period is as good as the
longer one for the gate when its ratios lie inside the A/A spread and the paired test finds no shift.
"""

from __future__ import annotations

import os

import numpy as np
from scipy import stats as sps

from netslo.core import units
from netslo.slo import runner
from netslo.slo.scenario import Scenario, matrix

SCENARIOS = (matrix(protocols=("udp", "tcp-rr"), profiles=("1k",)) + matrix(protocols=("udp",), profiles=("64b",))
             + matrix(protocols=("tcp-rr",), profiles=("10k", "100k")))
METRICS = ("rtt.p50", "rtt.p99", "ipdv.p99")


def _periods() -> list[float]:
    text = os.environ.get("NETSLO_STUDY_INTERVALS", "2ms,1ms,500us")
    return [units.duration(t.strip(), "NETSLO_STUDY_INTERVALS") for t in text.split(",")]


def test_latency_interval(netslo_cluster, netslo_responder, netslo_client_for, netslo_slo):
    rounds = int(os.environ.get("NETSLO_STUDY_ROUNDS", "8"))
    periods = _periods()
    server, ports = netslo_responder
    # value[(scenario id, period, metric)] = one value per round
    value: dict[tuple, list] = {}
    for r in range(rounds):
        for s in SCENARIOS:
            order = periods[r % len(periods):] + periods[:r % len(periods)]
            for period in order:
                sc = Scenario(s.placement, s.protocol, s.profile, interval=period)
                out = runner.run(netslo_cluster, netslo_client_for(s.placement), server, ports, sc, netslo_slo)
                for m in METRICS:
                    est = out.analysis.metrics.get(m)
                    value.setdefault((s.id, period, m), []).append(est.value if est is not None else np.nan)
    print(f"\nsend period study: {rounds} rounds x {len(SCENARIOS)} scenarios x periods "
          f"{', '.join(units.format_duration(p) for p in periods)}; {netslo_slo.sampling.samples} requests each")
    ref = periods[0]
    ratio_head = "ratio to " + units.format_duration(ref)
    print(f"{'scenario':26} {'metric':9} {'period':>7} {'median (us)':>11} {ratio_head:>22}"
          f" {'Wilcoxon p':>10} {'A/A ratio r+1/r':>20}")
    for s in SCENARIOS:
        for m in METRICS:
            base = np.array(value[(s.id, ref, m)])
            if np.all(np.isnan(base)):
                continue
            aa = base[1:] / base[:-1]
            aa_text = f"{np.median(aa):.2f} [{aa.min():.2f}, {aa.max():.2f}]" if len(aa) else "-"
            for period in periods:
                v = np.array(value[(s.id, period, m)])
                line = f"{s.id:26} {m:9} {units.format_duration(period):>7} {np.median(v) * 1e6:11.1f}"
                if period != ref:
                    ratio = v / base
                    p = sps.wilcoxon(v, base).pvalue if len(v) > 1 and np.any(v != base) else float("nan")
                    line += f" {np.median(ratio):8.2f} [{ratio.min():.2f}, {ratio.max():.2f}] {p:10.3g} {aa_text:>20}"
                print(line)
