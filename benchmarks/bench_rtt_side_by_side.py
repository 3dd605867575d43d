"""RTT side by side on one bare veth pair: netslo (both senders, both definitions) against irtt,
sockperf, ping and the C echo reference, in interleaved rounds (numbers printed, nothing asserted).

    python benchmarks/bench_rtt_side_by_side.py [ROUNDS] [SECONDS] [RATE]     (root; default 3 5 1000)

Per round every tool sends 64-byte requests at RATE/s for SECONDS from namespace a to its server in
namespace b (``benchmarks/veth.py``), one tool after the other in a rotated order. Printed: each
round's P50/P99 (µs), then per tool the median over the rounds of each and its ratio to the better
of irtt and sockperf and to the C echo reference. What each tool's RTT is:

  netslo rtt        kernel TX stamp to kernel RX stamp less the responder's residence (its kernel RX
                    stamp to its send): irtt's definition at kernel clock points (docs/metrics.md)
  netslo round trip kernel TX stamp to kernel RX stamp with the responder's residence in it (series
                    ``round_trip``; what netslo reported as rtt until 2026-11-27)
  netslo rtt_app    user space before send to user space after the answer was read
  irtt              its ``delay.rtt``: client receive - client send - server processing time (irtt 0.9)
  sockperf          ping-pong, ``--full-rtt``, its summary percentiles (one request in flight)
  ping              ICMP echo, the kernel answers (``-i`` at the rate, 56-byte payload)
  C echo            ``benchmarks/c/udp_echo_ref.c``: CLOCK_MONOTONIC around send/poll/recv in C
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.veth import VethPair  # noqa: E402
from netslo.report.series import series  # noqa: E402
from netslo.stats import analysis as stats  # noqa: E402
from netslo.stats.samples import SampleSet  # noqa: E402

SIZE = 64
SERVER = "10.99.0.2"


def _pcts(rtt_s) -> tuple[float, float]:
    x = np.sort(np.asarray(rtt_s, dtype=np.float64))
    return stats.nearest_rank(x, 50) * 1e6, stats.nearest_rank(x, 99) * 1e6


def netslo(pair, sender: str, count: int, rate: int) -> dict:
    run = subprocess.run(pair.argv(pair.a, sys.executable, "-m", "netslo.agent", "probe", "udp", "--target",
                                   f"{SERVER}:7000", "--count", str(count), "--interval", f"{1e6 / rate:g}us",
                                   "--req-size", str(SIZE), "--resp-size", str(SIZE), "--wait", "0.5s",
                                   "--sender", sender, "--out", "-"), capture_output=True, check=True, cwd=ROOT)
    s = SampleSet.from_bytes(run.stdout)
    m = stats.analyze(s).metrics
    ts = s.meta.get("timestamps", "user")
    return {f"netslo {sender} rtt ({ts})": (m["rtt.p50"].value * 1e6, m["rtt.p99"].value * 1e6),
            f"netslo {sender} round trip ({ts})": _pcts(series(s, "round_trip")),
            f"netslo {sender} rtt_app": (m["rtt_app.p50"].value * 1e6, m["rtt_app.p99"].value * 1e6)}


def irtt(pair, count: int, rate: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "irtt.json"
        subprocess.run(pair.argv(pair.a, "irtt", "client", "-Q", "-i", f"{1e6 / rate:g}us", "-d",
                                 f"{count / rate:g}s", "-l", str(SIZE), "-o", str(out), f"{SERVER}:2112"),
                       check=True, timeout=count / rate + 30)
        doc = json.loads(out.read_text())
    rtt = [rt["delay"]["rtt"] * 1e-9 for rt in doc["round_trips"] if rt.get("lost") == "false" and "rtt" in rt.get("delay", {})]
    return {"irtt": _pcts(rtt)}


def sockperf(pair, count: int, rate: int) -> dict:
    out = subprocess.run(pair.argv(pair.a, "sockperf", "ping-pong", "-i", SERVER, "-p", "11111", "-m", str(SIZE),
                                   "-t", str(max(1, round(count / rate))), "--mps", str(rate), "--full-rtt"),
                         capture_output=True, text=True, timeout=count / rate + 30)
    out = out.stdout + out.stderr
    pct = {float(q): float(v) for q, v in re.findall(r"percentile\s+([\d.]+)\s*=\s*([\d.]+)", out)}
    return {"sockperf": (pct.get(50.0, float("nan")), pct.get(99.0, float("nan")))}


def ping(pair, count: int, rate: int) -> dict:
    out = subprocess.run(pair.argv(pair.a, "ping", "-n", "-c", str(count), "-i", f"{max(1 / rate, 0.0002):g}",
                                   SERVER), capture_output=True, text=True, timeout=count / rate + 30).stdout
    return {"ping": _pcts([float(t) * 1e-3 for t in re.findall(r"time=([\d.]+) ms", out)])}


def c_echo(pair, exe: str, count: int, rate: int) -> dict:
    out = subprocess.run(pair.argv(pair.a, exe, "client", SERVER, "7100", str(count), f"{1e6 / rate:.0f}", str(SIZE)),
                         capture_output=True, text=True, check=True, timeout=count / rate + 30).stdout.split()
    return {"C echo": _pcts([int(x) * 1e-9 for x in out if int(x) >= 0])}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    count = int(seconds * rate)
    pair = VethPair()
    try:
        exe = str(Path(tempfile.mkdtemp()) / "udp_echo_ref")
        subprocess.run(["gcc", "-O2", "-o", exe, str(HERE / "c" / "udp_echo_ref.c")], check=True)
        pair.spawn(pair.b, sys.executable, "-m", "netslo.agent", "serve", "udp", "--port", "7000")
        pair.spawn(pair.b, exe, "server", "7100")
        tools = {"netslo python": lambda: netslo(pair, "python", count, rate),
                 "netslo native": lambda: netslo(pair, "native", count, rate),
                 "C echo": lambda: c_echo(pair, exe, count, rate),
                 "ping": lambda: ping(pair, count, rate)}
        if shutil.which("irtt"):
            pair.spawn(pair.b, "irtt", "server", "-i", "0", "-b", f"{SERVER}:2112")
            tools["irtt"] = lambda: irtt(pair, count, rate)
        if shutil.which("sockperf"):
            pair.spawn(pair.b, "sockperf", "server", "-i", SERVER, "-p", "11111")
            tools["sockperf"] = lambda: sockperf(pair, count, rate)
        time.sleep(1.5)
        names = list(tools)
        results: dict = {}
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {rounds} rounds x {seconds:g} s at "
              f"{rate}/s, {SIZE} B, bare veth between two namespaces")
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                for label, (p50, p99) in tools[name]().items():
                    results.setdefault(label, []).append((p50, p99))
                    print(f"  round {r + 1} {label:<34} P50 {p50:8.1f} µs  P99 {p99:8.1f} µs", flush=True)
        med = {k: (float(np.median([v[0] for v in vs])), float(np.median([v[1] for v in vs]))) for k, vs in results.items()}
        have = [k for k in ("irtt", "sockperf") if k in med]
        peers = [med[k] for k in have]
        best = (min(p[0] for p in peers), min(p[1] for p in peers)) if peers else (float("nan"),) * 2
        ref = med.get("C echo", (float("nan"), float("nan")))
        for k in ("irtt", "sockperf"):
            if k not in have:   # a missing peer is said, not silently left out of "best peer"
                print(f"\n{k}: not installed (Debian/Ubuntu package {k}): no row, not in the best peer")
        print(f"\nmedian over rounds | P50 µs | P99 µs | P50 / best peer | P99 / best peer | P50 / C echo "
              f"(best peer = better of {' and '.join(have) or 'none'}: P50 {best[0]:.1f}, P99 {best[1]:.1f})")
        for k, (p50, p99) in med.items():
            print(f"| {k} | {p50:.1f} | {p99:.1f} | {p50 / best[0]:.2f} | {p99 / best[1]:.2f} | {p50 / ref[0]:.2f} |")
    finally:
        pair.close()


if __name__ == "__main__":
    main()
