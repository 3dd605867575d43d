"""How long must a loss-grid flow run? The verdicts of test_tcp_loss_grid_cubic_vs_bbr, recomputed
from the first T seconds of full-length flows (numbers printed, no pass/fail).

    [NETSLO_STUDY_REPS=3] python -m pytest benchmarks/study_loss_grid_duration.py -s -p no:cacheprovider \
        --netslo-provider netns

(a ``--netslo-*`` option: without one the netslo plugin stays inert and its fixtures are not set up.)

Not collected by ``pytest benchmarks`` (run it by path). For each loss of the grid (50 ms RTT, 50 Mbit/s
netem bottleneck, as the gate's test) it runs a Cubic and a BBR flow of ``FULL_S`` seconds, REPS
times, reading TCP_INFO every 100 ms (``netslo.traffic.probes.bulk``). A flow truncated at T is the same flow
up to T, so the throughput over [omit, T] of the full flow is what a T-second flow would have
measured. Per loss and T it prints, over the repetitions: the smallest BBR/Cubic throughput ratio
with both flows T long and with a T-long BBR against a full-length Cubic (the test asserts >= 1 from
1 % loss), the largest Cubic/3xMathis ratio at the loss each Cubic flow met (asserted <= 1 there),
BBR over [omit, T] relative to its full-length value, and the coefficient of variation of each
algorithm's throughput.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from netslo.impair.spec import parse
from netslo.studies.qos import tcpflow
from netslo.traffic.probes.bulk import bulk

LOSS_GRID = ("0.01%", "0.1%", "1%", "3%")
FULL_S, OMIT_S = 6.0, 1.0
WINDOWS_S = (2.0, 3.0, 4.0, 5.0, 6.0)
RTT_S = 0.050


def throughput_mbit(series: list, start: float, end: float) -> float:
    """Mbit/s acknowledged between the first TCP_INFO sample at or after ``start`` and the last at or before ``end``."""
    a = [s for s in series if start <= s[0] <= end + 1e-9]
    if len(a) < 2:
        return 0.0
    return (a[-1][1] - a[0][1]) * 8 / (a[-1][0] - a[0][0]) / 1e6


@pytest.fixture(scope="module")
def reps() -> int:
    return int(os.environ.get("NETSLO_STUDY_REPS", "3"))


def test_loss_grid_duration(netslo_impaired_cluster, reps):
    env = netslo_impaired_cluster
    client = env.client("cross-node")
    flows: dict[str, list[dict]] = {}
    for loss in LOSS_GRID:
        data = parse({"delay": "25ms", "loss": loss, "rate": "50mbit", "limit": 10000})
        acks = parse({"delay": "25ms"}).with_direction("ingress")
        env.apply(client, [data, acks], count=1000).raise_if_not_realized()
        try:
            for _ in range(reps):
                for cc in ("cubic", "bbr"):
                    flows.setdefault(f"{loss} {cc}", []).append(
                        bulk(env.cluster, client, env.server, env.ports, duration=FULL_S, omit=OMIT_S, cc=cc))
        finally:
            env.clear()
    print(f"\nloss grid, {reps} repetitions of {FULL_S:g} s flows, throughput over [{OMIT_S:g} s, T], "
          f"kernel {env.kernel}")
    print(f"{'loss':>6} {'T':>4} {'cubic Mbit/s':>22} {'bbr Mbit/s':>22} {'min bbr/cubic':>14} "
          f"{'min bbr/cubic(full)':>20} {'max cubic/3Mathis':>18} {'bbr/bbr(full)':>14} {'CV cubic':>9} {'CV bbr':>7}")
    for loss in LOSS_GRID:
        # the gate's bound: Mathis at the loss each Cubic flow met (its retransmitted share)
        bound = np.array([tcpflow.mathis_bps(RTT_S, tcpflow.loss_met(f), f["snd_mss"] or 1448) / 1e6
                          for f in flows[f"{loss} cubic"]])
        rate = {cc: {t: np.array([throughput_mbit(f["series"], OMIT_S, t) for f in flows[f"{loss} {cc}"]])
                     for t in WINDOWS_S} for cc in ("cubic", "bbr")}
        for t in WINDOWS_S:
            cu, bb = rate["cubic"][t], rate["bbr"][t]
            cu_full, bb_full = rate["cubic"][FULL_S], rate["bbr"][FULL_S]
            rel = bb / bb_full
            print(f"{loss:>6} {t:>4g} {' '.join(f'{x:6.2f}' for x in cu):>22} {' '.join(f'{x:6.2f}' for x in bb):>22} "
                  f"{np.min(bb / cu):>14.2f} {np.min(bb / cu_full):>20.2f} {np.max(cu / (3 * bound)):>18.2f} "
                  f"{f'{rel.min():.2f}..{rel.max():.2f}':>14} "
                  f"{np.std(cu, ddof=1) / np.mean(cu):>9.2f} {np.std(bb, ddof=1) / np.mean(bb):>7.2f}")
