"""A team's own two-objective slo.yaml in a project of its own, on the gate itself (embedded provider,
real pytest sessions of ``python -m netslo gate``, three scenarios of the latency module):

- with ``extends: netslo`` the gate is green, the team's objective replaces the shipped one of its
  name and the scenario the team did not write is judged by the shipped objective;
- without it that scenario is a configuration error that names both fixes, and the gate is not green;
- with ``gate: selected-only`` only what the file selects runs, and the rest is listed as not
  gated in the terminal, results.json and summary.md; at collection every SLO test of the gate is
  among what such a file deselects or selects (the exposure paths once were neither, ran, and failed
  "no SLO objective selects" in a team's selected-only gate).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TEAM = """version: 1
{head}
defaults: {{samples: 400, max_samples: 800}}
objectives:
  - name: udp-latency
    select: {{protocol: udp}}
    thresholds: {{rtt.p50: 900us, rtt.p99: 19ms, loss: 1%}}
  - name: team-tcp
    select: {{protocol: tcp-rr}}
    thresholds: {{rtt.p50: 1900us, rtt.p99: 19ms, loss: 0.5%}}
"""
PICK = "same-node-udp-1k or same-node-tcp-rr-1k or same-node-http-1k"
HTTP = "test_latency.py::test_latency_slo[same-node-http-1k]"


def _gate(tmp_path, head: str):
    proj = tmp_path / "team"
    proj.mkdir()
    (proj / "slo.yaml").write_text(TEAM.format(head=head))
    proc = subprocess.run([sys.executable, "-m", "netslo", "gate", "-p", "no:cacheprovider", "-k", PICK,
                           "--netslo-results=results", "--netslo-ip-family", "ipv4"],
                          cwd=proj, capture_output=True, text=True, timeout=600)
    results = proj / "results" / "results.json"
    doc = json.loads(results.read_text()) if results.exists() else {}
    return proc, doc, proj


def _checks(doc) -> dict:
    return {r["scenario"]: {(c["objective"], c["metric"]): c["threshold"] for c in r["checks"]} for r in doc["results"]}


@pytest.mark.slow
def test_extends_netslo_runs_green_with_the_teams_objectives_in_place(tmp_path):
    proc, doc, _ = _gate(tmp_path, "extends: netslo")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "✅ gate green: 3 passed" in out, out[-3000:]
    checks = _checks(doc)
    assert checks["same-node-udp-1k"][("udp-latency", "rtt.p50")] == "900us"       # the team's, in place
    assert ("team-tcp", "rtt.p50") in checks["same-node-tcp-rr-1k"]
    assert checks["same-node-http-1k"] == {("http-keepalive", "rtt.p50"): "5ms", ("http-keepalive", "rtt.p99"): "30ms",
                                           ("http-keepalive", "loss"): "0.5%"}      # the shipped one
    assert all(r["slo"] == doc["slo"] and r["slo"].endswith("team/slo.yaml") for r in doc["results"])


@pytest.mark.slow
def test_without_extends_the_unselected_scenario_errors_naming_both_fixes(tmp_path):
    proc, doc, proj = _gate(tmp_path, "")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "❌ gate not green: 2 passed, 1 errored" in out, out[-3000:]
    assert any(ln.startswith("errored") and HTTP in ln for ln in out.splitlines())
    (test, entry), = doc["gate"]["tests"].items()
    assert test.endswith(HTTP) and entry["status"] == "errored"
    assert (f"{proj / 'slo.yaml'}: objectives: value 'same-node-http-1k' — expected an objective whose select "
            "matches this scenario") in entry["reason"]
    assert "'extends: netslo'" in entry["reason"] and "'gate: selected-only'" in entry["reason"]


@pytest.mark.slow
def test_selected_only_runs_what_it_selects_and_lists_the_rest(tmp_path):
    proc, doc, proj = _gate(tmp_path, "gate: selected-only")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "✅ gate green: 2 passed, 1 not gated" in out, out[-3000:]
    assert f"netslo: 1 not gated: no objective of {proj / 'slo.yaml'} selects them (gate: selected-only): " \
           "test_latency_slo[same-node-http-1k]" in out
    assert sorted(r["scenario"] for r in doc["results"]) == ["same-node-tcp-rr-1k", "same-node-udp-1k"]
    assert [t.endswith(HTTP) for t in doc["gate"]["not_gated"]] == [True]
    summary = (proj / "results" / "summary.md").read_text()
    assert "Not gated (the SLO file gates only what it selects):" in summary and "same-node-http-1k" in summary


def _collected(tmp_path, select: str) -> str:
    proj = tmp_path / select.replace(" ", "")
    proj.mkdir()
    (proj / "slo.yaml").write_text("version: 1\ngate: selected-only\nobjectives:\n  - name: one\n"
                                   f"    select: {{{select}}}\n    thresholds: {{rtt.p50: 1ms}}\n")
    proc = subprocess.run([sys.executable, "-m", "netslo", "gate", "-p", "no:cacheprovider", "--collect-only", "-q"],
                          cwd=proj, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc.stdout


def test_selected_only_deselects_the_exposure_paths_unless_it_selects_http(tmp_path):
    udp = _collected(tmp_path, "protocol: udp")
    kept = [ln for ln in udp.splitlines() if "::test_exposure_slo[" in ln]
    assert kept == [], kept
    assert "test_exposure_slo[pod-ip]" in next(ln for ln in udp.splitlines() if " not gated: " in ln)
    http = _collected(tmp_path, "protocol: http, placement: cross-node")
    assert sum("::test_exposure_slo[" in ln for ln in http.splitlines()) == 5, http[-2000:]
