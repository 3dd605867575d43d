"""Checks the fault tests of the disruption study share (embedded and kind)."""

from __future__ import annotations

import math
import time

from netslo.providers.disruption import Action
from netslo.studies import disruption

STEP = disruption.UDP_INTERVAL_S


def within_marks(trial) -> tuple[float, float]:
    """(least, most) s the action's drop held by its clock marks, widened by one UDP send interval."""
    m = trial.marks
    return (m["off_start"] - m["on_end"]) * 1e-9 - STEP, (m["off_end"] - m["on_start"]) * 1e-9 + STEP


def assert_partition_measured(study, min_loss: float) -> None:
    """Every trial's outage lies within its drop's marks, it lost at least ``min_loss`` of the window's
    UDP requests, it recovered within the window, and no held connection reset."""
    for t in study.trials:
        least, most = within_marks(t)
        v = t.values
        assert least <= v["outage"] <= most, (study.summary(), least, most)
        assert v["loss"] > min_loss and not math.isinf(v["recovery"]) and v["resets"] == 0, study.summary()


def pause_action(name: str, stop, resume, seconds: float, description: str, slack: float) -> Action:
    """An action that calls ``stop()`` (its result: mark ``stopped``), holds ``seconds`` and then calls
    ``resume()`` (also when the hold is interrupted), with clock marks around both calls; its window
    is ``seconds + slack``."""
    def pause():
        marks = {"on_start": time.monotonic_ns()}
        marks["stopped"] = stop()
        marks["on_end"] = time.monotonic_ns()
        try:
            time.sleep(seconds)
        finally:
            marks["off_start"] = time.monotonic_ns()
            resume()
            marks["off_end"] = time.monotonic_ns()
        return marks
    return Action(name, pause, description, seconds + slack)


def check_partition(cluster, server, cross, same, ports, min_loss: float) -> None:
    """A 1 s partition of the server's node, 2 trials from ``cross``: measured within its marks
    (``assert_partition_measured``); 1 trial from ``same`` (the same node): nothing lost."""
    with cluster.disruptions() as acts:
        study = disruption.run(cluster, cross, server, ports, acts.action("partition-1s", cross, server), trials=2)
        assert_partition_measured(study, min_loss)
        local = disruption.run(cluster, same, server, ports, acts.action("partition-1s", same, server), trials=1)
    assert local.trials[0].values["outage"] == 0.0, local.summary()
