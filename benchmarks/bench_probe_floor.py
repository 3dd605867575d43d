"""Probe floor and maximum open-loop rate on a bare veth pair (numbers printed, nothing asserted on time).

- floor: netslo UDP probe <-> netslo responder vs a minimal C echo pair compiled here, same path,
  same 1 kHz schedule, 64-byte datagrams, 5000 round trips: median / P99 RTT in µs.
- max rate: the highest rate (packets/s) at which the netslo UDP probe keeps its schedule (median
  timer error below one period) with loss < 0.1 %, for each sender (``--sender python``, the default,
  and ``native``, the compiled loop); per rate the timer error P50/P99 as the sender read its clock
  and, as a cross-check on another process's clock, the P99 of the responder's receive time minus
  the schedule, less its median (an upper bound: it adds the path's and the responder's jitter).
Run: ``python -m pytest benchmarks/bench_probe_floor.py -s`` (root).
"""

import io
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.veth import VethPair
from netslo.report.series import series
from netslo.stats import analysis as stats
from netslo.stats.samples import SampleSet

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


def _netslo_samples(pair, count, interval_us, size=64, sender="python") -> SampleSet:
    run = subprocess.run(_agent(pair, pair.a, "probe", "udp", "--target", "10.99.0.2:7000", "--count", str(count),
                                "--interval", f"{interval_us}us", "--req-size", str(size), "--resp-size", str(size),
                                "--wait", "0.5s", "--sender", sender, "--out", "-"),
                         capture_output=True, check=True, cwd=ROOT)
    s = SampleSet.from_bytes(run.stdout)
    s.meta["shared_clock"] = True
    return s


def _seen_send_jitter_us(s: SampleSet) -> float:
    """P99 of (responder receive time - schedule) less its median, µs: the sender's timing error
    as another process saw it, plus the path's and the responder's own jitter."""
    r = s.rows[s.rows["srv_rx_ns"] >= 0]
    d = (r["srv_rx_ns"] - r["sched_ns"]).astype(np.float64)
    return float(np.percentile(d, 99) - np.median(d)) / 1e3 if len(d) else float("nan")


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
        s = _netslo_samples(pair, COUNT, 1000)
        out = subprocess.run(pair.argv(pair.a, c_ref, "client", "10.99.0.2", "7100", str(COUNT), "1000", "64"),
                             capture_output=True, text=True, check=True).stdout.split()
        ref = np.sort(np.array([int(x) for x in out if int(x) >= 0], dtype=np.float64) * 1e-9)
        return s, ref

    s, ref = benchmark.pedantic(measure, rounds=1, iterations=1)
    ours, whole = stats.analyze(s), np.sort(series(s, "round_trip"))
    row = {
        "netslo_median_us": ours.metrics["rtt.p50"].value * 1e6, "netslo_p99_us": ours.metrics["rtt.p99"].value * 1e6,
        "netslo_round_trip_median_us": stats.nearest_rank(whole, 50) * 1e6,
        "netslo_round_trip_p99_us": stats.nearest_rank(whole, 99) * 1e6,
        "netslo_app_median_us": ours.metrics["rtt_app.p50"].value * 1e6,
        "netslo_app_p99_us": ours.metrics["rtt_app.p99"].value * 1e6,
        "c_median_us": stats.nearest_rank(ref, 50) * 1e6, "c_p99_us": stats.nearest_rank(ref, 99) * 1e6,
        "netslo_timer_error_p99_us": ours.metrics["timer_error.p99"].value * 1e6,
    }
    benchmark.extra_info.update({k: round(v, 1) for k, v in row.items()})
    print("\nprobe floor (bare veth, 64 B, 1 kHz, %d round trips):" % COUNT)
    print("  netslo  median %(netslo_median_us)7.1f µs   p99 %(netslo_p99_us)7.1f µs   (rtt: kernel stamps where the "
          "kernel gives them, the responder's residence left out)" % row)
    print("  netslo  median %(netslo_round_trip_median_us)7.1f µs   p99 %(netslo_round_trip_p99_us)7.1f µs   (round trip: "
          "the same stamps with the responder's residence in it)" % row)
    print("  netslo  median %(netslo_app_median_us)7.1f µs   p99 %(netslo_app_p99_us)7.1f µs   (rtt_app: user space, "
          "like the C reference)" % row)
    print("  C ref   median %(c_median_us)7.1f µs   p99 %(c_p99_us)7.1f µs" % row)
    assert ours.counts["received"] == COUNT and len(ref) == COUNT


RATES = (1000, 2000, 5000, 10000, 20000, 50000, 100000)
SENDERS = ("python", "native")


def test_max_sustained_open_loop_rate(benchmark, pair):
    if not any(p.poll() is None for p in pair.procs):
        _responder(pair)

    def sweep():
        rows = []
        for sender in SENDERS:
            for rate in RATES:
                s = _netslo_samples(pair, int(rate * 2), 1e6 / rate, sender=sender)
                a = stats.analyze(s)
                rows.append((sender, rate, a.metrics["timer_error.p50"].value * 1e6,
                             a.metrics["timer_error.p99"].value * 1e6, a.metrics["loss"].value,
                             a.metrics["rtt.p99"].value * 1e6, _seen_send_jitter_us(s)))
        return rows

    rows = benchmark.pedantic(sweep, rounds=1, iterations=1)
    names = ("sender", "pps", "timer_p50_us", "timer_p99_us", "loss", "rtt_p99_us", "seen_jitter_p99_us")
    benchmark.extra_info["sweep"] = [dict(zip(names, (r[0], *(round(v, 4) for v in r[1:])))) for r in rows]
    print("\nopen-loop rate sweep (2 s each):  sender  pps  timer-err p50/p99 (µs)  loss  rtt p99 (µs)  "
          "responder-seen send jitter p99 (µs)")
    for r in rows:
        print(f"  {r[0]:>6}  {r[1]:>6}  {r[2]:8.1f} / {r[3]:8.1f}  {r[4] * 100:6.3f}%  {r[5]:8.1f}  {r[6]:8.1f}")
    for sender in SENDERS:
        kept = [r[1] for r in rows if r[0] == sender and r[2] < 1e6 / r[1] and r[4] < 0.001]
        benchmark.extra_info[f"max_sustained_pps_{sender}"] = best = max(kept, default=0)
        print(f"  max sustained, {sender} sender: {best} packets/s")
    assert len(rows) == len(SENDERS) * len(RATES)


STAMPED = (("python", 20000), ("native", 50000))


def test_send_timing_seen_by_the_kernel(benchmark, pair):
    """Each sender's own timer error against an independent reading: the kernel's receive stamp of
    every request on the veth peer (taken inside the sender's send(), ``kernel_rx_stamps.py``).
    Both are spreads about their medians (the stamps have another clock and a constant offset)."""
    if not any(p.poll() is None for p in pair.procs):
        _responder(pair)

    def measure():
        rows = []
        for sender, rate in STAMPED:
            n, interval_ns = rate * 2, round(1e9 / rate)
            cap = subprocess.Popen(pair.argv(pair.b, sys.executable, str(HERE / "kernel_rx_stamps.py"), "eth0", "7000",
                                             str(n), "30"), stdout=subprocess.PIPE, text=True, cwd=ROOT)
            assert cap.stdout.readline().strip() == "ready"
            s = _netslo_samples(pair, n, interval_ns / 1e3, sender=sender)
            seq, stamp = np.loadtxt(io.StringIO(cap.communicate(timeout=60)[0]), dtype=np.int64, ndmin=2).T
            seen = stamp - seq * interval_ns
            own = (s.rows["send_app_ns"] - s.rows["sched_ns"])[seq]   # the sender's clock, not its kernel stamp
            rows.append((sender, rate, len(seq) / n,
                         np.percentile(own - np.median(own), 99) / 1e3, np.percentile(seen - np.median(seen), 99) / 1e3,
                         np.percentile(np.abs(np.diff(seen)), 99) / 1e3))
        return rows

    rows = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["kernel_seen"] = [dict(zip(("sender", "pps", "captured", "own_p99_us", "kernel_p99_us",
                                                     "kernel_step_p99_us"), r)) for r in rows]
    print("\nsend timing, own clock vs kernel receive stamps (2 s each): sender  pps  captured  "
          "P99 about the median (µs): own / kernel-seen;  kernel-seen |period error| P99 (µs)")
    for r in rows:
        print(f"  {r[0]:>6}  {r[1]:>6}  {r[2]:7.2%}  {r[3]:8.1f} / {r[4]:8.1f}  {r[5]:8.1f}")
    assert all(r[2] > 0.99 for r in rows), rows   # the reference saw (nearly) every request
