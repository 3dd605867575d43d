"""The mesh's false alarms: the same embedded cluster's mesh measured again and again with nothing
changed (an A/A), each run judged two ways (numbers printed, nothing asserted).

    python benchmarks/mesh_aa.py [--nodes 16] [--runs 50] [--calibrate 3] [--requests 600] [--margin 1.5]

1. the shipped objectives (udp-latency: rtt.p50 1 ms, rtt.p99 20 ms, loss 1 %);
2. tight objectives set from this machine: the first ``--calibrate`` runs' worst per-pair CI upper
   bound of rtt.p50, rtt.p99 and loss, times ``--margin`` (what ``python -m netslo slo suggest``
   does from a baseline), then the other ``--runs`` runs judged by them.

Per way it prints the runs with any failing pair (the family-wise false-alarm rate, with its exact
95 % CI), the runs with an undecided pair, and the failing checks; per run the worst pair P99.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netslo.core.resources import shipped_slo  # noqa: E402
from netslo.providers.netns.cluster import NetnsCluster  # noqa: E402
from netslo.slo import spec as slo_mod  # noqa: E402
from netslo.stats.analysis import proportion  # noqa: E402
from netslo.studies.mesh import measure  # noqa: E402


def tight_spec(calibration: list, margin: float, sampling_doc: dict) -> slo_mod.SloSpec:
    worst = {m: max(pr.estimates[m].hi for r in calibration for pr in r.pairs.values()) for m in ("rtt.p50", "rtt.p99")}
    loss = max(pr.estimates["loss"].hi for r in calibration for pr in r.pairs.values())
    doc = {"version": 1, "defaults": sampling_doc, "objectives": [{"name": "mesh-tight", "select": {"protocol": "udp"},
           "thresholds": {"rtt.p50": f"{worst['rtt.p50'] * margin * 1e6:.1f}us",
                          "rtt.p99": f"{worst['rtt.p99'] * margin * 1e6:.1f}us",
                          "loss": f"{max(loss * margin, 0.001) * 100:.3f}%"}}]}
    return slo_mod.parse(doc, "tight (calibrated)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--calibrate", type=int, default=3)
    p.add_argument("--requests", type=int, default=600)
    p.add_argument("--margin", type=float, default=1.5)
    a = p.parse_args()
    shipped = slo_mod.load(shipped_slo("slo.yaml"))
    t0 = time.monotonic()
    with NetnsCluster(nodes=a.nodes, datapath="bridge", ip_family="ipv4", zones=4) as c:
        mesh_plan = measure.plan(c, measure.MeshSpec(requests=a.requests), shipped.sampling)
        agents = measure.bring_up(c, mesh_plan)
        calibration = [measure.run(c, measure.MeshSpec(requests=a.requests), shipped, the_plan=mesh_plan, agents=agents)
                       for _ in range(a.calibrate)]
        tight = tight_spec(calibration, a.margin, {"interval": "2ms", "confidence": "95%"})
        print("tight thresholds:", {t.metric: t.text for o in tight.objectives for t in o.thresholds}, flush=True)
        judged = []
        for i in range(a.runs):     # measured (and inconclusive pairs measured again) under the tight ones
            r = measure.run(c, measure.MeshSpec(requests=a.requests), tight, the_plan=mesh_plan, agents=agents)
            worst = max(pr.estimates["rtt.p99"].value for pr in r.pairs.values())
            print(f"run {i + 1}: {r.verdict} under tight; worst pair P99 {worst * 1e6:.0f} µs; "
                  f"{time.monotonic() - t0:.0f} s", flush=True)
            judged.append(r)
    for name, spec in (("tight", tight), ("shipped", shipped)):
        fails = undecided = 0
        bad = []
        for r in judged:
            measure.judge(r, spec)
            fails += r.verdict == "fail"
            undecided += r.verdict == "undecided"
            bad += [f"{c.pair} {c.metric} {c.estimate.value * 1e6:.0f}µs p_holm {c.p_adjusted:.2g}"
                    for c in r.checks if c.verdict == "fail"]
        e = proportion(fails, len(judged))
        checks = len(judged[0].checks)
        print(f"{name}: {fails}/{len(judged)} runs with a failing pair (family-wise {e.value:.1%}, 95 % CI "
              f"{e.lo:.1%}–{e.hi:.1%}); {undecided} runs with an undecided pair; {checks} checks per run "
              f"({len(judged[0].pairs)} pairs)")
        for line in bad[:20]:
            print("   ", line)
    print(f"total {time.monotonic() - t0:.0f} s; {a.nodes} nodes, {a.requests} requests per pair, "
          f"{math.comb(a.nodes, 2)} pairs per run")


if __name__ == "__main__":
    main()
