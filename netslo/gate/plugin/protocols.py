"""Fixtures of the protocol-breadth gate (netslo/gate/test_protocols.py): the run's TLS CA, the ws/tls/mqtt
responders beside the session's responder pod, cached measurements, and the Service exposure paths.

Import the fixtures you use into a test module (``from netslo.gate.plugin.protocols import ...``)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from netslo.core.errors import Unsupported
from netslo.gate.plugin.cluster import made_with_pods, make_with_pods, plan_pods
from netslo.gate.plugin.gate import skip_unsupported
from netslo.gate.plugin.hooks import OPTIONS
from netslo.slo import runner
from netslo.studies.workloads import label
from netslo.traffic import tlsca

EXTRA_KINDS = ("ws", "tls", "mqtt")
INGRESS_POD = "server-ingress"   # Kubernetes: the ingress proxy's pod (KubeServices' name for it)


def with_sampling(spec, count: int, max_count: int | None = None):
    """The SLO spec with its sampling bounded to ``count`` (up to ``max_count``) requests per scenario."""
    sampling = dataclasses.replace(spec.sampling, samples=count, max_samples=max(count, max_count or count))
    return dataclasses.replace(spec, sampling=sampling)


@pytest.fixture(scope="session")
def netslo_tls_dir(tmp_path_factory):
    """A run-scoped CA + server certificate; agents find it through $NETSLO_TLS_DIR."""
    d = tmp_path_factory.mktemp("tls")
    tlsca.make(d)
    old = os.environ.get(tlsca.ENV)
    os.environ[tlsca.ENV] = str(d)
    yield d
    if old is None:
        os.environ.pop(tlsca.ENV, None)
    else:
        os.environ[tlsca.ENV] = old


@pytest.fixture(scope="session")
def netslo_proto_ports(netslo_cluster, netslo_responder, netslo_tls_dir):
    """kind -> port of every responder in the session's responder pod, ws/tls/mqtt included."""
    server, ports = netslo_responder
    try:
        extra = netslo_cluster.start_responders(server, EXTRA_KINDS)
    except Unsupported as e:
        skip_unsupported(e)
    return {**ports, **extra}


@pytest.fixture(scope="session")
def netslo_measure(netslo_cluster, netslo_responder, netslo_client_for, netslo_proto_ports, netslo_slo):
    """measure(scenario, count, server=None, ports=None, key=None) -> runner.Outcome, cached per key."""
    cache = {}

    def get(scenario, count: int, *, server=None, ports=None, key=None, max_count=None):
        k = key or (label(scenario), count)
        if k not in cache:
            spec = with_sampling(netslo_slo, count, max_count)
            try:
                cache[k] = runner.run(netslo_cluster, netslo_client_for(scenario.placement), server or netslo_responder[0],
                                      ports or netslo_proto_ports, scenario, spec)
            except Unsupported as e:
                skip_unsupported(e)
        return cache[k]

    return get


# On Kubernetes the ingress proxy's pod (no standard responders) is made with the gate's other pods;
# the embedded provider's ingress is a namespace of its own (netslo.providers.netns.services).
plan_pods("netslo_services", lambda config: [] if config.stash[OPTIONS].provider == "netns"
          else [(INGRESS_POD, 0, None, ())])


def _exposure_services(cluster, pods):
    """On Kubernetes the exposure Services, made with the gate's pods (kube-proxy programs a new
    Service in its next sync; the first request to one not yet programmed waited out the probe's 6 s
    connect timeout: 6.2 s of a kind + Calico gate on 2026-11-29)."""
    if cluster.provider == "netns":
        return None
    from netslo.providers.base import RESPONDER_PORTS
    from netslo.providers.kube.services import exposure_services
    return exposure_services(cluster, pods["server"], RESPONDER_PORTS["http"])


make_with_pods("netslo_services", _exposure_services)


@pytest.fixture(scope="session")
def netslo_services(request, netslo_cluster, netslo_responder, netslo_gate_pods):
    """Service exposure paths (ClusterIP, NodePort Local/Cluster, ingress) to the HTTP responder."""
    server, ports = netslo_responder
    try:
        if netslo_cluster.provider == "netns":
            from netslo.providers.netns.services import NetnsServices
            svc = NetnsServices(netslo_cluster, server, ports["http"])
        else:  # real Kubernetes Services with the same exposure names, made with the gate's pods
            from netslo.providers.kube.services import KubeServices
            made = made_with_pods(request.config, "netslo_services")
            svc = KubeServices(netslo_cluster, server, ports["http"], ingress=netslo_gate_pods.get(INGRESS_POD),
                               services=made)
    except Unsupported as e:
        skip_unsupported(e)
    try:
        yield svc
    finally:
        svc.close()
