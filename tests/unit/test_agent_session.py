"""The warm agent session (``python -m netslo.agent session``) and its client (``kube_session``).

The session runs here as a real process; the client speaks to it through the same four calls it uses
on a Kubernetes exec stream (write_stdin, update, read_channel, is_open), here over the process's
pipes (``PipeStream``): on a cluster the kind tier runs it for every probe."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from netslo.agent.session import parse_reply, request_line
from netslo.core.errors import InfrastructureError
from netslo.providers.kube.session import AgentSessions
from netslo.stats.samples import SampleSet
from tests.unit.local_responder import free_port

CLOSED_PORT = "127.0.0.1:9"


def probe_argv(count: int = 5) -> list[str]:
    return ["probe", "udp", "--target", CLOSED_PORT, "--count", str(count), "--interval", "1ms", "--wait", "50ms",
            "--out", "-"]


class PipeStream:
    """A session process behind the exec stream's client interface."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "netslo.agent", "session"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.chan = {1: bytearray(), 2: bytearray()}

    def write_stdin(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def update(self, timeout: float) -> None:
        fds = {self.proc.stdout.fileno(): 1, self.proc.stderr.fileno(): 2}
        ready, _, _ = select.select(list(fds), [], [], timeout)
        for fd in ready:
            self.chan[fds[fd]] += os.read(fd, 1 << 16)

    def read_channel(self, n: int) -> bytes:
        data, self.chan[n][:] = bytes(self.chan[n]), b""
        return data

    def is_open(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PipeApi:
    def __init__(self):
        self.opened: list[PipeStream] = []

    def open_exec(self, namespace, pod, container, command, stdin):
        assert command == ["python", "-m", "netslo.agent", "session"] and stdin
        self.opened.append(PipeStream())
        return self.opened[-1]


def _session_call(p, buf, argv, env=None):
    p.stdin.write(request_line(argv, env))
    p.stdin.flush()
    while (reply := parse_reply(buf)) is None:
        data = p.stdout.read1(1 << 16)
        assert data, p.stderr.read().decode()
        buf.extend(data)
    return reply


def test_a_session_answers_requests_one_after_another_and_ends_with_its_input():
    p = subprocess.Popen([sys.executable, "-m", "netslo.agent", "session"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    buf = bytearray()

    def call(argv, env=None):
        return _session_call(p, buf, argv, env)

    rc, out, err = call(probe_argv())
    samples = SampleSet.from_bytes(out)
    assert rc == 0 and len(samples) == 5 and not buf
    rc, out, err = call(["probe", "nope", "--target", CLOSED_PORT, "--out", "-"])
    assert rc == 2 and out == b"" and b"invalid choice: 'nope'" in err
    p.stdin.write(b'{"argv": "probe"}\n')
    p.stdin.flush()
    while (reply := parse_reply(buf)) is None:
        buf.extend(p.stdout.read1(1 << 16))
    assert reply[0] == 2 and b"bad request" in reply[2]
    rc, out, _ = call(probe_argv(3))             # still serving after the errors
    assert rc == 0 and len(SampleSet.from_bytes(out)) == 3
    p.stdin.close()
    assert p.wait(10) == 0


def test_the_end_of_input_kills_a_running_command():
    p = subprocess.Popen([sys.executable, "-m", "netslo.agent", "session"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(request_line(probe_argv(count=100_000)))    # 100 s of schedule
    p.stdin.flush()
    time.sleep(2.0)
    children = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    assert children, "the command should be running in a child"
    p.stdin.close()
    assert p.wait(10) == 0 and p.stdout.read() == b""
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{c}") for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{c}") for c in children)


def test_the_client_keeps_one_warm_session_per_pod_and_opens_another_only_when_busy():
    api = PipeApi()
    sessions = AgentSessions(api, "netslo-x", "agent")
    try:
        sessions.warm("client")
        for _ in range(3):
            res = sessions.call("client", probe_argv(), {}, timeout=30)
            assert res.returncode == 0 and len(SampleSet.from_bytes(res.stdout)) == 5
        assert len(api.opened) == 1
        results = []
        threads = [threading.Thread(target=lambda: results.append(sessions.call("client", probe_argv(200), {}, 30)))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.returncode for r in results] == [0, 0] and len(api.opened) == 2
    finally:
        sessions.close()
    assert all(not s.is_open() for s in api.opened)


def test_a_command_past_its_timeout_is_an_infrastructure_error_and_its_session_is_replaced():
    api = PipeApi()
    sessions = AgentSessions(api, "netslo-x", "agent")
    try:
        with pytest.raises(InfrastructureError, match="no answer within 1s"):
            sessions.call("client", probe_argv(count=100_000), {}, timeout=1.0)
        assert not api.opened[0].is_open()
        res = sessions.call("client", probe_argv(), {"NETSLO_X": "1"}, timeout=30)
        assert res.returncode == 0 and len(api.opened) == 2
    finally:
        sessions.close()


def _ask(proc, argv: list[str]) -> tuple[int, bytes, bytes]:
    proc.stdin.write(request_line(argv))
    proc.stdin.flush()
    buf = bytearray()
    while (reply := parse_reply(buf)) is None:
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        assert chunk, f"session ended: {proc.stderr.read().decode(errors='replace')[-500:]}"
        buf += chunk
    return reply


def test_a_node_agent_command_imports_netlink_once_in_the_session_not_in_every_run():
    """``qos``/``netem`` runs need pyroute2: the session imports it before the first one's fork, so no
    run imports it again. Python's own import log (PYTHONPROFILEIMPORTTIME: one line per import on the
    importing process's stderr) shows where the import happened: a run's stderr comes back in its reply,
    the session's own stderr is separate."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.Popen([sys.executable, "-m", "netslo.agent", "session"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        runs = [_ask(proc, argv) for argv in (["qos"], ["netem", "--help"], ["qos"])]
        proc.stdin.close()
        session_err = proc.stderr.read().decode(errors="replace")
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
    assert [rc for rc, _, _ in runs] == [2, 0, 2]       # a usage error, the usage, a usage error: the commands ran
    assert b"qos action" in runs[0][2]
    imported = re.compile(r"^import time:.*\|\s*(\S+)$", re.M)
    for rc, out, err in runs:
        assert "pyroute2" not in imported.findall(err.decode(errors="replace")), "a run imported pyroute2 itself"
    in_session = imported.findall(session_err)
    assert in_session.count("pyroute2") == 1, "the session did not import pyroute2 (once)"


def test_an_empty_request_is_answered_at_once_and_await_warm_returns_once_every_session_answers():
    api = PipeApi()
    sessions = AgentSessions(api, "netslo-x", "agent")
    try:
        sessions.await_warm(["a", "b"], timeout=60)
        assert len(api.opened) == 2                  # one warm session per pod, no more
        assert all(s.is_open() for s in api.opened)
        res = sessions.call("a", [], {}, timeout=5)
        assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"") and len(api.opened) == 2
        res = sessions.call("a", probe_argv(), {}, timeout=30)   # and commands still run after it
        assert res.returncode == 0 and len(SampleSet.from_bytes(res.stdout)) == 5
    finally:
        sessions.close()


def _maps(stream) -> str:
    with open(f"/proc/{stream.proc.pid}/maps") as f:
        return f.read()


def test_a_session_imports_the_probes_on_its_first_probe_not_before():
    """A pod that only serves never pays for numpy and the probes; the first probe imports them in the
    session (before its fork), and later probes' children inherit them."""
    api = PipeApi()
    sessions = AgentSessions(api, "netslo-x", "agent")
    try:
        sessions.await_warm(["a"], timeout=60)
        assert "numpy" not in _maps(api.opened[0])
        assert sessions.call("a", ["netns-id"], {}, timeout=30).returncode == 0
        assert "numpy" not in _maps(api.opened[0])
        assert sessions.call("a", probe_argv(), {}, timeout=30).returncode == 0
        assert "numpy" in _maps(api.opened[0])
    finally:
        sessions.close()



def ignored_signals(pid: int) -> int:
    """The SigIgn mask of process ``pid`` (bit n-1: signal n ignored)."""
    line = next(ln for ln in open(f"/proc/{pid}/status") if ln.startswith("SigIgn:"))
    return int(line.split()[1], 16)


def _ignores_sigpipe(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGPIPE, as every fresh Python interpreter does."""
    return bool(ignored_signals(pid) & (1 << (signal.SIGPIPE - 1)))


def test_a_command_run_by_the_session_ignores_sigpipe_as_a_fresh_interpreter_does():
    """The session itself ends when its exec stream goes (SIGPIPE's default action); what it runs
    must not: a TCP responder forked with that action died when a client left mid-response."""
    import socket
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "netslo.agent", "session"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p.stdin.write(request_line(["serve", "tcp", "--port", str(port), "--bind", "127.0.0.1"]))
        p.stdin.flush()
        deadline = time.monotonic() + 10
        while True:   # until the responder listens: its child is past its signal set-up
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, p.stderr.read1(4096)
                time.sleep(0.02)
        child, = (int(k) for k in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split())
        assert _ignores_sigpipe(child) and not _ignores_sigpipe(p.pid)
    finally:
        p.kill()
        p.wait()


def test_a_detached_responder_keeps_serving_after_the_reply_and_holds_none_of_the_session(tmp_path):
    """``detach`` through a session: the reply comes once the responder is ready (its pid on stdout),
    the responder answers real requests after it, in a session of its own, and it holds no pipe of
    the session's (ending the session leaves it running; the session's stdout ends)."""
    import urllib.request
    port = free_port()
    ready, log = tmp_path / "ws.ready", tmp_path / "ws.log"
    ready.write_text("old")          # a stale ready file never counts
    p = subprocess.Popen([sys.executable, "-m", "netslo.agent", "session"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pid = None
    try:
        rc, out, err = _session_call(p, bytearray(), ["detach", "--ready-file", str(ready), "--log", str(log), "--",
                                                      "serve", "ws", "--port", str(port), "--bind", "127.0.0.1",
                                                      "--ready-file", str(ready)])
        assert rc == 0, err.decode()
        pid = int(out)
        assert os.getsid(pid) == pid != os.getsid(p.pid)
        assert _ignores_sigpipe(pid)     # as a fresh interpreter: a client leaving mid-response cannot kill it
        req = urllib.request.Request(f"http://127.0.0.1:{port}/rr", data=b"x", headers={"X-Resp-Bytes": "3"})
        assert urllib.request.urlopen(req, timeout=5).read() == b"\0\0\0"
        p.stdin.close()
        assert p.wait(10) == 0 and p.stdout.read() == b""
        assert os.path.exists(f"/proc/{pid}")        # still serving
    finally:
        if pid:
            os.kill(pid, 9)
        if p.poll() is None:
            p.kill()


@pytest.mark.parametrize("case", ["exits", "never ready"])
def test_a_detached_command_that_fails_or_never_gets_ready_is_exit_1_with_its_log(tmp_path, case):
    from netslo.agent import detach
    from netslo.agent.cli import main
    ready, log = str(tmp_path / "r"), str(tmp_path / "l")
    argv = (["serve", "proxy", "--port", "1"] if case == "exits"          # no --upstream: a spec error
            else ["serve", "dns", "--port", "0", "--bind", "127.0.0.1"])  # serves, but no ready file
    t0 = time.monotonic()
    pid, why = detach.start(main, argv, ready, log, timeout=1.0)
    assert pid is None and time.monotonic() - t0 < 20
    if case == "exits":
        assert why.startswith("exited (") and "upstream" in why, why
    else:
        assert why.startswith("not ready after 1s (killed)"), why
