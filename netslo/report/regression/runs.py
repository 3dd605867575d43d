"""Runs to compare: the raw samples of every test of one or more sessions, read from results.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from netslo.stats.samples import SampleSet


@dataclass
class Run:
    """Raw samples of one or more sessions: test id -> list of SampleSets (one per session)."""

    samples: dict = field(default_factory=dict)
    environment: list = field(default_factory=list)   # one dict per session
    sources: list = field(default_factory=list)       # results.json paths
    session_of: dict = field(default_factory=dict)    # test -> session index of each SampleSet

    @property
    def sessions(self) -> int:
        return max(1, len(self.sources))

    def add(self, test: str, s: SampleSet, session: int | None = None) -> None:
        """Add one session's samples of ``test`` (default session: the latest source)."""
        self.samples.setdefault(test, []).append(s)
        self.session_of.setdefault(test, []).append(max(0, len(self.sources) - 1) if session is None else session)


def results_files(path, option: str = "--netslo-baseline") -> list[Path]:
    """``path`` is a results.json, a results directory, or a directory of past runs (searched
    recursively). Raises FileNotFoundError naming ``option`` and the path when there is none."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        found = sorted(p.rglob("results.json"))
        if found:
            return found
    raise FileNotFoundError(f"{option}: value {str(path)!r} — expected a results.json file or a "
                            f"directory containing results.json files (netslo-results/ of past runs)")


def load(path) -> Run:
    """Read every results.json under ``path`` and the raw samples each record points to."""
    run = Run()
    for f in results_files(path):
        doc = json.loads(f.read_text())
        run.environment.append(doc.get("environment", {}))
        run.sources.append(str(f))
        for rec in doc.get("results", []):
            if rec.get("samples_file"):
                run.add(rec["test"], SampleSet.load(f.parent / rec["samples_file"]), len(run.sources) - 1)
    return run

