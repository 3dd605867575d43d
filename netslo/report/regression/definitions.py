"""Baselines recorded at other clock points: which series a comparison may use, never silently.

A sample set's ``rtt`` (and ``owd_*``, ``ipdv*``, ``pdv``) is measured at the clock points of its
``timestamps`` (kernel, kernel-rx or user; docs/metrics.md), while ``rtt_app`` and ``ipdv_app`` are
user space to user space in every set (a set recorded before kernel timestamps has them equal to
``rtt`` and ``ipdv``). When a test's baseline and current sets differ in ``timestamps``, ``rtt`` and
``ipdv`` are compared as ``rtt_app`` and ``ipdv_app`` (converted: the one definition both keep) and
the series only one clock point defines (one-way delays, server time, pdv) are refused; the report
lists both per test.
"""

from __future__ import annotations

from dataclasses import dataclass

from netslo.stats.samples import timestamps

CONVERTED = {"rtt": "rtt_app", "ipdv": "ipdv_app"}
UNCHANGED = ("rtt_app", "ipdv_app", "timer_error", "loss")   # the same definition in every set


@dataclass(frozen=True)
class Definitions:
    """The ``timestamps`` of a test's baseline and current sets (sorted, distinct)."""

    baseline: tuple
    current: tuple

    @classmethod
    def of(cls, baseline_sets, current_sets) -> "Definitions":
        return cls(tuple(sorted({timestamps(s.meta) for s in baseline_sets})),
                   tuple(sorted({timestamps(s.meta) for s in current_sets})))

    @property
    def differ(self) -> bool:
        """The sets do not all share one definition of rtt."""
        return len(set(self.baseline) | set(self.current)) > 1

    def series_name(self, name: str) -> str | None:
        """The series to compare for series ``name``: itself, its user-space twin, or None (refused)."""
        if not self.differ or name in UNCHANGED:
            return name
        return CONVERTED.get(name)

    def note(self, converted: list, refused: list) -> dict:
        """What regression.json and regression.md say of this test."""
        return {"baseline": list(self.baseline), "current": list(self.current),
                "converted": converted, "refused": refused}
