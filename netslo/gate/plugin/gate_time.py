"""Where the session's wall time went: ``phases.json`` in the results directory and a short table in
the terminal summary.

Two views of the same run: per kind of engine work (``netslo.core.phase_times``: provider up, pods,
probing, impairments, bulk flows, analysis, reports, teardown; the rest is test code and pytest),
and per test module split into pytest's setup / call / teardown (seconds, as pytest measures them);
beside them the measurement schedule (requests x send period, flow lengths, settle times), the least
the run's measurements take one after another. Only sessions that ran ``cni`` tests write it.
``benchmarks/bench_gate_phases.py`` prints the file of a gate run.
"""

from __future__ import annotations

import json
import time

import pytest

from netslo.core import phase_times
from netslo.gate.plugin.hooks import OPTIONS, active

TIMING = pytest.StashKey[dict]()
FILE_NAME = "phases.json"


def pytest_sessionstart(session):
    if active(session.config):
        phase_times.reset()
        session.config.stash[TIMING] = {"t0": time.monotonic(), "modules": {}, "scheduled_seen": 0.0}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    state = item.config.stash.get(TIMING, None)
    if state is not None and item.get_closest_marker("cni") is not None:   # the gate's tests only
        record(state, report.nodeid, report.when, report.duration, phase_times.scheduled_total())


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    state = session.config.stash.get(TIMING, None)
    if state is None or not state["modules"]:
        yield
        return
    with phase_times.timed("reports"):
        yield
    out = summary(state, time.monotonic() - state["t0"], phase_times.totals())
    state["summary"] = out
    results_dir = session.config.stash[OPTIONS].results_dir
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / FILE_NAME).write_text(json.dumps(out, indent=1) + "\n")


def record(state: dict, nodeid: str, when: str, seconds: float, scheduled_total: float = 0.0) -> None:
    """Add one pytest phase of one test to its module's totals, with the measurement schedule
    recorded since the previous phase (``scheduled_total``: the session's running sum, s)."""
    module = nodeid.split("::", 1)[0]
    row = state["modules"].setdefault(module, {"tests": 0, "setup": 0.0, "call": 0.0, "teardown": 0.0,
                                               "scheduled": 0.0})
    row[when] += seconds
    row["scheduled"] += scheduled_total - state.get("scheduled_seen", 0.0)
    state["scheduled_seen"] = scheduled_total
    if when == "setup":
        row["tests"] += 1


def summary(state: dict, wall_s: float, kinds: dict) -> dict:
    """The content of ``phases.json`` (seconds; ``other`` = wall time no kind accounts for;
    ``scheduled`` = what the measurements take by their own definition, ``netslo.core.phase_times``)."""
    accounted = sum(k["seconds"] for k in kinds.values())
    return {"wall_s": round(wall_s, 3),
            "kinds": {k: {"seconds": round(v["seconds"], 3), "calls": v["calls"],
                          "scheduled": round(v.get("scheduled", 0.0), 3)} for k, v in kinds.items()},
            "other_s": round(max(0.0, wall_s - accounted), 3),
            "scheduled_s": round(sum(v.get("scheduled", 0.0) for v in kinds.values()), 3),
            "modules": {m: {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}
                        for m, row in state["modules"].items()}}


def table(out: dict) -> list[str]:
    """Terminal lines: each kind and module with seconds and share of the wall time."""
    wall = out["wall_s"] or 1.0
    lines = [f"wall {wall:.1f} s"]
    for kind, v in sorted(out["kinds"].items(), key=lambda kv: -kv[1]["seconds"]):
        sched = f", {v['scheduled']:.1f} s scheduled" if v.get("scheduled") else ""
        lines.append(f"  {kind:32} {v['seconds']:7.1f} s {v['seconds'] / wall:5.0%}  ({v['calls']} calls{sched})")
    lines.append(f"  {'test code and pytest':32} {out['other_s']:7.1f} s {out['other_s'] / wall:5.0%}")
    for module, row in out["modules"].items():
        total = row["setup"] + row["call"] + row["teardown"]
        sched = f"; {row['scheduled']:.1f} s scheduled" if row.get("scheduled") else ""
        lines.append(f"  {module}: {total:.1f} s for {row['tests']} tests (setup {row['setup']:.1f}, "
                     f"call {row['call']:.1f}, teardown {row['teardown']:.1f}{sched})")
    if "scheduled_s" in out:
        s = out["scheduled_s"]
        lines.append(f"  measurement schedule {s:.1f} s ({s / wall:.0%}; requests x send period, flow lengths, "
                     f"settle times): the least these measurements take one after another")
    return lines


@pytest.hookimpl(tryfirst=True)   # hooks run last-registered first: this one shows above the verdict
def pytest_terminal_summary(terminalreporter, config):
    state = config.stash.get(TIMING, None)
    if state is None or "summary" not in state:
        return
    terminalreporter.section("netslo gate time")
    for line in table(state["summary"]):
        terminalreporter.write_line(line)
