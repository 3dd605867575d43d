"""The node-pair mesh on the embedded provider (``python -m netslo mesh``, ``--netslo-mesh``): every pair
of 8 nodes in 7 rounds of disjoint pairs, green under the shipped objectives; one node whose uplink
is shaped with tbf named as the outlier, its 7 pairs alone failing; zone objectives judging only the
pairs they select; bad input one line naming the option and the value; nothing left behind."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from netslo.core.resources import shipped_slo
from netslo.impair.shaping.qdiscs import bottleneck
from netslo.providers.netns.cluster import NetnsCluster, require_privileges
from netslo.slo import spec as slo_mod
from netslo.studies.mesh import measure

try:
    require_privileges()
except Exception as e:   # the suite's non-root run
    pytest.skip(f"needs root: {e}", allow_module_level=True)

PNG = b"\x89PNG\r\n\x1a\n"


def _namespaces() -> set:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("nsl-")}


def _mesh(tmp_path, *args, slo: str | None = None):
    if slo is not None:
        (tmp_path / "slo.yaml").write_text(slo)
    return subprocess.run([sys.executable, "-m", "netslo", "mesh", "--results", str(tmp_path / "res"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_eight_nodes_every_pair_once_in_seven_rounds_of_disjoint_pairs(tmp_path):
    before = _namespaces()
    run = _mesh(tmp_path, "--nodes", "8", "--zones", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads((tmp_path / "res" / "mesh.json").read_text())
    pairs = {(p["a"], p["b"]) for p in doc["pairs"]}
    assert len(pairs) == 28 == len(doc["pairs"]) and doc["rounds"] == 7
    for r in range(7):
        nodes = [n for p in doc["pairs"] if p["round"] == r for n in (p["a"], p["b"])]
        assert len(nodes) == 8 == len(set(nodes)), f"round {r}: a node in two pairs at once: {sorted(nodes)}"
    assert all(p["verdict"] == "pass" and p["sent"] == doc["requests_per_pair"] for p in doc["pairs"])
    zones = {p["labels"]["zones"] for p in doc["pairs"]}
    assert zones == {"same", "cross"}
    assert (tmp_path / "res" / "mesh-heatmap.png").read_bytes().startswith(PNG)
    assert "| `node7` |" in (tmp_path / "res" / "mesh.md").read_text()   # the text matrix, up to 16 nodes
    assert _namespaces() == before


def test_a_node_shaped_with_tbf_is_named_and_only_its_pairs_fail():
    """node5's uplink at 3 Mbit/s, below the 4.3 Mbit/s of its pair's 1 kB requests every 2 ms: its
    queue fills and drops, so every pair with node5 loses requests and waits in the queue."""
    spec = slo_mod.load(shipped_slo("slo.yaml"))
    with NetnsCluster(nodes=8, datapath="bridge", ip_family="ipv4", zones=2) as c:
        with bottleneck(c.node_netns("node5"), "eth0", 3e6):
            result = measure.run(c, measure.MeshSpec(), spec)
    assert result.verdict == "fail"
    assert list(result.attribution.nodes) == ["node5"] and result.attribution.pairs == []
    assert result.failed_pairs == sorted(p for p in result.pairs if "node5" in p)
    assert len(result.failed_pairs) == 7 and not result.undecided


def test_zone_objectives_judge_only_the_pairs_they_select(tmp_path):
    """An impossible cross-zone P50 (1 ns) fails the 16 cross-zone pairs of 8 nodes in 2 zones and
    none of the 12 same-zone ones; the zone pair is in each failing check's labels."""
    slo = ("version: 1\nextends: netslo\nobjectives:\n  - name: cross-zone\n    select: {zones: cross}\n"
           "    thresholds: {rtt.p50: 1ns}\n  - name: over-pairs\n    select: {zones: same}\n"
           "    thresholds: {mesh.p99.rtt.p99: 1s}\n")
    run = _mesh(tmp_path, "--nodes", "8", "--zones", "2", slo=slo)
    assert run.returncode == 1, run.stdout + run.stderr
    doc = json.loads((tmp_path / "res" / "mesh.json").read_text())
    failed = [p for p in doc["pairs"] if p["verdict"] == "fail"]
    assert len(failed) == 16 and all(p["labels"]["zone"] == "zone-a~zone-b" for p in failed)
    assert all(c["objective"] == "cross-zone" for p in failed for c in p["checks"] if c["verdict"] == "fail")
    agg = doc["aggregates"]
    assert [(a["metric"], a["pairs"], a["verdict"]) for a in agg] == [("mesh.p99.rtt.p99", 12, "pass")]


@pytest.mark.parametrize("args, option, value", [
    (["--nodes", "4", "--select", "topology.kubernetes.io/zone=nowhere"], "--select", "nowhere"),
    (["--nodes", "8", "--budget", "5s"], "--budget", "5s"),
    (["--nodes", "5", "--zones", "3", "--pool-label", "topology.kubernetes.io/zone"], "--pool-label", "zone-c"),
    (["--nodes", "65"], "--nodes", "65"),
    (["--nodes", "4", "--requests", "50"], "--requests", "50"),
], ids=["label-selects-nothing", "budget-too-small", "pool-of-one-node", "too-many-nodes", "too-few-requests"])
def test_bad_input_is_one_line_naming_option_and_value(tmp_path, args, option, value):
    before = _namespaces()
    run = _mesh(tmp_path, *args)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert option in lines[0] and value in lines[0], lines[0]
    assert not (tmp_path / "res").exists() and _namespaces() == before


def test_gate_option_runs_the_mesh_and_writes_every_pair_to_results_json(tmp_path):
    run = subprocess.run([sys.executable, "-m", "netslo", "gate", "--netslo-mesh", "--netslo-nodes", "4",
                          "-k", "mesh", "--netslo-results", str(tmp_path / "res"), "-q", "-p", "no:cacheprovider",
                          "--alluredir", str(tmp_path / "allure")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout
    doc = json.loads((tmp_path / "res" / "results.json").read_text())
    assert len(doc["mesh"]["pairs"]) == 6 and doc["mesh"]["verdict"] == "pass"
    summary = (tmp_path / "res" / "summary.md").read_text()
    assert "netslo mesh of 4 nodes" in summary and "| `node3` |" in summary   # the verdict and the matrix
    pngs = list((tmp_path / "allure").glob("*-attachment.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes() == (tmp_path / "res" / "mesh-heatmap.png").read_bytes()
    bad = subprocess.run([sys.executable, "-m", "netslo", "gate", "--netslo-mesh", "--netslo-mesh-requests", "many",
                          "-k", "mesh", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 4 and "--netslo-mesh-requests: value 'many'" in bad.stderr, bad.stderr
