"""results.json: one record per judged scenario (statistics with CIs, counts, verdict, environment),
plus the raw samples of each scenario as ``samples/<test id>.npz`` beside it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from netslo.core.phase_times import timed_call
from netslo.stats.samples import timestamps, timestamps_missing

SCHEMA_VERSION = 1


def _num(x: float):
    return x if math.isfinite(x) else (None if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def outcome_record(test_id: str, outcome, samples_file: str | None) -> dict:
    """A JSON-ready dict of one Outcome."""
    return {
        "test": test_id,
        "scenario": outcome.scenario.id,
        "labels": outcome.scenario.labels(),
        "verdict": outcome.verdict,
        "checks": [{"metric": c.threshold.metric, "threshold": c.threshold.text, "limit": c.threshold.limit,
                    "objective": c.threshold.objective, "verdict": c.verdict, "by_point": c.by_point,
                    "value": _num(c.estimate.value), "lo": _num(c.estimate.lo), "hi": _num(c.estimate.hi),
                    "n": c.estimate.n} for c in outcome.checks],
        "metrics": {k: {kk: (_num(vv) if isinstance(vv, float) else vv) for kk, vv in e.as_dict().items()}
                    for k, e in outcome.analysis.metrics.items()},
        "counts": outcome.analysis.counts,
        "batches": outcome.batches,
        "seconds": round(outcome.seconds, 3),
        "samples_file": samples_file,
        "notes": list(getattr(outcome, "notes", [])),
        "slo": getattr(outcome, "slo_source", "") or None,   # the SLO file that judged it
        "timestamps": timestamps(outcome.samples.meta),   # clock points of rtt/owd (docs/metrics.md)
        "timestamps_missing": timestamps_missing(outcome.samples.meta),
        "environment": outcome.environment,   # per record: e.g. kernel differs between host and UML tests
    }


def safe_name(test_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id).strip("_")[:150]


class ResultsWriter:
    """Collects outcomes during a session and writes results.json + raw samples into ``directory``."""

    def __init__(self, directory):
        self.dir = Path(directory)
        self.records: list[dict] = []
        self.environment: dict = {}
        self.tally = None          # netslo.report.tally.Tally of the session, when the gate ran
        self.slo_source = None     # the session's own SLO file (records judged by others name theirs)
        self.written: Path | None = None
        self.sections: dict = {}   # further top-level keys of results.json (e.g. 'mesh': every node pair)
        self.summary_parts: list = []   # Markdown appended to summary.md (e.g. the mesh's matrix)

    @timed_call("reports")
    def add(self, test_id: str, outcome) -> None:
        (self.dir / "samples").mkdir(parents=True, exist_ok=True)
        name = f"samples/{safe_name(test_id)}.npz"
        outcome.samples.save(self.dir / name)
        self.records.append(outcome_record(test_id, outcome, name))
        self.environment = outcome.environment

    def write(self) -> Path | None:
        """results.json with every record and the session's tally (counts of passed / failed /
        errored / skipped tests); nothing when the session measured and tallied nothing."""
        if not self.records and not self.sections and not (self.tally and self.tally.entries):
            return None
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / "results.json"
        doc = {"schema": SCHEMA_VERSION, "environment": self.environment, "slo": self.slo_source, "results": self.records,
               **self.sections}
        if self.tally is not None and self.tally.entries:
            doc["gate"] = self.tally.to_json()
        path.write_text(json.dumps(doc, indent=1))
        self.written = path
        return path
