"""End to end: a real gate run with --alluredir, the real Allure CLI, the report opened in headless
Debian Chromium. Checks that every test case is there with its plots, CSV and statistics table,
that the Environment widget and the categories show, and keeps screenshots under artifacts/.

The run has three tests on a 1-node embedded cluster with a deliberately strict SLO file, so the
report holds one pass, one SLO breach (category 'SLO breach') and one skip (cross-node needs 2 nodes,
declared expected with --netslo-allow-skip nodes: category 'Skipped, declared expected'). Skipped, with the reason, when chromium, java or the Allure CLI are missing.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import chromium  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _report_plugin_args() -> list[str]:
    """``-p netslo.gate.plugin.report`` unless an installed pytest11 entry point already loads it (pytest
    refuses one module registered under two names)."""
    from importlib.metadata import entry_points
    loaded = {ep.value for ep in entry_points(group="pytest11")}
    return [] if "netslo.gate.plugin.report" in loaded else ["-p", "netslo.gate.plugin.report"]
SCRIPT = ROOT / "scripts" / "allure-report.sh"
ARTIFACTS = Path(os.environ.get("NETSLO_ARTIFACTS", ROOT / "artifacts"))

STRICT_SLO = """version: 1
defaults: {samples: 400, max_samples: 400, interval: 2ms, wait: 500ms}   # P99 needs 368 answers
objectives:
  - name: udp-latency
    select: {protocol: udp}
    thresholds: {rtt.p50: 50ms, rtt.p99: 500ms, loss: 5%}
  - name: tcp-impossible
    select: {protocol: tcp-rr}
    thresholds: {rtt.p50: 1us}
"""
TESTS = ("same-node-udp-1k", "same-node-tcp-rr-1k", "cross-node-udp-1k")
ATTACHMENTS = ("ECDF of RTT", "RTT histogram and box plot", "RTT time series",
               "Statistics with CIs and thresholds", "Raw samples")


def _requirements() -> str | None:
    if os.geteuid() != 0:
        return "the embedded cluster needs root (network namespaces)"
    if chromium.find() is None:
        return "chromium not installed (apt-get install chromium)"
    if shutil.which("java") is None:
        return "java not installed (the Allure CLI needs a Java runtime)"
    probe = subprocess.run(["bash", str(SCRIPT), "--which"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "Allure CLI not installed: run scripts/allure-report.sh --install (npm allure-commandline)"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_requirements() is not None, reason=str(_requirements()))]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(results dir, report dir, pytest output) of one real gate run and its Allure report."""
    d = tmp_path_factory.mktemp("allure")
    slo = d / "strict-slo.yaml"
    slo.write_text(STRICT_SLO)
    results, html = d / "allure-results", d / "allure-report"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "cni", *_report_plugin_args(), "-p", "no:cacheprovider",
         "-k", " or ".join(TESTS), "--netslo-ip-family", "ipv4", "--netslo-nodes", "1", "--netslo-allow-skip", "nodes", "--netslo-slo", str(slo),
         "--alluredir", str(results),
         "--netslo-results", str(d / "netslo-results"), "netslo/gate/test_latency.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out                       # the strict tcp objective fails ...
    assert "1 failed, 1 passed, 1 skipped" in out, out     # ... the udp one passes, cross-node skips
    gen = subprocess.run(["bash", str(SCRIPT), str(results), str(html)], capture_output=True, text=True, timeout=300)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    return results, html, out


@pytest.fixture(scope="module")
def served(report):
    """The report over http://127.0.0.1:<port>/ (browsers refuse the report's data over file://)."""
    handler = functools.partial(_QuietHandler, directory=str(report[1]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    with chromium.Browser(chromium.find()) as b:
        yield b


def test_results_dir_has_run_files_and_attachments(report):
    results, _, _ = report
    props = (results / "environment.properties").read_text(encoding="latin-1")
    for key in ("provider=", "kernel=", "datapath=", "nodes=1", "pod_mtu=", "congestion_control=",
                "tcp_slow_start_after_idle=", "python=", "allure-pytest="):
        assert key in props
    assert [c["name"] for c in json.loads((results / "categories.json").read_text())][:4] == \
        ["Impairment not realized", "Infrastructure", "SLO breach", "Not enough samples"]
    by_name = {}
    for f in results.glob("*-result.json"):
        r = json.loads(f.read_text())
        by_name[r["name"]] = r
    assert sorted(by_name) == sorted(f"test_latency_slo[{t}]" for t in TESTS)
    failed = by_name["test_latency_slo[same-node-tcp-rr-1k]"]
    assert failed["status"] == "failed" and "SLO breach" in failed["statusDetails"]["message"]
    labels = {(lab["name"], lab["value"]) for lab in failed["labels"]}
    assert {("epic", "netns/bridge"), ("feature", "tcp-rr"), ("story", "same-node-tcp-rr-1k"),
            ("severity", "normal"), ("tag", "placement:same-node")} <= labels
    excluded = {p["name"] for p in failed["parameters"] if p.get("excluded")}
    assert {"samples", "run id", "kernel"} <= excluded
    params = {p["name"]: p["value"] for p in failed["parameters"]}
    assert params["timestamps"].strip("'") == "kernel" and "timestamps" not in excluded   # tcp-rr: kernel stamps
    ours = [a for a in failed["attachments"] if a["name"] not in ("log", "stdout", "stderr")]  # pytest's captures
    assert ours and all((results / a["source"]).stat().st_size > 1000 for a in ours), ours
    assert by_name["test_latency_slo[cross-node-udp-1k]"]["status"] == "skipped"


def test_overview_shows_environment_and_categories(served, browser):
    browser.goto(served + "#")
    assert browser.wait_for("document.body.innerText.includes('Environment')"), browser.text()[:500]
    assert browser.wait_for("document.body.innerText.includes('pod_mtu')")
    text = browser.text()
    assert "3\ntest cases" in text or "3 test cases" in text.replace("\n", " ")
    assert "netns (emulated pod network)" in text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = browser.screenshot(ARTIFACTS / "allure-overview.png")
    assert png[:4] == b"\x89PNG" and len(png) > 20_000
    # every environment key (the widget shows five until 'Show all' is clicked)
    browser.evaluate("Array.from(document.querySelectorAll('*')).find(e => e.children.length === 0 && "
                     "e.textContent.trim() === 'Show all' && e.closest('.widget') && "
                     "e.closest('.widget').innerText.includes('Environment')).click()")
    assert browser.wait_for("document.body.innerText.includes('tcp_slow_start_after_idle')")
    assert "congestion_control" in browser.text()

    browser.goto(served + "#categories")
    assert browser.wait_for("document.body.innerText.includes('SLO breach')"), browser.text()[:800]
    assert browser.wait_for("document.body.innerText.includes('Skipped, declared expected')")
    browser.screenshot(ARTIFACTS / "allure-categories.png")


def test_every_test_case_shows_plots_csv_and_statistics(report, served, browser):
    _, html, _ = report
    cases = [json.loads(f.read_text()) for f in (html / "data" / "test-cases").glob("*.json")]
    assert sorted(c["name"] for c in cases) == sorted(f"test_latency_slo[{t}]" for t in TESTS)
    for case in cases:
        browser.goto(f"{served}#testresult/{case['uid']}")
        assert browser.wait_for(f"document.body.innerText.includes({json.dumps(case['name'])})")
        if case["status"] == "skipped":
            continue
        assert browser.wait_for("document.body.innerText.includes('Raw samples')"), browser.text()[:800]
        text = browser.text()
        for name in ATTACHMENTS:
            assert name in text, (case["name"], name)
        # open the ECDF: the PNG must load and have the plot's size
        browser.evaluate("Array.from(document.querySelectorAll('.attachment-row'))"
                         ".find(r => r.innerText.includes('ECDF of RTT')).click()")
        assert browser.wait_for("Array.from(document.images).some(i => i.complete && i.naturalWidth === 1000 "
                                "&& i.naturalHeight === 420)"), case["name"]
        if case["status"] == "failed":
            browser.screenshot(ARTIFACTS / "allure-testcase-failed.png")
        # open the CSV: Allure renders it as a table with the sample fields as header
        browser.evaluate("Array.from(document.querySelectorAll('.attachment-row'))"
                         ".find(r => r.innerText.includes('Raw samples')).click()")
        assert browser.wait_for("document.body.innerText.includes('recv_ns')"), case["name"]


def test_behaviors_group_by_epic_feature_story(served, browser):
    browser.goto(served + "#behaviors")
    assert browser.wait_for("document.body.innerText.includes('netns/bridge')"), browser.text()[:800]
