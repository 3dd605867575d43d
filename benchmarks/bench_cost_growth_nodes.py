"""How the gate's set-up and per-scenario cost grow with the number of nodes (numbers printed,
nothing asserted about time).

    python -m pytest benchmarks/bench_cost_growth_nodes.py -s

On the embedded provider, for ``--netslo-nodes`` 2, 4 and 8: the set-up the gate's session fixtures
do (cluster up: one namespace per node, the underlay bridge, each node's bridge and routes to every
other node; the responder pod on node0 with udp/tcp/http responders; one client pod per node) and
one scenario as the gate measures it (``runner.run`` with the repository's slo.yaml: default sample
count, interval and confidence), cross-node from the last node and same-node, then teardown. Each
size prints seconds per step and per node; set-up is expected to grow linearly in nodes (routes:
n - 1 per node, so n(n - 1) in all, each a single netlink call), a scenario not at all.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from netslo.providers.netns.cluster import NetnsCluster, require_privileges
from netslo.slo import runner
from netslo.slo import spec as slo_mod
from netslo.slo.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
NODE_COUNTS = (2, 4, 8)


def grow(nodes: int) -> dict:
    spec = slo_mod.load(ROOT / "netslo" / "gate" / "slo.yaml")
    t = {}
    t0 = time.monotonic()
    c = NetnsCluster(nodes=nodes, datapath="bridge")
    try:
        t["cluster_up_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        server = c.add_pod("server", c.nodes[0])
        ports = c.start_responders(server)
        t["responder_s"] = time.monotonic() - t1
        t1 = time.monotonic()
        clients = [c.add_pod(f"client{i}", node) for i, node in enumerate(c.nodes)]
        t["client_pods_s"] = time.monotonic() - t1
        for placement, client in (("cross-node", clients[-1]), ("same-node", clients[0])):
            scenario = Scenario(placement, "udp", "1k")
            out = runner.run(c, client, server, ports, scenario, spec)
            t[f"{placement}_udp_1k_s"] = out.seconds
            t[f"{placement}_verdict"] = out.verdict
    finally:
        t1 = time.monotonic()
        c.close()
        t["teardown_s"] = time.monotonic() - t1
    t["setup_s"] = t["cluster_up_s"] + t["responder_s"] + t["client_pods_s"]
    return t


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_setup_and_scenario_cost_per_node_count(benchmark, nodes):
    try:
        require_privileges()
    except Exception as e:
        pytest.skip(f"needs the embedded provider's privileges: {e}")
    t = benchmark.pedantic(grow, args=(nodes,), rounds=1, iterations=1)
    print(f"\nnodes={nodes}: set-up {t['setup_s']:.2f} s ({t['setup_s'] / nodes:.3f} s/node: cluster up "
          f"{t['cluster_up_s']:.2f}, responder {t['responder_s']:.2f}, {nodes} client pods "
          f"{t['client_pods_s']:.2f}); scenario udp-1k cross-node {t['cross-node_udp_1k_s']:.2f} s "
          f"({t['cross-node_verdict']}), same-node {t['same-node_udp_1k_s']:.2f} s ({t['same-node_verdict']}); "
          f"teardown {t['teardown_s']:.2f} s")
    benchmark.extra_info.update({k: (round(v, 3) if isinstance(v, float) else v) for k, v in t.items()})
