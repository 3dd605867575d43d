"""A pytest plugin that injects a real regression for regression-gate experiments: a tbf rate limit
on the host-side veth of the client pod of one placement (traffic towards that pod is shaped).

    NETSLO_INJECT_TBF=cross-node:4mbit python -m pytest -m cni -p tests.integration.inject_tbf ...

The qdisc is installed (``tc qdisc replace``, idempotent) right before each matching test measures,
in the node's network namespace; it goes away with the cluster. Embedded (netns) provider only.
tbf passes a packet at once while tokens last, so at a rate below the offered load a standing queue
forms (up to ``latency``): RTT grows by up to that much and the excess is dropped.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.integration.inject_common import measuring_client

LATENCY = "20ms"     # tbf queue bound (delay added at most)
BURST = "1600"       # bytes: one full-size frame


def _spec() -> tuple[str, str] | None:
    text = os.environ.get("NETSLO_INJECT_TBF", "")
    if not text:
        return None
    placement, _, rate = text.partition(":")
    if placement not in ("same-node", "cross-node") or not rate:
        raise pytest.UsageError(f"NETSLO_INJECT_TBF: value {text!r} — expected PLACEMENT:RATE, e.g. cross-node:4mbit")
    return placement, rate


def pytest_configure(config):
    config._netslo_tbf = _spec()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    spec = getattr(request.config, "_netslo_tbf", None)
    found = measuring_client(fixturedef, request, spec[0]) if spec else None
    if found:
        cluster, pod = found
        dev = getattr(pod, "host_interface", None)
        if dev is None or not hasattr(cluster, "node_netns"):
            raise pytest.UsageError("NETSLO_INJECT_TBF needs the embedded (netns) provider")
        subprocess.run(["ip", "netns", "exec", cluster.node_netns(pod.node), "tc", "qdisc", "replace",
                        "dev", dev, "root", "tbf", "rate", spec[1], "burst", BURST, "latency", LATENCY],
                       check=True, capture_output=True)
    yield
