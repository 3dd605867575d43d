"""THE GATE: request/response latency, jitter and loss SLOs between pods.

Parametrized over placement (same-node, cross-node) x protocol (udp, tcp-rr, tcp-crr, http keep-alive,
http new connection) x message-size profile; thresholds come from the SLO file (--netslo-slo).
IPv6: a representative subset (cross-node udp-1k, tcp-rr-1k, http-new-1k) runs on the pods' IPv6
addresses (ids end in ``-ipv6``) when the run carries IPv6 (``--netslo-ip-family dual|ipv6``; dual
is the embedded provider's default); the whole matrix on IPv6 is one change away:
``matrix(..., families=("ipv4", "ipv6"))``. SLO objectives select a family with ``family:``.
Copy this file and change the matrix to gate on your own scenarios.
"""

import pytest

from netslo.slo.scenario import matrix

pytestmark = pytest.mark.cni

SCENARIOS = (
    matrix(protocols=("udp", "tcp-rr", "tcp-crr", "http", "http-new"), profiles=("1k",))
    + matrix(protocols=("udp",), profiles=("64b",))
    + matrix(protocols=("tcp-rr",), profiles=("10k", "100k"))
    + matrix(placements=("cross-node",), protocols=("udp", "tcp-rr", "http-new"), families=("ipv6",))
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_latency_slo(netslo_outcome):
    netslo_outcome.assert_met()
