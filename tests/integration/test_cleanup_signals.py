"""Ctrl-C, SIGTERM and SIGKILL of a real gate run: nothing of the run survives (the next run's start)."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pyroute2 import netns

ROOT = Path(__file__).resolve().parents[2]


def _ours(run_id):
    return [n for n in netns.listnetns() if n.startswith(f"nsl-{run_id}-")]


def _agents(run_id):
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"/run/netslo/{run_id}/" in Path(f"/proc/{pid}/cmdline").read_text():
                out.append(pid)
        except OSError:
            pass
    return out


def _start_gate(run_id, tmp_path):
    env = dict(os.environ, NETSLO_RUN_ID=run_id)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-m", "cni", "-q", "-p", "no:cacheprovider", "-k", "udp",
         f"--netslo-results={tmp_path}", str(ROOT / "netslo" / "gate" / "test_latency.py")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_responders(run_id, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(_agents(run_id)) >= 3:
            return
        time.sleep(0.1)
    pytest.fail("the gate never started its responders")


@pytest.mark.parametrize("sig,run_id", [(signal.SIGINT, "a11ce1"), (signal.SIGTERM, "a11ce2")])
def test_interrupt_mid_run_tears_everything_down(sig, run_id, tmp_path):
    gate = _start_gate(run_id, tmp_path)
    _wait_for_responders(run_id)
    time.sleep(1.0)                       # mid-measurement
    gate.send_signal(sig)
    out, _ = gate.communicate(timeout=60)
    assert gate.returncode != 0
    assert b"KeyboardInterrupt" in out or b"Interrupted" in out, out[-500:]
    assert _ours(run_id) == []
    assert _agents(run_id) == []
    assert not Path(f"/run/netslo/{run_id}").exists()


def test_sigkill_mid_run_is_reaped_by_the_next_run(tmp_path):
    run_id = "a11ce3"
    gate = _start_gate(run_id, tmp_path)
    _wait_for_responders(run_id)
    gate.kill()
    gate.wait()
    assert _ours(run_id), "a killed run leaves its namespaces (that is what reaping is for)"
    # the next run: a fresh gate run reaps at start-up, before it builds its own cluster
    nxt = subprocess.run([sys.executable, "-m", "pytest", "-m", "cni", "-q", "-p", "no:cacheprovider",
                          "-k", "same-node-udp-64b", f"--netslo-results={tmp_path}/2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert nxt.returncode == 0, nxt.stdout[-2000:]
    assert _ours(run_id) == [] and _agents(run_id) == []


def test_sigkill_leaves_temp_files_that_reap_removes(tmp_path):
    """The exposure paths' scratch directory (ingress proxy log, readiness file) of a killed run."""
    run_id = "a11ce4"
    env = dict(os.environ, NETSLO_RUN_ID=run_id)
    gate = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-m", "cni", "-q", "-p", "no:cacheprovider", "-k", "exposure",
         f"--netslo-results={tmp_path}", str(ROOT / "netslo" / "gate" / "test_protocols.py")],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scratch_dirs = []
    deadline = time.monotonic() + 120
    while not scratch_dirs and time.monotonic() < deadline and gate.poll() is None:
        time.sleep(0.1)
        scratch_dirs = list(Path(tempfile.gettempdir()).glob(f"netslo-exposure-{gate.pid}-*"))
    gate.kill()
    gate.wait()
    assert scratch_dirs, "the exposure fixture never made its scratch directory"
    assert all(d.is_dir() for d in scratch_dirs), "a killed run leaves its temp files (that is what reaping is for)"
    out = subprocess.run([sys.executable, "-m", "netslo", "reap"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert not any(d.exists() for d in scratch_dirs)
    assert f"scratch directory {scratch_dirs[0]}" in out.stdout
    assert _ours(run_id) == [] and _agents(run_id) == []
