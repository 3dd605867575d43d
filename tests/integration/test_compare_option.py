"""``pytest -m cni --netslo-compare=SPEC``: the comparison inside a gate session. A is the session's
embedded cluster, B the spec given (1000 decoy iptables rules on the server's path: new connections
slow by a known direction); one test per scenario, failing with B/A and its CI; the scenarios a
``gate: selected-only`` file leaves out deselected; compare.json in the results directory. Bad
input is one line before anything is brought up, and nothing is left behind."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.test_compare_clusters import _namespaces

SLO = """version: 1
gate: selected-only
defaults: {interval: 1ms}
objectives:
  - name: compare-crr
    select: {protocol: [tcp-crr]}
    compare: {rtt.p50: +10%, rtt.p99: +60%, loss: +1%}
    thresholds: {rtt.p99: 1s}
"""


def _gate(tmp_path, *args: str):
    (tmp_path / "slo.yaml").write_text(SLO)
    return subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "netslo.gate.test_compare", "-m", "cni",
                           "-p", "no:cacheprovider", "--netslo-slo", str(tmp_path / "slo.yaml"),
                           "--netslo-results", str(tmp_path / "res"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_decoy_rules_on_b_fail_the_new_connection_scenarios_with_their_ratio(tmp_path):
    before = _namespaces()
    p = _gate(tmp_path, "--netslo-compare", "rules=1000", f"--alluredir={tmp_path / 'allure'}")
    out = p.stdout
    assert p.returncode == 1, out[-3000:] + p.stderr[-2000:]
    assert "2 failed" in out and "6 deselected" in out, out[-3000:]
    assert "comparisons not gated: no objective's compare:" in out
    for sid in ("same-node-tcp-crr-1k", "cross-node-tcp-crr-1k"):
        assert f"FAILED netslo/gate/test_compare.py::test_b_is_no_worse_than_a[{sid}]" in out \
            or f"test_b_is_no_worse_than_a[{sid}] - " in out, out[-3000:]
    assert "rtt.p50: B/A" in out and "allowed ≤ 1.100" in out
    doc = json.loads((tmp_path / "res" / "compare.json").read_text())
    assert doc["verdict"] == "fail" and {s["scenario"] for s in doc["scenarios"]} == {
        "same-node-tcp-crr-1k", "cross-node-tcp-crr-1k"}
    # A and B side by side: results.json, summary.md's table, an ECDF plot of both per scenario, in Allure too
    assert json.loads((tmp_path / "res" / "results.json").read_text())["compare"]["verdict"] == "fail"
    assert "| `cross-node-tcp-crr-1k` | rtt.p50 |" in (tmp_path / "res" / "summary.md").read_text()
    for sid in ("same-node-tcp-crr-1k", "cross-node-tcp-crr-1k"):
        assert (tmp_path / "res" / f"compare-{sid}.png").stat().st_size > 10_000
    attached = {a["name"] for f in (tmp_path / "allure").glob("*-result.json")
                for a in json.loads(f.read_text()).get("attachments", [])}
    assert {"A and B: same-node-tcp-crr-1k", "A and B: cross-node-tcp-crr-1k", "B relative to A"} <= attached, attached
    assert _namespaces() == before


def test_a_bad_spec_or_the_same_cluster_twice_is_one_line_and_nothing_is_made(tmp_path):
    before = _namespaces()
    kc = tmp_path / "kubeconfig"    # a cluster nobody reaches: the refusal comes before any request
    kc.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "
                  "'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, "
                  "user: u}}]\n")
    for args, expect in ((("--netslo-compare", "datapath=geneve"),
                          "--netslo-compare: datapath: value 'geneve' — expected one of bridge, routed, vxlan"),
                         (("--netslo-compare", f"provider=existing,kubeconfig={kc}", "--netslo-provider", "existing",
                           "--netslo-kubeconfig", str(kc)),
                          f"--netslo-compare: value 'provider=existing,kubeconfig={kc}' — expected another cluster than A"),
                         (("--netslo-compare", "rules=10", "--netslo-provider", "minikube"),
                          "expected --netslo-provider one of netns, kind, existing")):
        p = _gate(tmp_path, *args)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 4 and len(lines) == 1 and expect in lines[0], (args, p.stdout[-1500:], p.stderr)
    p = _gate(tmp_path)
    assert p.returncode == 5 and "8 comparison tests deselected (run them with --netslo-compare=SPEC)" in p.stdout
    assert _namespaces() == before
