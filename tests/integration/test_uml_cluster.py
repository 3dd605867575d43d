"""user-mode-linux cluster: boots with real sch_netem, reports its kernel, and leaves nothing behind
after close, Ctrl-C or kill -9 of its owner."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from netslo.impair import capability
from netslo.providers.netns import uml
from netslo.traffic.probes import ProbeSpec

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
from netslo.providers.netns.uml import UmlCluster
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
    said = uml.reap()  # what `python -m netslo reap` (via the netns reaper hook) does
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
    from netslo.providers.netns import xstate_pad
    shim, why = xstate_pad.library()
    assert shim is not None, why
    plain = _boot_plain(tmp_path, None)
    if "netslo-init-ran" in plain:
        pytest.skip("this host's XSAVE area fits this UML kernel: the shim has nothing to mend here")
    assert "ptrace set fp regs failed, errno = 14" in plain, plain[-2000:]
    assert "netslo-init-ran" in _boot_plain(tmp_path, shim)


GUEST_TESTS = '''
import os
import pytest
from netslo.gate.plugin.qos import netslo_uml_qos  # noqa: F401

pytestmark = pytest.mark.cni


def _alive():
    return sorted(p for p in os.listdir("/proc") if p.isdigit() and "umid=nsl-" in _cmd(p))


def _cmd(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.needs_netem
def test_netem_first(netslo_uml_qos):
    c, server, ports, client = netslo_uml_qos
    print("RUN first", c.run_id, server.name, *sorted(ports), client.node)


def test_host_between():
    print("RUN host", len(_alive()))


@pytest.mark.needs_netem
def test_netem_second(netslo_uml_qos):
    print("RUN second", netslo_uml_qos[0].run_id, len(_alive()))
'''


def test_gate_tests_that_need_netem_share_one_guest_and_it_is_gone_before_the_others(tmp_path):
    """In a gate session the needs_netem tests run one after the other where the first stands, on one
    user-mode-linux guest booted once, shut down before the next test that does not need it."""
    (tmp_path / "test_guest.py").write_text(GUEST_TESTS)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-m", "cni",
                        f"--netslo-slo={ROOT / 'netslo' / 'gate' / 'slo.yaml'}", f"--netslo-results={tmp_path / 'res'}",
                        str(tmp_path / "test_guest.py")], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    runs = [ln.split()[1:] for ln in p.stdout.splitlines() if ln.startswith("RUN ")]
    assert [r[0] for r in runs] == ["first", "second", "host"], runs
    first, second, host = runs
    assert first[2:] == ["netem-server", "http", "tcp", "udp", "node1"], runs
    assert second[1] == first[1] and int(second[2]) >= 1, runs     # the same guest, still up
    assert host[1] == "0", runs                                     # shut down before the host test
    assert not _uml_processes(f"uml-{first[1]}")


def test_a_dead_guest_is_booted_again_on_next_use():
    from netslo.gate.plugin.impair import NetemGuest
    guest = NetemGuest(2, "bridge")
    try:
        first = guest.up()
        assert guest.up() is first and first.alive()
        os.killpg(first._proc.pid, signal.SIGKILL)
        first._proc.wait(timeout=10)
        assert not first.alive()
        second = guest.up()
        assert second is not first and second.alive() and second.run_id != first.run_id
        assert guest.server is not None and set(guest.ports) == {"udp", "tcp", "http"}
        assert not _uml_processes(f"uml-{first.run_id}")
    finally:
        guest.close()
    assert not _uml_processes(f"uml-{second.run_id}")


def test_a_guest_whose_server_lost_a_responder_is_booted_again_and_says_why(caplog):
    """A responder of the guest's server that exited (here killed) would refuse the next test's
    connections (an infrastructure error naming only the client): the next ``up()`` names the
    responder, its exit code and log, and boots a guest whose responders serve."""
    from netslo.gate.plugin.impair import NetemGuest
    guest = NetemGuest(2, "bridge")
    try:
        first = guest.up()
        port = guest.ports["tcp"]
        assert first.responder_faults(guest.server) == []
        first.exec_in(guest.server, ["sh", "-c", f"kill -9 $(ss -Htlnp 'sport = :{port}' | grep -o 'pid=[0-9]*' "
                                                  "| head -n1 | cut -d= -f2)"], timeout=10)
        # While the killed process is still in its exit path its socket is already closed: the guest
        # then says "runs (pid N) but nothing listens" (true, and also a fault) until it is reaped.
        deadline = time.monotonic() + 10
        gone = first.responder_faults(guest.server)
        while not any(f.startswith("responder tcp in pod netem-server exited") for f in gone) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
            gone = first.responder_faults(guest.server)
        assert gone and gone[0].startswith("responder tcp in pod netem-server exited (code -9)"), gone
        with caplog.at_level("INFO", logger="netslo.core.progress"):
            second = guest.up()
        assert second is not first and second.alive() and not first.alive()
        assert "booted again before the next test: responder tcp in pod netem-server exited" in caplog.text
        client = guest.pod("client", "node1")
        s = second.probe(client, ProbeSpec("tcp-rr", guest.server.ip, guest.ports["tcp"], count=20, interval=0.002))
        assert (s.rows["recv_ns"] >= 0).sum() == 20
    finally:
        guest.close()


def test_a_guest_that_died_is_booted_again_and_says_so(caplog):
    """A guest whose kernel exited between two tests is booted again by the next ``up()``, which says
    so with the exit code and the guest's log (not silently: a dying guest is a finding)."""
    from netslo.gate.plugin.impair import NetemGuest
    guest = NetemGuest(2, "bridge")
    try:
        first = guest.up()
        first._proc.kill()
        first._proc.wait(timeout=10)
        assert not first.alive() and "exited (code -9)" in first.ended()
        with caplog.at_level("INFO", logger="netslo.core.progress"):
            second = guest.up()
        assert second is not first and second.alive()
        assert "booted again before the next test: the guest's kernel exited (code -9)" in caplog.text
    finally:
        guest.close()


def test_the_first_measured_requests_are_not_the_probes_cold_start():
    """A freshly forked probe pays a page fault for every page it first writes; inside
    user-mode-linux that held the first ~25 requests of every run at 5-8 ms (median) on a 0.5 ms
    path. The probe's warm-up runs its own code before the schedule, so the first 25 requests' median
    stays within 4x the rest's P99. Not within the P99 itself: this VM switches between latency
    regimes for tens of ms at a time, whose 25-request medians differ up to ~3.5x (150-530 us over
    12 runs here, 2026-12-07), so the first 25 may fall in a slow regime and the rest in a fast one
    (CI, 2026-12-07: 533 us against a P99 of 511 us). The fault it guards against is >= 7x any such
    P99 (at most 680 us in those runs). With the warm-up removed, the fault did not show here on
    2026-12-07 (first 25 requests' median 365-502 us against the rest's 440-534 us, user-space times,
    6 runs): the test keeps the first requests honest should it come back."""
    c = uml.UmlCluster(nodes=2)
    try:
        a, b = c.add_pod("a", "node0"), c.add_pod("b", "node1")
        ports = c.start_responders(b, ("udp",))
        for _ in range(3):
            s = c.probe(a, ProbeSpec("udp", b.ip, ports["udp"], count=500, interval=0.002, req_bytes=1024,
                                     resp_bytes=1024))
            answered = s.rows[s.rows["recv_ns"] >= 0]
            rtt = (answered["recv_ns"] - answered["send_ns"]).astype(float)
            assert np.median(rtt[:25]) <= 4 * np.percentile(rtt[25:], 99), (np.median(rtt[:25]), np.median(rtt[25:]))
            assert s.meta["warmup_sent"] == 8 >= s.meta["warmup_answered"] >= 4
    finally:
        c.close()
