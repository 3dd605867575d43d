"""Where the gate's wall time goes (numbers printed, nothing asserted about time).

    NETSLO_GATE_PHASES=netslo-results/phases.json python -m pytest benchmarks/bench_gate_phases.py -s

Every gate session writes ``phases.json`` into its results directory (``netslo.gate.plugin.gate_time``):
the wall time, seconds per kind of engine work (provider up, user-mode-linux boot, pods,
responders, impairment apply/verify/clear, probing, bulk flows and pod commands, analysis, reports,
teardown; the rest is test code and pytest) and per test module pytest's setup / call / teardown,
each with its measurement schedule (requests x send period, flow lengths, settle times: the least
the measurements take one after another).
With ``NETSLO_GATE_PHASES`` naming the file of a full ``pytest -m cni`` run (as ``.ci/run`` does
right after its gate) the benchmark prints that run; without it, it runs the full gate itself
(about 9 minutes on a 2-core machine) into a temporary results directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from netslo.gate.plugin import gate_time

ROOT = Path(__file__).resolve().parent.parent


def gate_phases(tmp: Path) -> dict:
    given = os.environ.get("NETSLO_GATE_PHASES")
    if given:
        return json.loads(Path(given).read_text())
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "cni", "-q", "-p", "no:cacheprovider",
                          f"--netslo-results={tmp}"], cwd=ROOT, capture_output=True, text=True)
    if not (tmp / gate_time.FILE_NAME).exists():
        raise RuntimeError(f"the gate wrote no {gate_time.FILE_NAME} (exit {run.returncode}): {run.stdout[-2000:]}")
    return json.loads((tmp / gate_time.FILE_NAME).read_text())


def test_gate_wall_time_per_phase(benchmark, tmp_path):
    out = benchmark.pedantic(gate_phases, args=(tmp_path,), rounds=1, iterations=1)
    source = os.environ.get("NETSLO_GATE_PHASES") or "a gate run made by this benchmark"
    print(f"\nthe gate's wall time per phase ({source}):")
    for line in gate_time.table(out):
        print(line)
    benchmark.extra_info.update(wall_s=out["wall_s"], other_s=out["other_s"], scheduled_s=out.get("scheduled_s"),
                                **{k: v["seconds"] for k, v in out["kinds"].items()})
