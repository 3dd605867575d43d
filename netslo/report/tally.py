"""The gate's tally: what became of every selected SLO test, and whether the run may be green.

Statuses (one per test, the worst phase wins):
  passed              measured and met (or its assertions held)
  failed              an SLO breach or a failed assertion
  errored             infrastructure, configuration or not-enough-samples error; or a failed teardown
  xfailed             failed for a known CNI limitation, for the reason the limitation table gives
  skipped-expected    skipped with a category the run declared (``netslo.slo.skips``)
  skipped-unexpected  any other skip: the gate fails

A run is green only when nothing failed, errored or was skipped unexpectedly, and at least one test
was judged. Tests the SLO file does not gate (``gate: selected-only``) are not among them: they are
listed apart (``not_gated``: deselected at collection, and ``not_gated`` skips), in every report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from netslo.slo import skips

PASSED, FAILED, ERRORED, XFAILED = "passed", "failed", "errored", "xfailed"
SKIPPED_EXPECTED, SKIPPED_UNEXPECTED = "skipped-expected", "skipped-unexpected"
STATUSES = (PASSED, FAILED, ERRORED, XFAILED, SKIPPED_EXPECTED, SKIPPED_UNEXPECTED)
NOT_GATED = "not_gated"   # the skip category of a test the SLO file does not gate
_RANK = {PASSED: 0, XFAILED: 1, SKIPPED_EXPECTED: 2, SKIPPED_UNEXPECTED: 3, FAILED: 4, ERRORED: 5}


@dataclass
class Entry:
    test: str
    status: str
    reason: str = ""
    category: str | None = None   # skip category, for skips


@dataclass
class Tally:
    """Per-test statuses of one session; ``allowed`` = declared skip categories."""

    allowed: frozenset = frozenset(skips.ALWAYS_DECLARED)
    entries: dict = field(default_factory=dict)
    not_gated: dict = field(default_factory=dict)   # test -> why, deselected at collection

    def record(self, test: str, status: str, reason: str = "") -> None:
        """Record one phase's status; a worse status replaces a better one (teardown error > pass)."""
        if status.startswith("skipped"):
            category = skips.category_of(reason)
            status = SKIPPED_EXPECTED if category in self.allowed else SKIPPED_UNEXPECTED
        else:
            category = None
        old = self.entries.get(test)
        if old is None or _RANK[status] > _RANK[old.status]:
            self.entries[test] = Entry(test, status, reason.strip(), category)

    def skip(self, test: str, reason: str) -> None:
        self.record(test, "skipped", reason)

    def counts(self) -> dict:
        out = {s: 0 for s in STATUSES}
        for e in self.entries.values():
            out[e.status] += 1
        return out

    def of(self, status: str) -> list[Entry]:
        return [e for e in self.entries.values() if e.status == status]

    def ungated(self) -> dict:
        """Every test the SLO file does not gate -> why: deselected, or skipped as ``not_gated``."""
        skipped = {e.test: e.reason for e in self.entries.values() if e.category == NOT_GATED}
        return {**self.not_gated, **skipped}

    @property
    def green(self) -> bool:
        c = self.counts()
        return (c[FAILED] == c[ERRORED] == c[SKIPPED_UNEXPECTED] == 0) and (c[PASSED] + c[XFAILED]) > 0

    def headline(self) -> str:
        """One line: '✅ 16 passed …' only when green, else what stands in the way."""
        c = self.counts()
        parts = ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s])
        if self.not_gated:
            parts += f"{', ' if parts else ''}{len(self.not_gated)} not gated"
        if self.green:
            return f"✅ gate green: {parts or 'nothing ran'}"
        if not self.entries:
            return "❌ gate not green: no SLO test ran"
        return f"❌ gate not green: {parts}"

    def to_json(self) -> dict:
        return {"counts": self.counts(), "green": self.green, "declared_skip_categories": sorted(self.allowed),
                "tests": {e.test: {"status": e.status, "reason": e.reason, "category": e.category}
                          for e in self.entries.values() if e.status != PASSED},
                "not_gated": self.ungated()}

    def markdown(self) -> str:
        """The counts and every non-passed test with its reason, for summary.md / regression.md."""
        lines = [f"**{self.headline()}**", ""]
        for status, title in ((SKIPPED_UNEXPECTED, "Skipped, not declared (fails the gate)"),
                              (ERRORED, "Errored (not judged)"), (FAILED, "Failed"),
                              (SKIPPED_EXPECTED, "Skipped, declared expected"), (XFAILED, "Known limitations")):
            rows = [e for e in self.of(status) if e.category != NOT_GATED]
            if rows:
                lines += [f"{title}:", ""] + [f"- `{e.test}`: {one_line(e.reason)}" for e in rows] + [""]
        ungated = self.ungated()
        if ungated:
            lines += ["Not gated (the SLO file gates only what it selects):", ""]
            lines += [f"- `{test}`: {one_line(why)}" for test, why in ungated.items()] + [""]
        return "\n".join(lines)


def one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"
