"""How long must a congestion-grid flow run? The throughput verdicts of test_congestion_control_loss_grid,
recomputed from the first T seconds of full-length flows (numbers printed, no pass/fail).

    [NETSLO_STUDY_REPS=3] python -m pytest -m cni benchmarks/study_congestion_grid_duration.py -s -p no:cacheprovider

Not collected by ``pytest benchmarks`` (run it by path). Each repetition runs the gate's grid
(``qos.congestion``: tbf bottleneck, random per-segment drop, every algorithm at every loss) with flows
``FULL_S`` long. A flow cut at T is the same flow up to T, so its TCP_INFO rows up to T are what a
T-second flow would have sampled. Per T it prints, over every repetition: the lossless flows' smallest
and largest throughput over [0.5 s, T] as a share of the bottleneck's goodput (the test asserts within
±tolerance), the lossy flows' largest share (asserted ≤ 1 + tolerance), the smallest BBR / Cubic ratio at
``bbr_vs_cubic_loss`` (asserted ≥ 1), and the largest coefficient of variation of an (algorithm, loss)
point over the repetitions. The retransmission and realized-loss checks use per-flow counters and
are not recomputed here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from netslo.gate.plugin.qos import netslo_bandwidth_pods, netslo_qos_pods, netslo_qos_spec  # noqa: F401
from netslo.studies.qos import conformance, experiments, tcpflow

FULL_S = 2.0
OMIT_S = 0.5
WINDOWS_S = (1.0, 1.5, 2.0)

pytestmark = pytest.mark.cni


@pytest.fixture(scope="module")
def reps() -> int:
    return int(os.environ.get("NETSLO_STUDY_REPS", "3"))


def _until(flow: dict, end: float) -> dict:
    """The flow's TCP_INFO rows up to ``end`` s: what a flow of that length would have sampled."""
    t = flow["fields"].index("t_s")
    return dict(flow, rows=[r for r in flow["rows"] if r[t] <= end + 1e-9])


def test_congestion_grid_duration(netslo_qos_pods, netslo_qos_spec, reps):
    sec = dict(netslo_qos_spec["congestion"], duration=FULL_S)
    losses = (0.0, *sec["loss"])
    runs = [experiments.loss_grid(netslo_qos_pods, sec, losses) for _ in range(reps)]
    goodput = sec["bottleneck"] * conformance.tcp_payload_fraction(netslo_qos_pods.cluster.mtu)
    tol, versus = sec["tolerance"], sec["bbr_vs_cubic_loss"]
    print(f"\n{reps} grids of {len(runs[0])} flows, {FULL_S:g} s each; throughput over [{OMIT_S:g} s, T], "
          f"bottleneck goodput {goodput / 1e6:.2f} Mbit/s, tolerance {tol:.0%}")
    print(f"{'T':>5s}  {'lossless min..max':>18s}  {'lossy max':>9s}  {'BBR/Cubic at ' + format(versus, '.0%'):>16s}  "
          f"{'largest CV':>10s}  {'TCP_INFO rows after omit':>24s}")
    for end in WINDOWS_S:
        share: dict = {}
        rows = []
        for points in runs:
            for p in points:
                cut = _until(p.flow, end)
                share.setdefault((p.cc, p.loss), []).append(tcpflow.throughput(cut, OMIT_S) / goodput)
                rows.append(sum(1 for x in tcpflow.column(cut, "t_s") if x >= OMIT_S))
        lossless = [x for (cc, loss), v in share.items() if loss == 0 for x in v]
        lossy = [x for (cc, loss), v in share.items() if loss > 0 for x in v]
        ratio = min(b / c for b, c in zip(share[("bbr", versus)], share[("cubic", versus)]))
        cv = max(float(np.std(v) / np.mean(v)) for v in share.values())
        print(f"{end:4.1f}s  {min(lossless):8.3f}..{max(lossless):<8.3f}  {max(lossy):9.3f}  {ratio:16.2f}  "
              f"{cv:10.1%}  {min(rows):>24d}")
