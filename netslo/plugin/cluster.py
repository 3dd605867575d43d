"""Session fixtures: the cluster, the responder pod, client pods per placement; per-test outcome."""

from __future__ import annotations

import pytest

from netslo import phase_times, progress, runner
from netslo import slo as slo_mod
from netslo.errors import InfrastructureError, NotEnoughSamples, Unsupported
from netslo.plugin.gate import skip, skip_unsupported
from netslo.providers import make_provider
from netslo.plugin.hooks import OPTIONS, OUTCOME
from netslo.plugin.report import record_rerun, suspected_regression


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
        with progress.phase(f"provider {o.provider} up ({', '.join(f'{k}={v}' for k, v in o.provider_options.items() if v is not None)})"), \
                phase_times.timed("provider up"):
            c = make_provider(o.provider, **o.provider_options).up()
    except (Unsupported, InfrastructureError) as e:   # a cluster that cannot come up is an error, never a skip
        raise InfrastructureError(f"provider {o.provider} did not come up: {e}") from None
    try:
        yield c
    finally:
        with phase_times.timed("teardown"):
            c.close()


@pytest.fixture(scope="session")
def netslo_responder(netslo_cluster):
    """(pod, ports) of the responder pod on the first node, running udp/tcp/http responders."""
    pod = netslo_cluster.add_pod("server", netslo_cluster.nodes[0])
    return pod, netslo_cluster.start_responders(pod)


@pytest.fixture(scope="session")
def netslo_client_for(netslo_cluster):
    """placement -> client pod: same-node shares the responder's node, cross-node uses another."""
    pods = {}

    def get(placement: str):
        if placement not in pods:
            if placement == "same-node":
                pods[placement] = netslo_cluster.add_pod("client-same", netslo_cluster.nodes[0])
            elif placement == "cross-node":
                if len(netslo_cluster.nodes) < 2:
                    skip("nodes", "cross-node placement needs at least 2 nodes")
                pods[placement] = netslo_cluster.add_pod("client-cross", netslo_cluster.nodes[1])
            else:
                raise ValueError(f"placement: value {placement!r} — expected same-node or cross-node")
        return pods[placement]

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
