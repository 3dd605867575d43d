"""The netslo pytest plugin: options, markers, start-up validation, SLO/infrastructure reporting.

Bad options or a malformed SLO file stop the run at start-up with one line (pytest UsageError),
before any namespace or cluster exists.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from netslo import slo as slo_mod
from netslo.errors import InfrastructureError, SpecError
from netslo.providers import PROVIDERS
from netslo.providers.netns import DATAPATHS
from netslo.report.results import ResultsWriter
from netslo.runner import SloBreach
from netslo.units import format_duration, format_percent

pytest_plugins = ["fixtures.cluster", "fixtures.impair", "fixtures.protocols", "fixtures.qos", "plugins.netslo_report"]

OPTIONS = pytest.StashKey["NetsloOptions"]()
OUTCOME = pytest.StashKey[object]()
RESULTS = pytest.StashKey[ResultsWriter]()

MARKERS = (
    "cni: the network SLO gate (run with `pytest -m cni`)",
    "needs_netem: needs a kernel with sch_netem (host or user-mode-linux)",
    "slow: takes more than a few seconds",
)


@dataclass
class NetsloOptions:
    provider: str
    datapath: str
    nodes: int
    slo: slo_mod.SloSpec
    results_dir: Path
    provider_options: dict  # keyword arguments for make_provider(provider, ...)


def pytest_addoption(parser):
    g = parser.getgroup("netslo", "network SLO gate")
    g.addoption("--provider", default="netns", help=f"where pods run: {', '.join(PROVIDERS)} (default netns)")
    g.addoption("--datapath", default="bridge", help=f"netns datapath: {', '.join(DATAPATHS)} (default bridge)")
    g.addoption("--nodes", default="2", help="number of nodes of the embedded cluster (default 2)")
    g.addoption("--slo-file", default=None, help="SLO YAML file (default: slo.yaml in the project root)")
    g.addoption("--netslo-results", default="netslo-results",
                help="directory for results.json and raw samples (default netslo-results)")
    g.addoption("--cni", default="calico", help="kind/minikube: CNI to install: calico, cilium, antrea")
    g.addoption("--encapsulation", default=None, help="kind/minikube: CNI encapsulation overlay (e.g. vxlan)")
    g.addoption("--keep-cluster", action="store_true", help="kind/minikube: reuse/keep the cluster")
    g.addoption("--kubeconfig", default=None, help="existing: kubeconfig (default $NETSLO_KUBECONFIG/$KUBECONFIG)")
    g.addoption("--context", default=None, help="existing: kubeconfig context")
    g.addoption("--agent-image", default=None, help="Kubernetes: netslo agent image (default $NETSLO_AGENT_IMAGE)")


_MAIN_PID = os.getpid()


def _sigterm_to_interrupt(signum, frame):
    """SIGTERM in the pytest process tears down like Ctrl-C; forked helpers (pyroute2) just exit."""
    if os.getpid() != _MAIN_PID:
        os._exit(128 + signum)
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    provider = config.getoption("--provider")
    datapath = config.getoption("--datapath")
    nodes_text = config.getoption("--nodes")
    try:
        if provider not in PROVIDERS:
            raise SpecError("--provider", provider, f"one of {', '.join(PROVIDERS)}")
        if datapath not in DATAPATHS:
            raise SpecError("--datapath", datapath, f"one of {', '.join(DATAPATHS)}")
        if not str(nodes_text).isdigit() or not 1 <= int(nodes_text) <= 16:
            raise SpecError("--nodes", nodes_text, "a whole number 1..16")
        provider_options = _provider_options(config, provider, datapath, int(nodes_text))
        slo_path = config.getoption("--slo-file") or Path(config.rootpath) / "slo.yaml"
        spec = slo_mod.load(slo_path)
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None
    config.stash[OPTIONS] = NetsloOptions(provider, datapath, int(nodes_text), spec,
                                          Path(config.getoption("--netslo-results")), provider_options)
    config.stash[RESULTS] = ResultsWriter(config.stash[OPTIONS].results_dir)
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)  # so SIGTERM tears down like Ctrl-C


def _provider_options(config, provider: str, datapath: str, nodes: int) -> dict:
    """The keyword arguments the chosen provider takes, validated (SpecError on bad values)."""
    if provider == "netns":
        return {"nodes": nodes, "datapath": datapath}
    image = config.getoption("--agent-image")
    if provider == "existing":
        return {"kubeconfig": config.getoption("--kubeconfig"), "context": config.getoption("--context"),
                "image": image}
    from netslo.providers.cni import CNIS
    cni = config.getoption("--cni")
    if cni not in CNIS:
        raise SpecError("--cni", cni, f"one of {', '.join(CNIS)}")
    return {"cni": cni, "nodes": nodes, "keep_cluster": config.getoption("--keep-cluster"),
            "encapsulation": config.getoption("--encapsulation"), "image": image}


def pytest_report_header(config):
    o = config.stash.get(OPTIONS, None)
    if o:
        return (f"netslo: provider={o.provider} datapath={o.datapath} nodes={o.nodes} slo={o.slo.source} "
                f"samples={o.slo.sampling.samples}..{o.slo.sampling.max_samples} "
                f"interval={format_duration(o.slo.sampling.interval)} confidence={o.slo.sampling.confidence:.0%}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if call.excinfo is not None:
        exc = call.excinfo.value
        if isinstance(exc, SloBreach):
            report.longrepr = str(exc)
        elif isinstance(exc, InfrastructureError):
            report.longrepr = f"infrastructure error (not an SLO verdict): {exc}"
        elif isinstance(exc, SpecError):
            report.longrepr = f"configuration error (not an SLO verdict): {exc}"
    if report.when == "call" and OUTCOME in item.stash:
        item.config.stash[RESULTS].add(item.nodeid, item.stash[OUTCOME])


def _row(outcome) -> str:
    m = outcome.analysis.metrics
    return (f"{outcome.scenario.id:<28} {outcome.verdict:<5} p50 {format_duration(m['rtt.p50'].value):>8}  "
            f"p99 {format_duration(m['rtt.p99'].value):>8}  ipdv.p99 {format_duration(m['ipdv.p99'].value):>8}  "
            f"loss {format_percent(m['loss'].value):>6}  n={len(outcome.samples)}")


def pytest_terminal_summary(terminalreporter, config):
    writer = config.stash.get(RESULTS, None)
    if not writer or not writer.records:
        return
    path = writer.write()
    tr = terminalreporter
    tr.section("netslo SLO summary")
    env = writer.environment
    tr.write_line("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    for rec in writer.records:
        m = rec["metrics"]
        fmt = lambda k: format_duration(m[k]["value"]) if m[k]["value"] is not None else "-"  # noqa: E731
        tr.write_line(f"{rec['scenario']:<28} {rec['verdict']:<5} rtt p50 {fmt('rtt.p50'):>8} "
                      f"p99 {fmt('rtt.p99'):>8}  |ipdv| p99 {fmt('ipdv.p99'):>8}  "
                      f"loss {format_percent(m['loss']['value']):>6}  n={rec['counts']['sent']}")
    tr.write_line(f"results: {path}")
