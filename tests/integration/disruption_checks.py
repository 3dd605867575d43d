"""Checks the fault tests of the disruption study share (embedded and kind)."""

from __future__ import annotations

import math

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
