"""A pytest plugin that injects a real loss regression for regression-gate experiments: every client
pod drops a random fraction of the packets it sends (iptables ``statistic --mode random`` in the
pod's network namespace, OUTPUT chain).

    NETSLO_INJECT_LOSS=0.5% python -m pytest -m cni -p tests.integration.inject_loss ...

The rule is added right before each test measures (once per client pod) and goes away with the
pod's namespace. Embedded (netns) provider only. UDP requests are lost; TCP retransmits, so there
the loss shows as delay.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.integration.inject_common import measuring_client


def _probability() -> float | None:
    text = os.environ.get("NETSLO_INJECT_LOSS", "").strip()
    if not text:
        return None
    try:
        value = float(text.rstrip("%")) / 100.0
    except ValueError:
        value = -1.0
    if not text.endswith("%") or not 0.0 < value < 1.0:
        raise pytest.UsageError(f"NETSLO_INJECT_LOSS: value {text!r} — expected a percentage above 0% and "
                                f"below 100%, e.g. 0.5%")
    return value


def pytest_configure(config):
    config._netslo_loss = _probability()
    config._netslo_loss_pods = set()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    p = getattr(request.config, "_netslo_loss", None)
    found = measuring_client(fixturedef, request) if p else None
    if found:
        cluster, pod = found
        if not hasattr(cluster, "netns_of"):
            raise pytest.UsageError("NETSLO_INJECT_LOSS needs the embedded (netns) provider")
        ns = cluster.netns_of(pod)
        if ns not in request.config._netslo_loss_pods:
            subprocess.run(["ip", "netns", "exec", ns, "iptables", "-w", "-A", "OUTPUT", "-m", "statistic",
                            "--mode", "random", "--probability", f"{p:.6f}", "-j", "DROP"],
                           check=True, capture_output=True)
            request.config._netslo_loss_pods.add(ns)
    yield
