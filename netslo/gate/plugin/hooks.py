"""The netslo pytest plugin: options, markers, start-up validation, SLO/infrastructure reporting.

netslo is inert in a session that does not ask for it: it acts only when a ``--netslo-*`` option is
given, the marker expression names ``cni``, or the rootdir holds a netslo SLO file (``slo.yaml`` with
``objectives``). Bad options or a malformed SLO file then stop the run at start-up with one line
(pytest UsageError), before any namespace or cluster exists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from netslo.core.errors import InfrastructureError, NotEnoughSamples, SpecError, Unsupported
from netslo.core.families import MODES, families_of
from netslo.core.resources import shipped_slo
from netslo.core.units import format_duration, whole
from netslo.gate.plugin.rootdir import check_rootdir
from netslo.providers import DATAPATHS, NETNS_MAX_NODES, PROVIDERS, make_provider
from netslo.report.results import ResultsWriter
from netslo.slo import skips
from netslo.slo import spec as slo_mod
from netslo.slo.runner import SloBreach

# Order matters: a module must be registered before another one imports it (assertion rewriting).
pytest_plugins = ["netslo.gate.plugin.gate", "netslo.gate.plugin.deselection", "netslo.gate.plugin.report", "netslo.gate.plugin.progress",
                  "netslo.gate.plugin.cluster", "netslo.gate.plugin.impair", "netslo.gate.plugin.protocols", "netslo.gate.plugin.qos",
                  "netslo.gate.plugin.gate_time", "netslo.gate.plugin.family_select",
                  "netslo.gate.plugin.selected_only", "netslo.gate.plugin.studies", "netslo.gate.plugin.compare",
                  "netslo.gate.plugin.mesh"]

OPTIONS = pytest.StashKey["NetsloOptions"]()
OUTCOME = pytest.StashKey[object]()
RESULTS = pytest.StashKey[ResultsWriter]()

MARKERS = (
    "cni: the network SLO gate (run with `pytest -m cni`)",
    "needs_netem: needs a kernel with sch_netem (host or user-mode-linux)",
    "slow: takes more than a few seconds",
    "emulation: measures netslo's own emulated datapaths, not a cluster's; deselected on kind, minikube, existing",
    "slo_labels(**labels): the SLO labels (study, placement, protocol...) a test without a parametrized "
    "scenario is judged by; with gate: selected-only in the SLO file, no objective selecting them deselects it",
    "scale: an at-scale study (1000 NetworkPolicy objects, minutes on a real cluster); on kind, minikube and "
    "existing it runs only with --netslo-scale",
    "rollout: a disruption study that restarts cluster components (a CNI agent pod: minutes on a real "
    "cluster); on kind, minikube and existing it runs only with --netslo-disruption",
    "cluster_only: a study of a real cluster's component with no emulated equivalent (kube-proxy); "
    "deselected on the embedded provider",
)
GROUP = ("netslo", "netslo: network SLO gate")


def write_result_file(config, name: str, data) -> Path:
    """``data`` as JSON in the run's results directory (``--netslo-results``) as ``name``."""
    opts = config.stash.get(OPTIONS, None)
    out = Path(opts.results_dir if opts else "netslo-results")
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    return out / name


@dataclass
class NetsloOptions:
    provider: str
    datapath: str
    nodes: int
    slo: slo_mod.SloSpec
    results_dir: Path
    provider_options: dict  # keyword arguments for make_provider(provider, ...)
    allowed_skips: frozenset = frozenset()  # skip categories declared expected (option + SLO file)
    ip_family: str = "ipv4"                 # what the run asked the cluster to carry: ipv4 | ipv6 | dual

    @property
    def families(self) -> tuple[str, ...]:
        """The IP families whose scenarios this run measures (the others are deselected)."""
        return families_of(self.ip_family)


def pytest_addoption(parser):
    g = parser.getgroup(*GROUP)
    g.addoption("--netslo-provider", default="netns", help=f"where pods run: {', '.join(PROVIDERS)} (default netns)")
    g.addoption("--netslo-datapath", default="bridge", help=f"netns datapath: {', '.join(DATAPATHS)} (default bridge)")
    g.addoption("--netslo-nodes", default="2", help="number of nodes of the cluster (default 2; netns up to "
                                                    f"{NETNS_MAX_NODES}, a mesh's size)")
    g.addoption("--netslo-zones", default="1", help="netns: emulated zones, in contiguous blocks of nodes "
                                                    "(label topology.kubernetes.io/zone; default 1)")
    g.addoption("--netslo-ip-family", default=None, metavar="FAMILY",
                help=f"IP families of the pods: {', '.join(MODES)} (default dual where netslo makes the "
                     "cluster: netns, kind; ipv4 on minikube and existing — say dual for a dual-stack cluster); "
                     "scenarios of a family not asked for are deselected")
    # Path options expand "~" themselves: the shell does not in the one-word --opt=~/dir, the spelling
    # an absolute path needs (netslo.gate.plugin.rootdir).
    g.addoption("--netslo-slo", default=None, metavar="FILE", type=os.path.expanduser,
                help="SLO YAML file (default: slo.yaml of the current directory, else of the rootdir, "
                     "else the one shipped in netslo.gate)")
    g.addoption("--netslo-results", default="netslo-results", metavar="DIR", type=os.path.expanduser,
                help="directory for results.json and raw samples (default netslo-results)")
    g.addoption("--netslo-allow-skip", action="append", default=[], metavar="CATEGORY",
                help="declare skips of these categories expected (repeatable or comma-separated): "
                     + ", ".join(c for c in skips.CATEGORIES if c not in skips.ALWAYS_DECLARED)
                     + "; any other skip of an SLO test fails the session")
    g.addoption("--netslo-cni", default="calico", help="kind/minikube: CNI to install: calico, cilium, antrea")
    g.addoption("--netslo-encapsulation", default=None, help="kind/minikube: CNI encapsulation overlay (e.g. vxlan)")
    g.addoption("--netslo-keep-cluster", action="store_true", help="kind/minikube: reuse/keep the cluster")
    g.addoption("--netslo-scale", action="store_true",
                help="real clusters: also run the at-scale studies (marker scale: NetworkPolicy data-path cost "
                     "with 0/100/1000 policies; minutes); the embedded provider always runs them")
    g.addoption("--netslo-disruption", action="store_true",
                help="real clusters: also run the disruption studies that restart cluster components (marker "
                     "rollout: the CNI agent on the server's node, 5 trials of 20 s per placement)")
    g.addoption("--netslo-kubeconfig", default=None,
                help="existing: kubeconfig (default $NETSLO_KUBECONFIG/$KUBECONFIG)")
    g.addoption("--netslo-context", default=None, help="existing: kubeconfig context")
    g.addoption("--netslo-agent-image", default=None,
                help="Kubernetes: netslo agent image (default $NETSLO_AGENT_IMAGE)")


_MAIN_PID = os.getpid()


def _sigterm_to_interrupt(signum, frame):
    """SIGTERM in the pytest process tears down like Ctrl-C; forked helpers (pyroute2) just exit."""
    if os.getpid() != _MAIN_PID:
        os._exit(128 + signum)
    raise KeyboardInterrupt(f"signal {signum}")


def _command_line_words(config) -> list[str]:
    words = list(config.invocation_params.args)
    words += shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    words += list(config.getini("addopts"))
    return [str(w) for w in words]


def _has_netslo_slo_file(path: Path) -> bool:
    """True when ``path`` is a YAML file with netslo's top-level shape (``objectives``)."""
    try:
        text = path.read_text()
    except OSError:
        return False
    return re.search(r"(?m)^objectives\s*:", text) is not None


def project_slo_path(config) -> Path:
    """The project's own slo.yaml: of the directory pytest was started in, else of the rootdir."""
    here = Path(config.invocation_params.dir) / "slo.yaml"
    return here if here.exists() else Path(config.rootpath) / "slo.yaml"


def default_slo_path(config) -> Path:
    """The project's own slo.yaml where it has one, else the SLO file shipped with the gate."""
    own = project_slo_path(config)
    return own if own.exists() else shipped_slo("slo.yaml")


def netslo_requested(config) -> bool:
    """Did this session ask for netslo? A --netslo-* option, ``cni`` in -m, or a netslo SLO file."""
    if any(w.startswith("--netslo-") for w in _command_line_words(config)):
        return True
    if re.search(r"\bcni\b", config.option.markexpr or ""):
        return True
    return _has_netslo_slo_file(project_slo_path(config))


def active(config) -> bool:
    """True when netslo configured this session (its options are in the stash)."""
    return OPTIONS in config.stash


@pytest.hookimpl(tryfirst=True)   # before the other netslo modules ask active()
def pytest_configure(config):
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if not netslo_requested(config):
        return
    check_rootdir(config)
    provider = config.getoption("--netslo-provider")
    datapath = config.getoption("--netslo-datapath")
    nodes_text = config.getoption("--netslo-nodes")
    try:
        if provider not in PROVIDERS:
            raise SpecError("--netslo-provider", provider, f"one of {', '.join(PROVIDERS)}")
        if datapath not in DATAPATHS:
            raise SpecError("--netslo-datapath", datapath, f"one of {', '.join(DATAPATHS)}")
        whole(nodes_text, "--netslo-nodes", 1, NETNS_MAX_NODES if provider == "netns" else 16)
        allowed = skips.parse_allowed(config.getoption("--netslo-allow-skip"), "--netslo-allow-skip")
        ip_family = config.getoption("--netslo-ip-family") or ("dual" if provider in ("netns", "kind") else "ipv4")
        families_of(ip_family, "--netslo-ip-family")
        provider_options = _provider_options(config, provider, datapath, int(nodes_text), ip_family)
        slo_path = config.getoption("--netslo-slo") or default_slo_path(config)
        spec = slo_mod.load(slo_path)
        _preflight(provider, provider_options)
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None
    config.stash[OPTIONS] = NetsloOptions(provider, datapath, int(nodes_text), spec,
                                          Path(config.getoption("--netslo-results")), provider_options,
                                          allowed | spec.allow_skips | skips.ALWAYS_DECLARED, ip_family)
    config.stash[RESULTS] = ResultsWriter(config.stash[OPTIONS].results_dir)
    config.stash[RESULTS].slo_source = spec.source
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)  # so SIGTERM tears down like Ctrl-C


def _preflight(provider: str, options: dict) -> None:
    """What the provider can check before anything is created (kubeconfig and binaries present);
    a failure is a usage error naming the option, never a skip."""
    try:
        p = make_provider(provider, **options)
        check = getattr(p, "preflight", None)
        if check is not None:
            check()
    except (Unsupported, InfrastructureError) as e:
        raise SpecError("--netslo-provider", provider, f"a provider that can start here: {e}") from None


def _provider_options(config, provider: str, datapath: str, nodes: int, ip_family: str = "ipv4") -> dict:
    """The keyword arguments the chosen provider takes, validated (SpecError on bad values). The
    embedded provider and kind build the families asked for; minikube and an existing cluster have
    their own (an IPv6 scenario on a cluster without IPv6 addresses errors, naming the missing address)."""
    if provider == "netns":
        zones = whole(config.getoption("--netslo-zones"), "--netslo-zones", 1, nodes, "(the nodes)")
        return {"nodes": nodes, "datapath": datapath, "ip_family": ip_family, "zones": zones}
    image = config.getoption("--netslo-agent-image")
    if provider == "existing":
        return {"kubeconfig": config.getoption("--netslo-kubeconfig"), "context": config.getoption("--netslo-context"),
                "image": image}
    from netslo.providers.cni import CNIS
    cni = config.getoption("--netslo-cni")
    if cni not in CNIS:
        raise SpecError("--netslo-cni", cni, f"one of {', '.join(CNIS)}")
    return {"cni": cni, "nodes": nodes, "keep_cluster": config.getoption("--netslo-keep-cluster"),
            "encapsulation": config.getoption("--netslo-encapsulation"), "image": image,
            **({"ip_family": ip_family} if provider == "kind" else {})}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if not active(item.config):
        return
    if call.excinfo is not None:
        exc = call.excinfo.value
        if isinstance(exc, SloBreach):
            report.longrepr = str(exc)
        elif isinstance(exc, NotEnoughSamples):
            report.longrepr = f"not enough samples (not an SLO verdict): {exc}"
        elif isinstance(exc, InfrastructureError):
            report.longrepr = f"infrastructure error (not an SLO verdict): {exc}"
        elif isinstance(exc, SpecError):
            report.longrepr = f"configuration error (not an SLO verdict): {exc}"
    if report.when == "call" and OUTCOME in item.stash:
        item.config.stash[RESULTS].add(item.nodeid, item.stash[OUTCOME])


def pytest_report_header(config):
    o = config.stash.get(OPTIONS, None)
    if o:
        declared = sorted(o.allowed_skips - skips.ALWAYS_DECLARED)
        where = (f"datapath={o.datapath}" if o.provider == "netns" else
                 f"cni={o.provider_options['cni']}" if "cni" in o.provider_options else "cni=the cluster's")
        nodes = "" if o.provider == "existing" else f" nodes={o.nodes}"   # existing: the cluster's own
        return (f"netslo: provider={o.provider} {where}{nodes} ip-family={o.ip_family} slo={o.slo.source} "
                f"samples={o.slo.sampling.samples}..{o.slo.sampling.max_samples} "
                f"interval={format_duration(o.slo.sampling.interval)} confidence={o.slo.sampling.confidence:.0%}"
                f" declared skips={','.join(declared) or 'none'}")
