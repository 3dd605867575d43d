"""What the regression-injecting plugins (``inject_loss``, ``inject_tbf``) share: the moment a gate
test is about to measure, and the client pod it will measure from."""

from __future__ import annotations


def measuring_client(fixturedef, request, placement: str | None = None):
    """(cluster, client pod) when ``fixturedef`` is the ``outcome`` fixture of a test whose scenario
    has ``placement`` (any when None), else None. The pod is the one ``outcome`` will use."""
    if fixturedef.argname != "netslo_outcome":
        return None
    scenario = request.getfixturevalue("scenario")
    if placement is not None and scenario.placement != placement:
        return None
    return request.getfixturevalue("netslo_cluster"), request.getfixturevalue("netslo_client_for")(scenario.placement)
