"""A Kubernetes agent pod's responders in one process tree (``python -m netslo.agent responders``), run
here in an embedded pod's namespace: all three serve real probes; one killed ends the set with its
name; SIGTERM ends every child; bad input is one line and exit 2."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from netslo.core.procs import CHILD_CWD, child_env
from netslo.providers.base import RESPONDER_PORTS
from netslo.providers.netns.cluster import NetnsCluster, pids_in_netns
from netslo.traffic.probes import ProbeSpec
from tests.unit.local_responder import free_port


@pytest.fixture(scope="module")
def cl():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        yield c, c.add_pod("server", "node0"), c.add_pod("client", "node1")


def _start(c, server, ready_dir):
    return subprocess.Popen(["nsenter", f"--net=/run/netns/{c.netns_of(server)}", sys.executable, "-m", "netslo.agent",
                             "responders", "udp,tcp,http", "--ready-dir", str(ready_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), cwd=CHILD_CWD)


def _ready(proc, ready_dir, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not all((ready_dir / f"{p}.ready").exists() for p in ("udp", "tcp", "http")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "responders not ready"
        time.sleep(0.05)
    return {p: int((ready_dir / f"{p}.ready").read_text()) for p in ("udp", "tcp", "http")}


def test_one_process_serves_all_three_and_sigterm_ends_them_all(cl, tmp_path):
    c, server, client = cl
    proc = _start(c, server, tmp_path)
    try:
        pids = _ready(proc, tmp_path)
        assert len(set(pids.values()) | {proc.pid}) == 4      # a process of its own per protocol
        for protocol in ("udp", "tcp-rr", "http"):
            port = RESPONDER_PORTS[protocol.split("-")[0]]
            s = c.probe(client, ProbeSpec(protocol, server.ip, port, count=20, interval=0.002))
            assert (s.rows["recv_ns"] >= 0).sum() == 20, protocol
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.communicate()
    assert not set(pids.values()) & set(pids_in_netns(c.netns_of(server)))


def test_a_responder_that_ends_stops_the_set_naming_it(cl, tmp_path):
    c, server, _ = cl
    proc = _start(c, server, tmp_path)
    try:
        pids = _ready(proc, tmp_path)
        os.kill(pids["tcp"], signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 1
    assert "netslo responders: tcp ended (code -9); stopping udp, http" in err.decode(), err
    assert not set(pids.values()) & set(pids_in_netns(c.netns_of(server)))


@pytest.mark.parametrize("protocols", ["udp,dns", "", "tcp,tcp"])
def test_bad_protocols_are_one_line_and_exit_2(protocols, tmp_path):
    run = subprocess.run([sys.executable, "-m", "netslo.agent", "responders", protocols, "--ready-dir", str(tmp_path)],
                         capture_output=True, text=True, env=child_env(), cwd=CHILD_CWD, timeout=60)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"netslo.agent: protocols: value {protocols!r} — expected a comma-separated "
                                       "list of distinct udp, tcp, http"], run.stderr


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_the_ready_port_accepts_only_once_every_responder_is_ready(tmp_path):
    """``--ready-port`` (a Kubernetes startup probe's tcpSocket): nothing listens while a ready file
    is missing, and it accepts connection after connection once all exist."""
    port = free_port()
    (tmp_path / "udp.ready").write_text("1")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from netslo.agent.responder_set import announce_ready; "
                             "announce_ready(['udp', 'tcp'], sys.argv[1], int(sys.argv[2]))", str(tmp_path), str(port)],
                            env=child_env(), cwd=CHILD_CWD)
    try:
        time.sleep(1.0)
        assert proc.poll() is None and not _accepts(port)       # tcp.ready missing
        (tmp_path / "tcp.ready").write_text("2")
        deadline = time.monotonic() + 10
        while not _accepts(port):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert all(_accepts(port) for _ in range(5))
    finally:
        proc.kill()
        proc.wait()
