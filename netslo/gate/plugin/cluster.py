"""Session fixtures: the cluster, the responder pod, client pods per placement; per-test outcome."""

from __future__ import annotations

import pytest

from netslo.core import phase_times, progress
from netslo.core.errors import InfrastructureError, NotEnoughSamples, Unsupported
from netslo.gate.plugin.gate import skip, skip_unsupported
from netslo.gate.plugin.hooks import OPTIONS, OUTCOME
from netslo.gate.plugin.report import record_rerun, suspected_regression
from netslo.providers import make_provider
from netslo.slo import runner
from netslo.slo import spec as slo_mod


@pytest.fixture(scope="session")
def netslo_options(pytestconfig):
    return pytestconfig.stash[OPTIONS]


@pytest.fixture(scope="session")
def netslo_slo(netslo_options):
    """The validated SLO file of this run."""
    return netslo_options.slo


@pytest.fixture(scope="session")
def netslo_cluster(netslo_options):
    """The cluster of this session; everything it created is removed at the end (also on Ctrl-C)."""
    o = netslo_options
    try:
        options = ', '.join(f'{k}={v}' for k, v in o.provider_options.items() if v is not None)
        with progress.phase(f"provider {o.provider} up ({options})"), \
                phase_times.timed("provider up"):
            c = make_provider(o.provider, **o.provider_options).up()
    except (Unsupported, InfrastructureError) as e:   # a cluster that cannot come up is an error, never a skip
        raise InfrastructureError(f"provider {o.provider} did not come up: {e}") from None
    try:
        yield c
    finally:
        with phase_times.timed("teardown"):
            c.close()


# Pods that session fixtures other than the standard ones need: fixture name -> ((pod name, node
# index[, annotations[, responders]]), ...), or a function of the pytest config giving them (for pods whose
# annotations come from a file the session reads). A module registers its fixtures (``plan_pods``)
# when it is imported; at the end of collection the plan keeps those a selected test uses
# (``pytest_collection_finish``), and ``netslo_gate_pods`` makes them with the standard pods in one
# ``add_pods`` call.
POD_FIXTURES: dict[str, object] = {}
PLANNED = pytest.StashKey[list]()
# Session fixtures that work through the cluster's node agents (Kubernetes: the node agent DaemonSet,
# ``cluster.node_agent``): when a selected test uses one, the DaemonSet is created with the gate's pods.
NODE_AGENT_FIXTURES = {"netslo_impaired_cluster", "netslo_bandwidth_pods", "netslo_cluster_dscp"}
NODE_AGENTS = pytest.StashKey[bool]()
# What session fixtures need besides pods and is best made right after them: fixture name ->
# ``make(cluster, pods) -> object`` (``make_with_pods``), e.g. Kubernetes Services, which kube-proxy
# programs in its next sync: made minutes before their first use, they answer at once. Kept as
# (object, None) or (None, the error) until the fixture takes it (``made_with_pods``).
WITH_PODS: dict[str, object] = {}
MADE = pytest.StashKey[dict]()


def plan_pods(fixture: str, *pods) -> None:
    """Declare that session fixture ``fixture`` takes ``pods`` ((name, node index[, annotations[,
    responders]]), ...;
    or one function ``config -> [such tuples]``) from ``netslo_gate_pods`` (``planned_pod``), so they
    are made at once with the others."""
    POD_FIXTURES[fixture] = pods[0] if len(pods) == 1 and callable(pods[0]) else tuple(pods)


def make_with_pods(fixture: str, make) -> None:
    """Declare that session fixture ``fixture`` takes an object ``make(cluster, pods)`` creates right
    after ``netslo_gate_pods`` has made the pods (``pods``: name -> pod), when a selected test uses it."""
    WITH_PODS[fixture] = make


def made_with_pods(config, fixture: str):
    """What ``make_with_pods`` made for ``fixture`` (its error raised here, in the fixture that needs
    it); None when nothing was made for it (no selected test used it when the pods were made)."""
    made, error = config.stash.get(MADE, {}).pop(fixture, (None, None))
    if error is not None:
        raise error
    return made


def pytest_collection_finish(session):
    """The planned pods of the fixtures the selected tests use (deselection is over by now)."""
    used = {f for item in session.items for f in getattr(item, "fixturenames", ())}
    session.config.stash[PLANNED] = [tuple(p) for f, pods in POD_FIXTURES.items() if f in used
                                     for p in (pods(session.config) if callable(pods) else pods)]
    session.config.stash[NODE_AGENTS] = bool(used & NODE_AGENT_FIXTURES)
    session.config.stash[MADE] = {f: (None, None) for f in WITH_PODS if f in used}


# The gate's own server and clients, which most scenarios and the disruption study measure between,
# request more CPU than the other agent pods (10m), so that on Kubernetes a busy node does not leave
# them waiting behind its components (a pod's CPU weight follows its request). kind, 2 cores,
# 2026-12-07, cross-node disruption study with these pods at 10m and at 100m: Cilium's agent
# restart gave up 3-603 new connections per trial against 0, its roll held the client back 1.9-3.1 s
# against <= 0.93 s; Calico's restart 0-94 against 0-26. Three pods, so kind's control-plane node
# (2000m, ~1100m requested by Kubernetes and the CNI) still has room for the gate's other pods.
MEASURING_CPU = "100m"
# the measuring pods: (name, node index[, annotations, responders]); the server gets the standard responders
MEASURING_PODS = (("server", 0), ("client-same", 0, None, ()), ("client-cross", 1, None, ()))


@pytest.fixture(scope="session")
def netslo_gate_pods(request, netslo_cluster):
    """name -> pod of the gate's pods, made together (``add_pods``: on Kubernetes created at once and
    awaited with one watch): the responder ``server`` and ``client-same`` on the first node,
    ``client-cross`` on the second (when there is one), and the planned pods of the selected tests
    (``plan_pods``; those on a node the cluster does not have are left to their fixture's skip).
    Clients are made without responders (nothing is sent to them; on Kubernetes a pod without
    responders idles, and has no interpreter and startup probe to start).
    On Kubernetes the node agent DaemonSet starts with them when a selected test needs it; then what
    ``make_with_pods`` declared for the selected tests' fixtures is made."""
    nodes = netslo_cluster.nodes
    if request.config.stash.get(NODE_AGENTS, False) and hasattr(netslo_cluster, "node_agent"):
        netslo_cluster.node_agent.create()   # its pods start beside the ones below; awaited on first use
    wanted = [*MEASURING_PODS, *request.config.stash.get(PLANNED, [])]
    specs = {}
    for k, (name, i, *more) in enumerate(wanted):
        if i < len(nodes) and name not in specs:
            specs[name] = {"name": name, "node": nodes[i]}
            if k < len(MEASURING_PODS):
                specs[name]["cpu"] = MEASURING_CPU
            if more and more[0]:
                specs[name]["annotations"] = dict(more[0])
            if len(more) > 1:   # the pod's responders (default: the standard ones)
                specs[name]["responders"] = tuple(more[1])
    pods = {p.name: p for p in netslo_cluster.add_pods(list(specs.values()))}
    made = request.config.stash.get(MADE, {})
    for fixture in list(made):
        try:
            made[fixture] = (WITH_PODS[fixture](netslo_cluster, pods), None)
        except (InfrastructureError, Unsupported) as e:    # the fixture's own tests report it
            made[fixture] = (None, e)
    return pods


def planned_pod(gate_pods: dict, cluster, name: str, node: str):
    """Pod ``name`` from the gate's batch when it was planned there, else made now on ``node``."""
    pod = gate_pods.get(name)
    return pod if pod is not None and pod.node == node else cluster.add_pod(name, node)


@pytest.fixture(scope="session")
def netslo_responder(netslo_cluster, netslo_gate_pods):
    """(pod, ports) of the responder pod on the first node, running udp/tcp/http responders."""
    pod = netslo_gate_pods["server"]
    return pod, netslo_cluster.start_responders(pod)


@pytest.fixture(scope="session")
def netslo_client_for(netslo_cluster, netslo_gate_pods):
    """placement -> client pod: same-node shares the responder's node, cross-node uses another."""
    def get(placement: str):
        if placement == "same-node":
            return netslo_gate_pods["client-same"]
        if placement == "cross-node":
            if "client-cross" not in netslo_gate_pods:
                skip("nodes", "cross-node placement needs at least 2 nodes")
            return netslo_gate_pods["client-cross"]
        raise ValueError(f"placement: value {placement!r} — expected same-node or cross-node")

    return get


@pytest.fixture
def netslo_outcome(request, scenario, netslo_cluster, netslo_responder, netslo_client_for, netslo_slo):
    """Measure the test's ``scenario`` and judge it; infrastructure problems surface as errors here."""
    server, ports = netslo_responder
    client = netslo_client_for(scenario.placement)
    try:
        result = runner.run(netslo_cluster, client, server, ports, scenario, netslo_slo)
    except Unsupported as e:
        skip_unsupported(e)
    if result.verdict == slo_mod.INSUFFICIENT:   # not judged: an error in set-up, never a pass or an SLO failure
        raise NotEnoughSamples(result.message())
    request.node.stash[OUTCOME] = result
    why = suspected_regression(request.config, request.node.nodeid, result.samples)
    if why:   # confirm before the session's regression verdict; the SLO verdict stays the first one's
        record_rerun(request.node, runner.run(netslo_cluster, client, server, ports, scenario, netslo_slo), why)
    return result
