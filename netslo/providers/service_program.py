"""Service programming as the study measures it: one Service created and deleted on demand.

    svc = cluster.service_program(backend, port, "ClusterIP", client)   # Unsupported where none
    host, port = svc.target        # the address the Service will have, known before it exists
    svc.create()                   # the measured change: the Service is requested
    svc.delete()                   # undo it (the next trial starts from no Service)
    svc.close()                    # everything it made is gone

``target`` is fixed before the first create (a requested ``spec.clusterIP`` / ``nodePort`` on
Kubernetes), so a client can send to it from before the Service exists and the study sees the first
request the new backend answers (the backend is the Service's only endpoint: every answer is its).

Two changes are measured (``CHANGES``): ``service`` — ``create()`` makes the Service itself, ``delete()``
removes it; ``endpoint`` — the Service exists throughout without endpoints, ``create()`` makes the
backend its endpoint (on Kubernetes: labels the pod so the Service selects it, and the EndpointSlice
controller adds it), ``delete()`` takes it out again: the EndpointSlice change that clusterloader2's
"network programming latency" starts from, as the data plane sees it.

A programmer that rate-limits its syncs (kube-proxy: one per ``minSyncPeriod``) makes a change wait
for the syncs the change before it started; ``quiet_s`` is how long a study leaves after each reset
so that every measured change meets it idle: each trial measures one change alone, whatever the
window (and the threshold it comes from), and trials stay independent, as the percentile CIs assume.
"""

from __future__ import annotations

import abc
import contextlib

from netslo.core.errors import SpecError

SERVICE_TYPES = ("ClusterIP", "NodePort")   # the Service types netslo creates (kube_manifests too)
CHANGES = ("service", "endpoint")           # what create()/delete() change (see the module docstring)


def check_type(type: str) -> str:
    """``type`` when it is one of SERVICE_TYPES; SpecError naming it otherwise."""
    if type not in SERVICE_TYPES:
        raise SpecError("service type", type, f"one of {', '.join(SERVICE_TYPES)}")
    return type


def check_change(change: str) -> str:
    """``change`` when it is one of CHANGES; SpecError naming it otherwise."""
    if change not in CHANGES:
        raise SpecError("service change", change, f"one of {', '.join(CHANGES)}")
    return change


class ServiceProgram(contextlib.AbstractContextManager, abc.ABC):
    """One Service in front of one backend pod's TCP responder."""

    emulated: bool = False
    description: str = ""
    target: tuple = ("", 0)

    change: str = "service"
    # s from a reset until the next change meets an idle programmer (no sync pending, its rate limit
    # spent: kube-proxy's minSyncPeriod), and a phrase saying where it comes from; 0 where none limits
    quiet_s: float = 0.0
    quiet_why: str = ""
    # s a client's source tuple must stay away before it is used again: a request sent before the
    # Service is programmed may leave state that a later request on its tuple follows (0: none)
    tuple_return_s: float = 0.0

    @abc.abstractmethod
    def create(self) -> None:
        """Request the Service, or the backend as its endpoint (``change``); returns once the request was
        accepted, not once it works."""

    @abc.abstractmethod
    def delete(self) -> None:
        """Remove the Service, or the backend from its endpoints (new connections to its address then go
        nowhere)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Remove everything this object created. Idempotent."""

    def __exit__(self, *exc):   # (AbstractContextManager's __enter__ returns self)
        self.close()
