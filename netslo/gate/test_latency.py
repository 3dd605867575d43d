"""THE GATE: request/response latency, jitter and loss SLOs between pods.

Parametrized over placement (same-node, cross-node) x protocol (udp, tcp-rr, tcp-crr, http keep-alive,
http new connection) x message-size profile; thresholds come from the SLO file (--netslo-slo).
Copy this file and change the matrix to gate on your own scenarios.
"""

import pytest

from netslo.scenario import matrix

pytestmark = pytest.mark.cni

SCENARIOS = (
    matrix(protocols=("udp", "tcp-rr", "tcp-crr", "http", "http-new"), profiles=("1k",))
    + matrix(protocols=("udp",), profiles=("64b",))
    + matrix(protocols=("tcp-rr",), profiles=("10k", "100k"))
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_latency_slo(netslo_outcome):
    netslo_outcome.assert_met()
