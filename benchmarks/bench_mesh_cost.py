"""What a node-pair mesh costs against the number of nodes (numbers printed, nothing asserted about
time).

    [MESH_NODES=8,16 (default)|8,16,32,64] [MESH_REQUESTS=400] [MESH_INTERVAL_MS=2] [MESH_FORK_RESPONDERS=1] \
        python -m pytest benchmarks/bench_mesh_cost.py -s

On the embedded provider, for each n: every pair in n - 1 rounds of n/2 pairs measured at once, a
fixed number of requests per pair at the shipped SLO file's interval (2 ms). Printed per n: rounds,
pairs, wall time split into cluster up, pods and responders, probing, analysis and teardown; the
probing per round; the memory the cluster took (MemAvailable before and after its pods, MiB, and
per node); this process's peak RSS. At the end a least-squares line through wall time against n and
each size's distance from it (issue 53's "within 25 % of a linear fit").
"""

from __future__ import annotations

import os
import resource
import time

import numpy as np
import pytest

from netslo.core.resources import shipped_slo
from netslo.providers.netns.cluster import NetnsCluster, require_privileges
from netslo.slo import spec as slo_mod
from netslo.studies.mesh import measure

RESULTS: dict = {}


def _available_mib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def mesh_cost(nodes: int, requests: int) -> dict:
    spec = slo_mod.load(shipped_slo("slo.yaml"))
    t = {"nodes": nodes}
    free0 = _available_mib()
    t0 = time.monotonic()
    c = NetnsCluster(nodes=nodes, datapath="bridge", ip_family="ipv4", zones=4 if nodes >= 8 else 1,
                     fork_responders=FORK)
    try:
        t["up_s"] = time.monotonic() - t0
        result = measure.run(c, measure.MeshSpec(requests=requests, interval_s=INTERVAL), spec)
        t["memory_mib"] = free0 - _available_mib()
        t.update({f"{k}_s": v for k, v in result.phases.items()})
        t["rounds"], t["pairs"], t["verdict"] = len(result.plan.rounds), len(result.pairs), result.verdict
        t["named"] = list(result.attribution.nodes)
    finally:
        t1 = time.monotonic()
        c.close()
        t["teardown_s"] = time.monotonic() - t1
    t["wall_s"] = time.monotonic() - t0
    t["per_round_s"] = t["probing_s"] / t["rounds"]
    t["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return t


SIZES = [int(x) for x in os.environ.get("MESH_NODES", "8,16").split(",")]   # CI: the two smallest
REQUESTS = int(os.environ.get("MESH_REQUESTS", "400"))
INTERVAL = float(os.environ.get("MESH_INTERVAL_MS", "2")) / 1e3
FORK = os.environ.get("MESH_FORK_RESPONDERS", "1") == "1"   # as python -m netslo mesh makes them


@pytest.mark.parametrize("nodes", SIZES)
def test_mesh_cost_per_node_count(benchmark, nodes):
    try:
        require_privileges()
    except Exception as e:
        pytest.skip(str(e))
    requests = REQUESTS
    t = benchmark.pedantic(mesh_cost, args=(nodes, requests), rounds=1, iterations=1)
    RESULTS[nodes] = t
    print(f"\nmesh n={nodes}: {t['rounds']} rounds, {t['pairs']} pairs, {requests} requests per pair every "
          f"{INTERVAL * 1e3:g} ms, responders {'forked' if FORK else 'started'}, {t['verdict']}"
          f"{' named ' + ','.join(t['named']) if t['named'] else ''}; wall {t['wall_s']:.1f} s = up {t['up_s']:.1f} + "
          f"pods {t['pods_s']:.1f} + probing {t['probing_s']:.1f} ({t['per_round_s']:.2f} s/round) + analysis "
          f"{t['analysis_s']:.1f} + teardown {t['teardown_s']:.1f}; memory {t['memory_mib']:.0f} MiB "
          f"({t['memory_mib'] / nodes:.1f} MiB/node); peak RSS {t['peak_rss_mib']:.0f} MiB")
    if len(RESULTS) >= 2:
        n = np.array(sorted(RESULTS), dtype=float)
        wall = np.array([RESULTS[int(k)]["wall_s"] for k in n])
        slope, icept = np.polyfit(n, wall, 1)
        dev = ", ".join(f"n={int(k)} {100 * (w - (slope * k + icept)) / (slope * k + icept):+.1f}%" for k, w in zip(n, wall))
        print(f"linear fit of wall time: {slope:.2f} s/node + {icept:.1f} s; each size from it: {dev}")
