"""Allure results content: labels, severity, parameters, statistics table, per-run files,
and that each category's regex (Java syntax, here checked with Python's compatible subset)
catches the message netslo produces for that kind of outcome."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from netslo.report import allure as al
from netslo.slo import spec as slo_mod
from netslo.slo.runner import Outcome
from netslo.slo.scenario import Scenario
from netslo.stats.analysis import analyze
from netslo.stats.samples import SampleSet, empty

ENV = {"provider": "netns (emulated pod network)", "emulated": "yes", "datapath": "bridge (kindnet/host-gw-like)",
       "nodes": "2", "pod_mtu": "1500", "kernel": "host 6.1.0", "run_id": "abc123", "clock": "CLOCK_MONOTONIC µs"}


def outcome(thresholds: dict, lost=(), scenario=Scenario("cross-node", "udp", "1k"), meta=None) -> Outcome:
    n = 1000
    rows = empty(n)
    rows["sched_ns"] = np.arange(n) * 2_000_000
    rows["send_ns"] = rows["sched_ns"] + 30_000
    rows["recv_ns"] = rows["send_ns"] + (1e5 * np.random.default_rng(0).lognormal(0, 0.5, n)).astype(np.int64)
    rows["arrival"] = np.arange(n)
    rows["recv_ns"][list(lost)] = -1
    s = SampleSet(rows, meta or {"protocol": "udp"})
    a = analyze(s)
    spec = slo_mod.parse({"version": 1, "objectives": [{"name": "udp-latency", "thresholds": thresholds}]})
    checks = [slo_mod.decide(a.metrics[t.metric], t) for t in spec.thresholds_for(scenario.labels())]
    return Outcome(scenario, s, a, checks, dict(ENV), batches=1, seconds=2.5)


def test_labels_follow_the_scheme():
    lab = al.labels(Scenario("same-node", "tcp-rr", "10k"), ENV)
    assert lab["epic"] == "netns/bridge" and lab["feature"] == "tcp-rr" and lab["story"] == "same-node-tcp-rr-10k"
    assert set(lab["tags"]) == {"datapath:bridge", "placement:same-node", "profile:10k", "impairment:none", "emulated",
                                "family:ipv4"}
    assert "family:ipv6" in al.labels(Scenario("same-node", "tcp-rr", "10k", family="ipv6"), ENV)["tags"]
    lab = al.labels(Scenario("same-node", "udp", "1k"), {"provider": "kind", "cni": "calico", "impairment": "delay 5ms"})
    assert lab["epic"] == "kind/calico" and "impairment:delay 5ms" in lab["tags"] and "emulated" not in lab["tags"]


def test_severity_by_tier():
    tail = outcome({"rtt.p50": "1ms", "rtt.p99": "10ms"}).checks
    median = outcome({"rtt.p50": "1ms", "loss": "1%"}).checks
    assert al.severity(tail) == "critical"
    assert al.severity(median) == "normal"
    assert al.severity([]) == "minor"
    assert al.severity(median, {"udp-latency": "blocker"}) == "blocker"
    assert al.severity(tail, {"other": "trivial"}) == "critical"


def test_run_varying_parameters_are_excluded():
    params = {name: (value, excluded) for name, value, excluded in al.parameters(outcome({"rtt.p50": "1ms"}), ENV)}
    assert params["provider"] == ("netns", False) and params["datapath"] == ("bridge", False)
    for name in ("samples", "batches", "run id", "kernel", "measured in"):
        assert params[name][1] is True
    assert params["run id"][0] == "abc123" and params["samples"][0] == "1000"


def test_the_timestamp_source_is_a_parameter_of_the_history_and_missing_stamps_are_shown():
    """rtt from kernel stamps and rtt from user-space times are different metrics (docs/metrics.md):
    the source is part of Allure's history id; how many kernel stamps were missing is shown, not keyed."""
    kernel = {n: (v, x) for n, v, x in al.parameters(outcome({"rtt.p50": "1ms"}, meta={
        "protocol": "udp", "timestamps": "kernel", "kernel_tx_missing": 2, "kernel_rx_missing": 1}), ENV)}
    assert kernel["timestamps"] == ("kernel", False) and kernel["kernel stamps missing"] == ("3", True)
    user = {n: v for n, v, _ in al.parameters(outcome({"rtt.p50": "1ms"}), ENV)}
    assert user["timestamps"] == "user" and user["kernel stamps missing"] == "0"


def test_statistics_table_lists_gated_metrics_first_with_ci_threshold_and_verdict():
    o = outcome({"rtt.p99": "10us", "loss": "1%"}, lost=[5, 6])
    page = al.stats_table_html(o)
    rows = re.findall(r"<tr class='(\w*)'><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td><td>(\d+)</td><td>([^<]*)</td>", page)
    assert [r[1] for r in rows[:2]] == ["rtt.p99", "loss"]
    assert rows[0][0] == "fail" and rows[0][5] == "10us"
    assert rows[1][0] == "pass" and rows[1][2] == "0.2%" and rows[1][5] == "1%"
    assert len(rows) == len(o.analysis.metrics) and "rtt.p50" in {r[1] for r in rows}
    assert o.scenario.id in page and "FAIL" in page


def test_figures_cover_ecdf_per_gated_series_histogram_and_timeseries():
    names = [n for n, png in al.figures(outcome({"rtt.p99": "10ms", "ipdv.p99": "5ms", "loss": "1%"}, lost=[3]))]
    assert names == ["ECDF of RTT", "ECDF of |IPDV|", "RTT histogram and box plot", "RTT time series"]


def test_figures_of_a_dns_outcome_plot_lookup_time_not_its_rates():
    """dns.fail and dns.retry are fractions (no series to plot); dns.p99 is the lookup time."""
    zeros = [0] * 1000
    per_row = {"dns_timeouts_a": zeros, "dns_timeouts_aaaa": zeros, "dns_queries": [2] * 1000, "dns_rcode": zeros}
    o = outcome({"dns.p99": "50ms", "dns.fail": "1%", "dns.retry": "1%"}, lost=[3],
                meta={"protocol": "dns", "per_row": per_row})
    figs = dict(al.figures(o))
    assert list(figs) == ["ECDF of RTT", "ECDF of dns", "RTT histogram and box plot", "RTT time series"]
    assert all(png.startswith(b"\x89PNG") for png in figs.values())


def test_environment_properties_escape_for_java():
    text = al.environment_properties({"a key": "x=y:z", "clock": "µs", "pod_mtu": "1500"})
    assert "a\\ key=x\\=y\\:z\n" in text and "clock=\\u00b5s\n" in text and "pod_mtu=1500\n" in text
    text.encode("latin-1")


def test_environment_info_adds_versions():
    info = al.environment_info(ENV, {"slo_file": "slo.yaml"})
    for key in ("provider", "pod_mtu", "kernel", "slo_file", "netslo", "python", "pytest", "allure-pytest", "numpy"):
        assert info[key]


def test_run_files_written(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    written = al.write_run_files(tmp_path, al.environment_info(ENV))
    assert sorted(p.name for p in written) == ["categories.json", "environment.properties"]
    cats = json.loads((tmp_path / "categories.json").read_text())
    assert [c["name"] for c in cats][:4] == ["Impairment not realized", "Infrastructure", "SLO breach", "Not enough samples"]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    written = al.write_run_files(tmp_path, {})
    assert json.loads((tmp_path / "executor.json").read_text())["buildUrl"].endswith("/o/r/actions/runs/42")


def category_of(status: str, message: str) -> str | None:
    """The first category matching, as Allure does (Java String.matches = full match)."""
    for c in al.categories(("limitation", "tool")):
        if status in c["matchedStatuses"] and re.fullmatch(c.get("messageRegex", ".*"), message, re.S if "(?s)" not in c.get("messageRegex", "") else 0):
            return c["name"]
    return None


@pytest.mark.parametrize("status,message,expected", [
    ("failed", "netslo.slo.runner.SloBreach: SLO breach: cross-node-udp-1k\n  rtt.p99 = 12ms (CI ...) > threshold 10ms", "SLO breach"),
    ("broken", "netslo.core.errors.InfrastructureError: probe could not keep its schedule: median ...", "Infrastructure"),
    ("broken", "netslo.core.errors.InfrastructureError: impairment not realized: delay 4.1ms measured, 10ms set", "Impairment not realized"),
    ("skipped", "Skipped: netslo[tool]: iperf3 not installed", "Skipped, declared expected"),
    ("skipped", "Skipped: netslo[needs_netem]: no netem kernel", "Skipped, not declared (gate fails)"),
    ("skipped", "Skipped: some skip of another plugin", "Skipped, not declared (gate fails)"),
    ("broken", "netslo.core.errors.NotEnoughSamples: SLO not judged (not enough samples): x\n  rtt.p99: not enough samples: n=20", "Not enough samples"),
    ("broken", "ZeroDivisionError: division by zero", "Other test errors"),
    ("passed", "", None),
])
def test_categories_catch_each_kind(status, message, expected):
    assert category_of(status, message) == expected
