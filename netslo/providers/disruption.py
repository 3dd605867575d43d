"""Actions a disruption study runs while traffic flows (``netslo.studies.disruption``), behind one small
interface every provider can implement.

    acts = cluster.disruptions()               # Unsupported where the provider has none
    a = acts.action("drop-200ms", client, server)
    marks = a.run()                            # performs it; returns when it is over (or handed off)

An action's ``run()`` returns its clock marks (CLOCK_MONOTONIC ns, ``time.monotonic_ns``) by name, e.g.
a DROP's ``on_start``/``on_end`` (the rule being inserted: before/after the call) and
``off_start``/``off_end`` (being deleted): the true outage lies between ``off_start - on_end`` and
``off_end - on_start``, the reference the controls are checked against. ``emulated`` says the action
stands in for the real thing (the embedded provider's agent restart), and reports say so.
"""

from __future__ import annotations

import abc
import contextlib
import re
from dataclasses import dataclass
from typing import Callable

from netslo.core.errors import SpecError
from netslo.providers.base import Pod


@dataclass(frozen=True)
class Action:
    """One action: ``name`` (the test's profile label), ``run()`` -> its clock marks (ns by name),
    ``description`` (one line for the report), ``window`` (s from its start that the trial's metrics
    cover: its own length, the recovery and a clean second), ``emulated``.

    An action that needs its own target (a drain: a Service whose backend moves) gives ``target``,
    (host, protocol -> port) that the probes send to instead of the server pod, and ``restore()``,
    run after each trial's window (outside every window; at most ``restore_s`` s) to put things back
    for the next trial. ``one_responder`` False: the answers come from more than one responder over
    the study (a replaced backend), so no responder's end-of-run report covers the window and the
    outage per direction is not measured. ``detached_probes``: the action breaks this process's
    connections to the pods (the API server restarts: every exec stream ends), so the study's probes run
    as processes of their own in the client pod (``Cluster.probe_detached``) and are read afterwards."""

    name: str
    run: Callable[[], dict]
    description: str
    window: float
    emulated: bool = False
    target: tuple[str, dict] | None = None
    restore: Callable[[], dict] | None = None
    restore_s: float = 0.0
    one_responder: bool = True
    detached_probes: bool = False


def drop_spec(name: str) -> tuple[str, float, str]:
    """(kind, seconds, direction) of an action named '<drop|partition>-<duration>[-up|-down]', e.g.
    'drop-200ms' (the server pod's packets), 'partition-2s' (the server node's, on the underlay),
    'drop-2s-up'; SpecError naming the form otherwise."""
    m = re.fullmatch(r"(drop|partition)-([0-9]*\.?[0-9]+)(ms|s)(?:-(up|down))?", name)
    if not m:
        raise SpecError("action", name, "drop-<duration in ms or s>[-up|-down] or partition-<duration>, "
                        "e.g. drop-200ms, drop-2s-up, partition-1s")
    seconds = float(m.group(2)) * (1e-3 if m.group(3) == "ms" else 1.0)
    if not 0.001 <= seconds <= 60:
        raise SpecError("action", name, "a drop or partition of 1 ms to 60 s")
    return m.group(1), seconds, m.group(4) or "both"


class Disruptions(contextlib.AbstractContextManager, abc.ABC):
    """The provider's actions; ``close()`` undoes whatever an interrupted action left in place."""

    @abc.abstractmethod
    def action(self, name: str, client: Pod, server: Pod) -> Action:
        """The action ``name`` on the path client -> server (Unsupported where this provider has none
        of that name; SpecError for a name of no known form)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Remove every rule this object put in place. Idempotent."""

    def __exit__(self, *exc):   # (AbstractContextManager's __enter__ returns self)
        self.close()
