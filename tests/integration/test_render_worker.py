"""The Allure plots rendered by the idle-priority worker (netslo.report.render_worker), in a real
allure-pytest session: every attachment ends with its PNG, also when the worker is killed, and the
spool directory is gone afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

INNER = textwrap.dedent("""
    import os
    import numpy as np
    from netslo.report import plots
    from netslo.report.render_worker import DeferredPlots

    def test_plots(request):
        later = DeferredPlots(request.config.option.allure_report_dir)
        if os.environ.get("KILL_WORKER"):
            later.worker.kill()
        rtt = np.linspace(1e-4, 2e-3, 500)
        later.attach("ECDF", plots.Plot("ecdf", (rtt,), {"title": "e"}))
        later.attach("series", plots.Plot("timeseries", (np.arange(500) * 1e-3, rtt, ()), {"title": "t"}))
        later.close()
        print(f"SENT {later.sent} HERE {later.rendered_here} RC {later.worker.returncode}")
""")


def _run(tmp_path: Path, kill: bool) -> tuple[str, dict, Path]:
    (tmp_path / "test_inner.py").write_text(INNER)
    results = tmp_path / "allure-results"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           **({"KILL_WORKER": "1"} if kill else {})}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:netslo",
                          "--alluredir", str(results), "test_inner.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    (result,) = [json.loads(f.read_text()) for f in results.glob("*-result.json")]
    return out, result, results


@pytest.mark.parametrize("kill", [False, True], ids=["worker", "worker-killed"])
def test_every_plot_attachment_ends_with_its_png(tmp_path, kill):
    out, result, results = _run(tmp_path, kill)
    att = {a["name"]: results / a["source"] for a in result["attachments"] if a["name"] in ("ECDF", "series")}
    assert sorted(att) == ["ECDF", "series"], result["attachments"]
    for path in att.values():
        png = path.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000, (path, len(png))
    # by the worker (exit 0) unless it was killed: then close() rendered both in the test's process
    assert ("SENT 2 HERE 2" if kill else "SENT 2 HERE 0 RC 0") in out, out
    assert not (results / ".netslo-plots").exists()
