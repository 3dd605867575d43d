"""Probe floor and maximum open-loop rate on a bare veth pair (numbers printed, nothing asserted on time).

- floor: netslo UDP probe <-> netslo responder vs a minimal C echo pair compiled here, same path,
  same 1 kHz schedule, 64-byte datagrams, 5000 round trips: median / P99 RTT in µs.
- max rate: the highest rate (packets/s) at which the netslo UDP probe keeps its schedule (median
  timer error below one period) with loss < 0.1 %; timer error P99 reported per rate.
Run: ``python -m pytest benchmarks/bench_probe_floor.py -s`` (root).
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from netslo import stats
from netslo.samples import SampleSet
from benchmarks.veth import VethPair

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COUNT = 5000


@pytest.fixture(scope="module")
def pair():
    p = VethPair()
    yield p
    p.close()


@pytest.fixture(scope="module")
def c_ref(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the C reference")
    out = tmp_path_factory.mktemp("cref") / "udp_echo_ref"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(HERE / "c" / "udp_echo_ref.c")], check=True)
    return str(out)


def _agent(pair, ns, *args):
    return pair.argv(ns, sys.executable, "-m", "netslo.agent", *args)


def _netslo_probe(pair, count, interval_us, size=64):
    run = subprocess.run(_agent(pair, pair.a, "probe", "udp", "--target", "10.99.0.2:7000", "--count", str(count),
                                "--interval", f"{interval_us}us", "--req-size", str(size), "--resp-size", str(size),
                                "--wait", "0.5s", "--out", "-"), capture_output=True, check=True, cwd=ROOT)
    s = SampleSet.from_bytes(run.stdout)
    s.meta["shared_clock"] = True
    return stats.analyze(s)


def _responder(pair):
    p = subprocess.Popen(_agent(pair, pair.b, "serve", "udp", "--port", "7000"), cwd=ROOT)
    pair.procs.append(p)
    time.sleep(1.0)
    return p


def test_probe_floor_vs_c_reference(benchmark, pair, c_ref):
    _responder(pair)
    pair.spawn(pair.b, c_ref, "server", "7100")
    time.sleep(0.3)

    def measure():
        ours = _netslo_probe(pair, COUNT, 1000)
        out = subprocess.run(pair.argv(pair.a, c_ref, "client", "10.99.0.2", "7100", str(COUNT), "1000", "64"),
                             capture_output=True, text=True, check=True).stdout.split()
        ref = np.sort(np.array([int(x) for x in out if int(x) >= 0], dtype=np.float64) * 1e-9)
        return ours, ref

    ours, ref = benchmark.pedantic(measure, rounds=1, iterations=1)
    row = {
        "netslo_median_us": ours.metrics["rtt.p50"].value * 1e6, "netslo_p99_us": ours.metrics["rtt.p99"].value * 1e6,
        "c_median_us": stats.nearest_rank(ref, 50) * 1e6, "c_p99_us": stats.nearest_rank(ref, 99) * 1e6,
        "netslo_timer_error_p99_us": ours.metrics["timer_error.p99"].value * 1e6,
    }
    benchmark.extra_info.update({k: round(v, 1) for k, v in row.items()})
    print("\nprobe floor (bare veth, 64 B, 1 kHz, %d round trips):" % COUNT)
    print("  netslo  median %(netslo_median_us)7.1f µs   p99 %(netslo_p99_us)7.1f µs" % row)
    print("  C ref   median %(c_median_us)7.1f µs   p99 %(c_p99_us)7.1f µs" % row)
    assert ours.counts["received"] == COUNT and len(ref) == COUNT


RATES = (1000, 2000, 5000, 10000, 20000, 50000)


def test_max_sustained_open_loop_rate(benchmark, pair):
    if not any(p.poll() is None for p in pair.procs):
        _responder(pair)

    def sweep():
        rows = []
        for rate in RATES:
            interval_us = 1e6 / rate
            a = _netslo_probe(pair, int(rate * 2), interval_us)
            rows.append((rate, a.metrics["timer_error.p50"].value * 1e6, a.metrics["timer_error.p99"].value * 1e6,
                         a.metrics["loss"].value, a.metrics["rtt.p99"].value * 1e6))
        return rows

    rows = benchmark.pedantic(sweep, rounds=1, iterations=1)
    kept = [r for r in rows if r[1] < 1e6 / r[0] and r[3] < 0.001]
    best = max((r[0] for r in kept), default=0)
    benchmark.extra_info["max_sustained_pps"] = best
    benchmark.extra_info["sweep"] = [dict(zip(("pps", "timer_p50_us", "timer_p99_us", "loss", "rtt_p99_us"),
                                              map(lambda v: round(v, 4), r))) for r in rows]
    print("\nopen-loop rate sweep (2 s each):  pps  timer-err p50/p99 (µs)  loss  rtt p99 (µs)")
    for r in rows:
        print(f"  {r[0]:>6}  {r[1]:8.1f} / {r[2]:8.1f}  {r[3] * 100:6.3f}%  {r[4]:8.1f}")
    print(f"  max sustained: {best} packets/s")
    assert rows
