"""Without CAP_NET_ADMIN/CAP_SYS_ADMIN the gate errors up front with the cause, not a netlink traceback."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_gate_without_privileges_errors_with_the_missing_capability(tmp_path):
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-net_admin,-sys_admin", "--"]
    run = subprocess.run([*drop, sys.executable, "-m", "pytest", "-m", "cni", "-q", "-p", "no:cacheprovider",
                          "-k", "same-node-udp-64b", f"--netslo-results={tmp_path}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-1500:]
    assert "1 error" in out and "CAP_NET_ADMIN" in out and "run as root" in out
    assert "NetlinkError" not in out and "Traceback" not in out
