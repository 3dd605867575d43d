"""Do staggered sweep points measure what one point after the other did? (numbers printed, no pass/fail)

    [NETSLO_STUDY_REPS=3] python -m pytest benchmarks/study_sweep_stagger.py -s -p no:cacheprovider

Not collected by ``pytest benchmarks`` (run it by path). The send-interval sweep of
``tests/cni/test_protocols.py`` (WebSocket, cross-node, 1k and 100k requests with 1k answers,
``count_for(interval)`` requests per point) measured two ways per repetition, in rotated order:
``sequential`` = the 1k point, then the 100k point (what the gate did until 2026-11-25);
``staggered`` = both at once, the 100k schedule half an interval after the 1k one
(``interleave.staggered``, what it does now). Printed per point: the P50 RTT of each way (the
repetitions pooled), the P50 difference staggered - sequential with its 95 % bootstrap CI
(``interleave.p50_shift``), the Mann-Whitney p, and the seconds each way took.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from netslo.interleave import p50_shift, rtt, staggered
from netslo.runner import probe_spec
from netslo.samples import SampleSet
from netslo.stats import mann_whitney
from netslo.workloads import SEND_INTERVALS, count_for, label, sweep

PLACEMENT = "cross-node"
SWEEP = sweep(PLACEMENT, "ws", profiles=("1k", "100k"), intervals=SEND_INTERVALS)


@pytest.fixture(scope="module")
def reps() -> int:
    return int(os.environ.get("NETSLO_STUDY_REPS", "3"))


def test_sweep_staggered_vs_sequential(netslo_cluster, netslo_responder, netslo_client_for, netslo_proto_ports,
                                       netslo_slo, reps):
    server, client = netslo_responder[0], netslo_client_for(PLACEMENT)
    got = {}            # (way, label) -> [SampleSet]
    took = {"sequential": 0.0, "staggered": 0.0}
    for r in range(reps):
        for interval in SEND_INTERVALS:
            points = [sc for sc in SWEEP if sc.interval == interval]
            specs = {label(sc): probe_spec(sc, server, netslo_proto_ports, netslo_slo.sampling, count_for(interval))
                     for sc in points}
            ways = ("sequential", "staggered") if r % 2 == 0 else ("staggered", "sequential")
            for way in ways:
                t0 = time.monotonic()
                runs = ({k: netslo_cluster.probe(client, s) for k, s in specs.items()} if way == "sequential"
                        else staggered(netslo_cluster, client, specs))
                took[way] += time.monotonic() - t0
                for k, s in runs.items():
                    got.setdefault((way, k), []).append(s)
    print(f"\nsend-interval sweep, {reps} repetitions, {PLACEMENT} ws; P50 RTT in µs, repetitions pooled")
    print(f"{'point':>30} {'n':>5} {'sequential':>11} {'staggered':>10} {'diff (95 % CI)':>26} {'MW p':>7}")
    for sc in SWEEP:
        k = label(sc)
        seq, stg = SampleSet.concat(got[("sequential", k)]), SampleSet.concat(got[("staggered", k)])
        d = p50_shift(seq, stg)
        print(f"{k:>30} {len(seq):>5} {np.median(rtt(seq)) * 1e6:>11.0f} {np.median(rtt(stg)) * 1e6:>10.0f} "
              f"{d.value * 1e6:>+8.0f} [{d.lo * 1e6:+7.0f}, {d.hi * 1e6:+7.0f}] {mann_whitney(rtt(seq), rtt(stg)):>7.2g}")
    print(f"seconds: sequential {took['sequential']:.1f}, staggered {took['staggered']:.1f} "
          f"({reps} repetitions of the whole sweep)")
