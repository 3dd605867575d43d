"""Do interleaved arms measure what one arm after the other did? Slow start after idle, both ways
(numbers printed, no pass/fail).

    [NETSLO_STUDY_REPS=3] python -m pytest benchmarks/study_ssai_interleave.py -s -p no:cacheprovider

Not collected by ``pytest benchmarks`` (run it by path). The path of the gate's
``test_slow_start_after_idle``: netem 10 ms each way on the client (20 ms RTT; user-mode-linux where
the host has no sch_netem), Cubic, 100 kB requests with 1 kB answers every 1 s, 12 per setting.
Each repetition measures tcp_slow_start_after_idle = 1 and 0 in two ways, in rotated order:
``sequential`` = one helper run per setting, one after the other (what the gate did until
2026-11-25); ``interleaved`` = one helper run with both settings as arms 0.5 s apart
(``tcpflow messages --arm cubic:1 --arm cubic:0``, what it does now). Printed per setting and way:
the P50 flow completion time of every repetition (first message of a run excluded: a cold start in
both), the pooled P50, the Mann-Whitney p of sequential vs interleaved, the cwnd each message
started with, and the P50 ratio 1 / 0 the gate asserts on.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from netslo.stats.analysis import mann_whitney
from netslo.studies.qos import experiments, tcpflow

SEC = {"size": 100_000, "count": 12, "interval": 1.0}
BOTH = ("egress", "ingress")


@pytest.fixture(scope="module")
def reps() -> int:
    return int(os.environ.get("NETSLO_STUDY_REPS", "3"))


def _sequential(env, client) -> dict:
    """Each setting in a helper run of its own, one after the other."""
    return {v: experiments.message_arms(env.cluster, client, env.server.ip, env.ports["tcp"], SEC, [f"cubic:{v}"])[0]
            for v in ("1", "0")}


def test_ssai_interleaved_vs_sequential(netslo_impairment, netslo_impaired_cluster, reps):
    env = netslo_impaired_cluster
    client, _ = netslo_impairment({"delay": "10ms"}, directions=BOTH, count=1000)
    fct = {(way, v): [] for way in ("sequential", "interleaved") for v in ("1", "0")}
    cwnd = {k: [] for k in fct}
    for r in range(reps):
        ways = ("sequential", "interleaved") if r % 2 == 0 else ("interleaved", "sequential")
        for way in ways:
            runs = _sequential(env, client) if way == "sequential" else \
                experiments.ssai_pair(env.cluster, client, env.server.ip, env.ports["tcp"], SEC)
            for v, res in runs.items():
                fct[(way, v)].append(np.array(tcpflow.column(res, "fct_s")[1:]))
                cwnd[(way, v)].append(tcpflow.column(res, "cwnd_start"))
    print(f"\nslow start after idle, 100 kB every {SEC['interval']:g} s, RTT 20 ms, {reps} repetitions of "
          f"{SEC['count']} messages per setting, kernel {env.kernel}")
    print(f"{'setting':>8} {'way':>12} {'P50 FCT per repetition (ms)':>34} {'pooled P50':>11} "
          f"{'MW p vs other way':>18}")
    for v in ("1", "0"):
        seq, inter = np.concatenate(fct[("sequential", v)]), np.concatenate(fct[("interleaved", v)])
        p = mann_whitney(seq, inter)
        for way in ("sequential", "interleaved"):
            per = " ".join(f"{np.median(x) * 1e3:6.1f}" for x in fct[(way, v)])
            pooled = np.median(np.concatenate(fct[(way, v)])) * 1e3
            print(f"{'ssai=' + v:>8} {way:>12} {per:>34} {pooled:>9.1f}ms {p:>18.2g}")
    for way in ("sequential", "interleaved"):
        ratios = [np.median(a) / np.median(b) for a, b in zip(fct[(way, "1")], fct[(way, "0")])]
        print(f"P50 ratio ssai 1/0, {way}: " + ", ".join(f"x{x:.2f}" for x in ratios)
              + f"; cwnd_start ssai=1 {cwnd[(way, '1')][0]}, ssai=0 {cwnd[(way, '0')][0]}")
