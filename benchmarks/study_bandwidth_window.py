"""How long must a bandwidth-conformance flow run? The verdicts of test_bandwidth_annotation_conformance
and of its wrong-limit control, recomputed from windows of full-length flows (numbers printed, no pass/fail).

    [NETSLO_STUDY_REPS=3] python -m pytest -m cni benchmarks/study_bandwidth_window.py -s -p no:cacheprovider

Not collected by ``pytest benchmarks`` (run it by path). Each repetition runs the gate's five shaped
flows (egress/ingress x same-node/cross-node at the annotated limit, and the control whose shaper runs
at ``wrong_factor`` x the limit) for ``FULL_S`` seconds with ``qos.bandwidth``'s bin, congestion control
and tolerance, and keeps the 100 ms delivered-rate bins. A flow cut at T is the same flow up to T, so
the bins of [s, s + STEADY_S] are what a (s + STEADY_S)-second flow judged from s would have had:
the same number of steady bins (``STEADY_S`` / bin) as the gate's 4 s flow judged from 2 s. Per
window start s it prints, over every flow: the verdicts (each annotated flow must conform, each
control must be nonconform on its whole CI), the largest distance of a window bin from the expected
goodput as a share of it (the tolerance is 10 %), and the widest steady-state CI; plus, per flow,
the end of the transient (``time_to_conform_s`` of the full flow's delivered bins).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from netslo.gate.plugin.qos import netslo_bandwidth_pods, netslo_qos_spec  # noqa: F401
from netslo.gate.test_qos import _bandwidth_pods
from netslo.impair.shaping import bandwidth
from netslo.studies.qos import conformance, experiments, tcpflow

FULL_S = 4.0
STEADY_S = 2.0
STARTS_S = (0.5, 1.0, 1.5, 2.0)
CASES = [("egress", "same-node"), ("egress", "cross-node"), ("ingress", "same-node"), ("ingress", "cross-node")]

pytestmark = pytest.mark.cni


@pytest.fixture(scope="module")
def reps() -> int:
    return int(os.environ.get("NETSLO_STUDY_REPS", "3"))


def _flow(pods, sec, direction, placement, factor=1.0) -> dict:
    """One full-length flow: its delivered bins (end times s, rates bit/s), limit, payload fraction."""
    c = pods.cluster
    limit = sec[direction]
    if factor == 1.0:
        sender, dst, port, shaped = _bandwidth_pods(pods, direction, placement, f"{limit:.0f}")
        name = f"{direction}-{placement}"
    else:   # the control: the pod's shaper replaced by one at factor x the annotated rate
        shaped = sender = pods.pod("qos-bw-wrong", c.nodes[1], annotations={bandwidth.EGRESS_KEY: f"{limit:.0f}"})
        dst, port = pods.server.ip, pods.ports["tcp"]
        ns, host_if = c.node_netns(shaped.node), c.host_interface(shaped)
        bandwidth.remove(bandwidth.Shaping(ns, host_if, None, limit, bandwidth.ifb_name(host_if)))
        bandwidth.install(ns, host_if, None, limit * factor)
        name = "wrong-limit control"
    mtu = bandwidth.link_mtu(c.node_netns(shaped.node), c.host_interface(shaped))
    flow = experiments.run_flow(c, sender, dst, port, FULL_S, sec["cc"], sec["bin"])
    ts, rs = tcpflow.rates(flow, "acked")
    return {"name": name, "ts": np.asarray(ts), "rs": np.asarray(rs), "limit": limit,
            "frac": conformance.tcp_payload_fraction(mtu), "conforming": factor == 1.0}


def _judge(f: dict, sec: dict, start: float, end: float):
    keep = f["ts"] <= end + 1e-9
    return conformance.judge(list(f["ts"][keep]), list(f["rs"][keep]), f["limit"], sec["tolerance"], start, f["frac"])


def test_bandwidth_window(netslo_bandwidth_pods, netslo_qos_spec, reps):
    sec = dict(netslo_qos_spec["bandwidth"])
    flows = []
    for _ in range(reps):
        flows += [_flow(netslo_bandwidth_pods, sec, d, p) for d, p in CASES]
        flows.append(_flow(netslo_bandwidth_pods, sec, "egress", "cross-node", sec["wrong_factor"]))
    print(f"\n{len(flows)} flows of {FULL_S:g} s, {sec['bin'] * 1e3:g} ms bins, window {STEADY_S:g} s "
          f"({STEADY_S / sec['bin']:.0f} bins), tolerance {sec['tolerance']:.0%}")
    for f in flows:
        full = _judge(f, sec, FULL_S - STEADY_S, FULL_S)
        print(f"  {f['name']:22s} transient over after {full.time_to_conform_s:.2f} s; first bins (Mbit/s): "
              + ", ".join(f"{r / 1e6:.0f}" for r in f["rs"][:4]))
    print(f"{'window':>12s}  {'verdicts as the gate wants':>26s}  {'largest bin distance (annotated)':>32s}  "
          f"{'widest CI / expected':>20s}")
    for s in STARTS_S:
        ok, dist, width = 0, 0.0, 0.0
        for f in flows:
            v = _judge(f, sec, s, s + STEADY_S)
            ok += (v.verdict == "conform") if f["conforming"] else (v.verdict == "nonconform" and not v.by_point)
            width = max(width, (v.steady_hi - v.steady_lo) / v.expected_bps)
            if f["conforming"]:
                inside = (f["ts"] - sec["bin"] >= s - 1e-9) & (f["ts"] <= s + STEADY_S + 1e-9)
                dist = max(dist, float(np.max(np.abs(f["rs"][inside] / v.expected_bps - 1))))
        print(f"[{s:.1f}, {s + STEADY_S:.1f}] s  {ok:>14d}/{len(flows):<11d}  {dist:>32.1%}  {width:>20.2%}")
