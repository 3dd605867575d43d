"""Waiting until a target answers: one-request probes repeated until each has an answer or a deadline
passes (a Service kube-proxy has not yet programmed, a pod whose path is not up yet)."""

from __future__ import annotations

import time
from collections.abc import Callable

from netslo.core.errors import InfrastructureError

from . import ProbeSpec

POLL_S = 0.2   # s between rounds of tries


def await_answers(probe: Callable[[ProbeSpec], object], specs: dict[str, ProbeSpec], timeout: float,
                  poll: float = POLL_S) -> tuple[float, dict[str, str]]:
    """Run each of ``specs`` (name -> a probe of one request) through ``probe`` until it is answered,
    every ``poll`` s, for at most ``timeout`` s. Returns (s the answered tries took, start to end;
    name -> the last error of each spec still unanswered at the deadline: empty when all answered)."""
    waiting, why, took = dict(specs), {}, 0.0
    deadline = time.monotonic() + timeout
    while waiting:
        for name, spec in list(waiting.items()):
            t = time.monotonic()
            try:
                got = probe(spec)
            except InfrastructureError as e:
                why[name] = str(e).splitlines()[-1][-160:]
                continue
            if len(got) and (got.rows["recv_ns"] >= 0).all():
                del waiting[name]
                took += time.monotonic() - t
            else:
                why[name] = "no answer"
        if waiting and time.monotonic() > deadline:
            return took, {n: why[n] for n in waiting}
        if waiting:
            time.sleep(poll)
    return took, {}
