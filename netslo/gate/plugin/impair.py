"""Impairment fixtures: a cluster whose kernel has sch_netem, and verified impairments on its pods.

- ``impaired_cluster`` (module): ``NetemEnv`` = the cluster (the session's host netns cluster when
  the host kernel has sch_netem, else the session's user-mode-linux guest, see below; on
  kind/minikube/existing the session's Kubernetes cluster with ``KubeImpairer``, the impairment
  DaemonSet), its impairer, the responder pod with its ports and client pods per placement.
  Kubernetes nodes' kernels are asked once, up front: a node without sch_netem skips every
  impairment test with the node and kernel named.
- ``impaired`` (function, indirect parametrization): applies the impairment(s) on the client pod in
  SETUP and verifies them closed-loop; "impairment not realized: configured X, measured Y" makes
  the test an ERROR before any SLO is judged. Removed when the test ends; a removal that leaves
  anything behind (or finds a qdisc netslo did not put there) errors the test at teardown.
- ``impairment`` (function): the same as a factory for tests that change impairments mid-test
  (``impairment(spec, placement="cross-node", directions=("egress",))``; raises InfrastructureError).
- ``impair_slo``: the impairment SLO file (``--netslo-impair-slo``, default netslo/gate/slo-impairments.yaml);
  ``impair_slo.for_preset(name)`` keeps the objectives named ``<preset>.*``.
- ``netem_guest(config, nodes, datapath)``: the session's user-mode-linux guest of that shape
  (``NetemGuest``), shared by every test that needs it: the impairment module on a host without
  sch_netem and the QoS netem studies. The gate runs the tests marked ``needs_netem`` one after the
  other (``pytest_collection_modifyitems`` below) and shuts the guest down after the last of them, so
  it boots once and never idles beside a host-kernel measurement.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import pytest

from netslo.core import progress
from netslo.core.errors import SpecError, Unsupported
from netslo.core.phase_times import timed_call
from netslo.core.resources import shipped_slo
from netslo.gate.plugin.gate import skip, skip_unsupported
from netslo.gate.plugin.hooks import OPTIONS
from netslo.impair import capability, verify
from netslo.impair.spec import Impairment, parse
from netslo.slo import spec as slo_mod

DEFAULT_IMPAIR_SLO = shipped_slo("slo-impairments.yaml")
ENV_KEY = pytest.StashKey[list]()
GUESTS_KEY = pytest.StashKey[dict]()
REBOOTED = "user-mode-linux guest booted again before the next test: "   # why, after it (progress output)


def pytest_addoption(parser):
    g = parser.getgroup("netslo", "network SLO gate")
    g.addoption("--netslo-impair-slo", default=None,
                help="SLO YAML for impairment scenarios (default: the shipped netslo/gate/slo-impairments.yaml)")
    g.addoption("--netslo-netem-kernel", default="auto", choices=("auto", "host", "uml"),
                help="where netem runs: auto (host kernel if it has sch_netem, else user-mode-linux)")


@dataclass
class ImpairSlo:
    """The impairment SLO file; objectives are selected by their name prefix '<preset>.'."""

    spec: slo_mod.SloSpec

    def for_preset(self, name: str) -> slo_mod.SloSpec:
        objs = [o for o in self.spec.objectives if o.name.startswith(name + ".")]
        if not objs:
            raise SpecError(f"{self.spec.source}: objectives", name, f"at least one objective named '{name}.<...>'")
        return slo_mod.SloSpec(self.spec.sampling, objs, self.spec.source)


def outcome(v: verify.Verification) -> str:
    """'verified', 'NOT REALIZED' or 'CANNOT BE VERIFIED HERE' (nothing missed, but a direction had no
    check that could have failed with nothing applied)."""
    return "NOT REALIZED" if v.failed else "CANNOT BE VERIFIED HERE" if v.unverifiable else "verified"


@dataclass
class NetemEnv:
    """A cluster with real netem plus the pods impairment tests use."""

    cluster: object
    impairer: object
    server: object
    ports: dict
    kernel: str
    boot_seconds: float | None = None
    _clients: dict = field(default_factory=dict)
    _baselines: dict = field(default_factory=dict)
    verifications: list = field(default_factory=list)

    def client(self, placement: str = "cross-node"):
        if placement not in self._clients:
            if placement == "same-node":
                node = self.cluster.nodes[0]
            elif placement == "cross-node":
                if len(self.cluster.nodes) < 2:
                    skip("nodes", "cross-node placement needs at least 2 nodes")
                node = self.cluster.nodes[1]
            else:
                raise SpecError("placement", placement, "same-node or cross-node")
            self._clients[placement] = self.cluster.add_pod(f"imp-{placement}", node)
        return self._clients[placement]

    def baseline(self, client, family: str = "ipv4"):
        """Unimpaired calibration samples for client -> server over ``family`` (measured once, cached)."""
        key = client.name if family == "ipv4" else f"{client.name}/{family}"
        if key not in self._baselines:
            self._baselines[key] = verify.measure(self.cluster, client, self.server, self.ports, family=family)
        return self._baselines[key]

    @timed_call("impairment apply/verify/clear")
    def apply(self, client, imps: list[Impairment], check: list[Impairment] | None = None,
              count: int = verify.CALIBRATION_COUNT, family: str = "ipv4") -> verify.Verification:
        """Apply ``imps`` on ``client`` and verify against ``check`` (default: the same specs) on
        the path of ``family`` (the scenario's)."""
        base = self.baseline(client, family)
        for imp in imps:
            self.impairer.apply(client, imp)
        v = verify.verify(self.cluster, client, self.server, self.ports,
                          [(client, i) for i in (check or imps)], base, count=count, family=family)
        what = ", ".join(str(i) for i in (check or imps))
        self.verifications.append((what, v))
        again = f"; the first calibration missed ({v.first.misses()}), measured again" if v.first else ""
        progress.note(f"impairment {what} on {client.name}: {outcome(v)} "
                      f"({len(v.checks)} checks, {len(v.samples)} calibration requests{again})")
        return v

    @timed_call("impairment apply/verify/clear")
    def clear(self) -> None:
        self.impairer.clear()


class NetemGuest:
    """One user-mode-linux guest (real sch_netem) of ``nodes`` nodes and ``datapath``, with a responder
    pod on node0 (UDP, TCP, HTTP); booted on first ``up()``, booted again after ``close()``."""

    SERVER = "netem-server"

    def __init__(self, nodes: int, datapath: str):
        self.nodes, self.datapath = nodes, datapath
        self.cluster = None
        self.server = None
        self.ports: dict = {}
        self._pods: dict = {}

    def up(self):
        """The running guest cluster (booted now if there is none, it died or a responder of its server
        cannot answer: exited, or runs without its listening socket; a guest that died or a responder
        that cannot answer is said in the progress output with its exit code and log); Unsupported
        without user-mode-linux."""
        if self.cluster is not None and not self.cluster.alive():
            progress.note(REBOOTED + self.cluster.ended())
            self.close()
        if self.cluster is not None and (gone := self.cluster.responder_faults(self.server)):
            progress.note(REBOOTED + "; ".join(gone))
            self.close()
        if self.cluster is None:
            from netslo.providers.netns.uml import UmlCluster
            c = UmlCluster(nodes=self.nodes, datapath=self.datapath)
            try:
                server = c.add_pod(self.SERVER, c.nodes[0])
                self.ports = c.start_responders(server)
            except BaseException:
                c.close()
                raise
            self.cluster, self.server = c, server
        return self.cluster

    def pod(self, name: str, node: str):
        """A pod of this guest, made on first use."""
        if name not in self._pods:
            self._pods[name] = self.up().add_pod(name, node)
        return self._pods[name]

    def close(self) -> None:
        c, self.cluster, self.server, self.ports, self._pods = self.cluster, None, None, {}, {}
        if c is not None:
            c.close()


def netem_guest(config, nodes: int, datapath: str) -> NetemGuest:
    """The session's guest of this shape (one per shape; the default gate uses one: 2 nodes, bridge)."""
    guests = config.stash.setdefault(GUESTS_KEY, {})
    return guests.setdefault((nodes, datapath), NetemGuest(nodes, datapath))


def _needs_netem(item) -> bool:
    return item.get_closest_marker("needs_netem") is not None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """In a gate session whose impairment tests run in the user-mode-linux guest (embedded provider,
    host without sch_netem), the gate tests that need netem run one after the other, where the first
    of them stands (the impairment module, then the QoS netem studies): one guest boot serves them
    all. Elsewhere the guest serves only the QoS studies and the order stays as collected (on kind
    they would otherwise run right after cluster creation, beside the CNI agents' start-up work: the
    slow-start-after-idle ratio fell to x1.47 there once)."""
    if OPTIONS not in config.stash or config.stash[OPTIONS].provider != "netns":
        return
    netem = [i for i in items if _needs_netem(i) and i.get_closest_marker("cni") is not None]
    if len(netem) < 2:
        return
    try:   # asks the kernel (once, cached): only when there is something to group
        if not _uml_needed(config):
            return
    except Unsupported:
        return
    chosen = set(map(id, netem))
    first = items.index(netem[0])
    rest = [i for i in items if id(i) not in chosen]
    items[:] = rest[:first] + netem + rest[first:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test that needs netem (the next one does not, or none is left): guests shut down."""
    yield
    if nextitem is None or not _needs_netem(nextitem):
        for guest in item.config.stash.get(GUESTS_KEY, {}).values():
            guest.close()


def pytest_sessionfinish(session, exitstatus):
    for guest in session.config.stash.get(GUESTS_KEY, {}).values():
        guest.close()


KUBE_PROVIDERS = ("existing", "kind", "minikube")


def _uml_needed(config) -> bool:
    """For the embedded provider: False (the session's host cluster has netem) or True (user-mode-linux).
    Unsupported when netem cannot be had."""
    o = config.stash[OPTIONS]
    if o.provider != "netns":
        raise Unsupported(f"impairments need the embedded provider (--netslo-provider netns) or a Kubernetes "
                          f"provider ({', '.join(KUBE_PROVIDERS)}), not {o.provider}", "provider")
    choice = config.getoption("--netslo-netem-kernel", default="auto")
    host = capability.detect()
    if choice == "host" or (choice == "auto" and host.netem):
        host.require("netem")
        return False  # use the session's host cluster
    ok, why = capability.uml_available()
    if not ok:
        raise Unsupported(f"no netem: host kernel {host.kernel}: {host.reasons.get('netem', 'lacks sch_netem')}; "
                          f"user-mode-linux: {why}")
    return True


@pytest.fixture(scope="module")
def netslo_impaired_cluster(request, pytestconfig):
    """NetemEnv: a cluster where netem is real (host kernel or user-mode-linux); skip if neither.

    The user-mode-linux guest is the session's (``netem_guest``): it lives while the tests that need
    it run, one after the other, so it never competes with the host-kernel scenarios of other modules."""
    t0 = time.monotonic()
    o = pytestconfig.stash[OPTIONS]
    if o.provider in KUBE_PROVIDERS:   # netem through the DaemonSet
        env = _kube_env(request)
    else:
        try:
            guest = netem_guest(pytestconfig, o.nodes, o.datapath) if _uml_needed(pytestconfig) else None
            c = guest.up() if guest is not None else None
        except Unsupported as e:
            skip_unsupported(e, "needs_netem")
        if c is None:
            from netslo.impair.netem import NetemController
            netslo_cluster = request.getfixturevalue("netslo_cluster")
            server, ports = request.getfixturevalue("netslo_responder")
            env = NetemEnv(netslo_cluster, NetemController(netslo_cluster), server, ports, netslo_cluster.environment()["kernel"])
        else:
            env = NetemEnv(c, c.impairer, guest.server, guest.ports, f"uml {c.ready.get('kernel', '?')}", c.boot_seconds)
    env.setup_seconds = time.monotonic() - t0
    pytestconfig.stash.setdefault(ENV_KEY, []).append(env)
    return env


def _kube_env(request) -> NetemEnv:
    """The session's Kubernetes cluster with KubeImpairer; skips unless every node's kernel has netem."""
    netslo_cluster = request.getfixturevalue("netslo_cluster")
    impairer = netslo_cluster.node_agent
    try:
        impairer.require("netem", "ifb", "ingress_redirect")
    except Unsupported as e:
        skip_unsupported(e, "needs_netem")
    server, ports = request.getfixturevalue("netslo_responder")
    return NetemEnv(netslo_cluster, impairer, server, ports, netslo_cluster.environment().get("kernel", "?"))


@pytest.fixture
def netslo_impairment(netslo_impaired_cluster):
    """Factory: apply + verify impairments on a client pod; removed after the test."""
    env = netslo_impaired_cluster

    def apply(spec, placement: str = "cross-node", directions=("egress",), check=None,
              count: int = verify.CALIBRATION_COUNT, family: str = "ipv4"):
        imp = spec if isinstance(spec, Impairment) else parse(spec)
        imps = [replace(imp, direction=d) for d in directions]
        checks = None if check is None else [replace(check if isinstance(check, Impairment) else parse(check),
                                                      direction=d) for d in directions]
        client = env.client(placement)
        v = env.apply(client, imps, checks, count=count, family=family)
        v.raise_if_not_realized()
        return client, v

    try:
        yield apply
    finally:
        env.clear()   # an impairment that stayed errors the test (teardown error naming the device)


@pytest.fixture
def netslo_impaired(request, netslo_impaired_cluster):
    """Indirect-parametrized impairment applied and verified in SETUP, so "impairment not realized"
    makes the test an ERROR (pytest's setup error), never a pass or an SLO failure::

        @pytest.mark.parametrize("netslo_impaired", ["wifi", {"spec": {"delay": "5ms"}, "directions": ["egress",
                                 "ingress"], "check": None, "placement": "cross-node", "count": 2000, "family": "ipv4"}],
                                 indirect=True)
        def test_x(impaired): client, verification = impaired

    A plain string or a spec mapping without "spec" is the spec itself (preset name or YAML form)."""
    param = getattr(request, "param", None)
    if param is None:
        raise SpecError("netslo_impaired", None, "an indirect parameter: a preset name or {'spec': ...}")
    if isinstance(param, str) or "spec" not in param:
        param = {"spec": param}
    env = netslo_impaired_cluster
    imp = parse(param["spec"])
    dirs = tuple(param.get("directions", ("egress",)))
    check = param.get("check")
    imps = [replace(imp, direction=d) for d in dirs]
    checks = None if check is None else [replace(parse(check), direction=d) for d in dirs]
    client = env.client(param.get("placement", "cross-node"))
    try:
        v = env.apply(client, imps, checks, count=param.get("count", verify.CALIBRATION_COUNT),
                      family=param.get("family", "ipv4"))
        v.raise_if_not_realized()
        yield client, v
    finally:
        env.clear()   # an impairment that stayed errors the test (teardown error naming the device)


@pytest.fixture(scope="session")
def netslo_impair_slo(pytestconfig) -> ImpairSlo:
    path = pytestconfig.getoption("--netslo-impair-slo", default=None) or DEFAULT_IMPAIR_SLO
    try:
        return ImpairSlo(slo_mod.load(path))
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None


def pytest_terminal_summary(terminalreporter, config):
    envs = config.stash.get(ENV_KEY, [])
    if not envs:
        return
    tr = terminalreporter
    tr.section("netslo impairments (netem)")
    for env in envs:
        boot = f", booted in {env.boot_seconds:.2f} s" if env.boot_seconds else ""
        tr.write_line(f"kernel: {env.kernel}{boot}; setup {getattr(env, 'setup_seconds', 0):.1f} s")
        for what, v in env.verifications:
            tr.write_line(f"{outcome(v)}: {what}")
            for c in v.checks:
                tr.write_line("    " + c.line())
