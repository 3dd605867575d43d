"""user-mode-linux cluster: boots with real sch_netem, reports its kernel, and leaves nothing behind
after close, Ctrl-C or kill -9 of its owner."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netslo.impair import capability
from netslo.kernels import uml

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not capability.uml_available()[0], reason=capability.uml_available()[1])


def _uml_processes(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith(str(capability.UML_BINARY)) and marker in cmd:
            found.append(int(pid))
    return found


def test_boot_environment_and_close():
    c = uml.UmlCluster(nodes=1)
    marker = f"uml-{c.run_id}"
    try:
        assert _uml_processes(marker), "no UML process while the cluster is up"
        env = c.environment()
        assert env["kernel"].startswith("uml 6.") and "lacks sch_netem" in env["kernel_note"]
        assert c.ready["capabilities"]["netem"] and c.ready["capabilities"]["ifb"]
        assert c.ready["modules"]["sch_netem"] == "ok"
        assert c.boot_seconds < 60
        pod = c.add_pod("a", "node0")
        assert c.exec_in(pod, ["ip", "-o", "addr", "show", "eth0"]).decode().count(pod.ip) == 1
    finally:
        c.close()
    deadline = time.monotonic() + 5
    while _uml_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _uml_processes(marker)
    assert not c.dir.exists()


OWNER = """
import sys, time
sys.path.insert(0, {root!r})
from netslo.kernels.uml import UmlCluster
c = UmlCluster(nodes=1)
print(c.run_id, flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_owner_death_leaves_nothing(sig):
    owner = subprocess.Popen([sys.executable, "-c", OWNER.format(root=str(ROOT))], stdout=subprocess.PIPE,
                             text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
                             if sig != signal.SIGINT else signal.signal(signal.SIGINT, signal.default_int_handler))
    try:
        run_id = owner.stdout.readline().strip()
        assert run_id, "owner did not start a UML cluster"
        marker = f"uml-{run_id}"
        assert _uml_processes(marker)
        os.kill(owner.pid, sig)
        owner.wait(timeout=30)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    said = uml.reap()  # what `python -m netslo.agent reap` (via the netns reaper hook) does
    deadline = time.monotonic() + 5
    while _uml_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _uml_processes(marker), said
    assert not (uml.STATE_ROOT / marker).exists(), said


def _boot_plain(tmp_path, preload: Path | None) -> str:
    """Boot the UML binary with an init that only prints; its console (init's line or the panic)."""
    init = tmp_path / "init.sh"
    init.write_text("#!/bin/sh\necho netslo-init-ran\necho o > /proc/sysrq-trigger\n")
    init.chmod(0o755)
    argv, env = uml.kernel_command(init, f"nsl-xs{os.getpid()}{'p' if preload else 'n'}", tmp_path, "128M",
                                   preload, quiet=False)
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return done.stdout.decode(errors="replace")


def test_xstate_shim_lets_the_kernel_start_init_where_the_host_xsave_area_is_larger(tmp_path):
    """Hosts with AMX have an XSAVE area (11 008 B) larger than Debian's 6.1/6.12 UML kernels' buffer:
    without the shim the guest's init dies on 'ptrace set fp regs failed, errno = 14'; with it, init runs."""
    from netslo.kernels import xstate_pad
    shim, why = xstate_pad.library()
    assert shim is not None, why
    plain = _boot_plain(tmp_path, None)
    if "netslo-init-ran" in plain:
        pytest.skip("this host's XSAVE area fits this UML kernel: the shim has nothing to mend here")
    assert "ptrace set fp regs failed, errno = 14" in plain, plain[-2000:]
    assert "netslo-init-ran" in _boot_plain(tmp_path, shim)
