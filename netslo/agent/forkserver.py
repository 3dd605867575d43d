"""A warm agent: one process that has imported the agent forks a child per run of a netslo program.

    python -m netslo.agent.forkserver SOCKET READY_FILE

Starting ``python -m netslo.agent`` costs its interpreter start and imports on every probe: 0.11 s on
the host and 0.33 s inside user-mode-linux, where each system call is trapped (measured, 2-core VM,
2026-11-25), and a gate makes ~130 agent runs. A fork of the warm process cost ~16 ms inside
user-mode-linux that day; on the slower VM of 2026-11-26 the fork took 0.04-0.05 s and the child ran
0.06-0.08 s later (its first writes to shared pages are copy-on-write faults the guest traps). The
child enters the pod's network namespace (``setns``), takes the caller's stdout/stderr (pipes, or a
responder's log file; passed over the UNIX socket with SCM_RIGHTS) and runs the module as ``python
-m`` would (``netslo.agent``, or a helper such as ``netslo.studies.qos.tcpflow``); what it measures is the
same code in a fresh process of its own.

Protocol, one SOCK_SEQPACKET connection per run (message boundaries kept): the client sends
``{"netns": path, "module": name, "argv": [...], "env": {...}, "cwd": dir}`` (the environment of
that run, as ``subprocess`` would pass it) with its stdout and stderr descriptors; the server
answers ``{"pid": n}`` once forked and ``{"status": code}`` when the child exits (code as
``subprocess.Popen.returncode``: negative = killed by that signal). The server is single-threaded
(a fork from a threaded process may copy a held lock) and serves runs concurrently.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
from typing import Callable

from netslo.core import netns_access

PR_SET_NAME = 15
CHILD_NAME = b"netslo-agent"    # /proc/PID/comm of a forked run (its cmdline stays the server's)
MAX_REQUEST = 1 << 20     # bytes of one request (its environment included), one SOCK_SEQPACKET message
WARM = ("numpy", "netslo.agent.cli", "netslo.stats.sample_file", "netslo.traffic.probes.udp", "netslo.traffic.probes.tcp",
        "netslo.traffic.probes.bulk", "netslo.traffic.probes.http", "netslo.traffic.probes.websocket", "netslo.traffic.probes.mqtt",
        "netslo.traffic.probes.icmp", "netslo.studies.qos.tcpflow", "netslo.traffic.responders.udp", "netslo.traffic.responders.tcp",
        "netslo.traffic.responders.http")
Dispatch = Callable[[list[str]], int]   # an agent command line -> its exit code (``agent.cli.main``)
MODULE_PREFIX = "netslo."     # what a client may run here (python -m <module>)


# ---- server -----------------------------------------------------------------------------------------

def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: run the requested module (``run_child``); never returns."""
    def run() -> int:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stdio_to(fds[0], fds[1])
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        netns_access.setns(request["netns"])
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(CHILD_NAME), 0, 0, 0)
        sys.argv = ["", *request["argv"]]      # argv[0] becomes the module's file, as under ``python -m``
        if not hasattr(sys.modules.get(request["module"]), "__path__"):  # a package runs its __main__
            sys.modules.pop(request["module"], None)   # warm as an import; runpy executes it as __main__
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        return 0

    run_child(run, (signal.SIGCHLD, signal.SIGTERM))


def stdio_to(out_fd: int, err_fd: int) -> None:
    """In a forked child: stdin from /dev/null, stdout to ``out_fd`` and stderr to ``err_fd`` (which may
    be the same descriptor), the originals closed."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in {null, out_fd, err_fd}:
        os.close(fd)


def child_signals(defaults) -> None:
    """In a forked child: the default action for the signals ``defaults`` and SIGPIPE ignored, as a
    fresh interpreter has it: a write to a peer that closed raises BrokenPipeError. (With the default
    action a forked TCP responder died, exit -13, when a client left in the middle of a response.)"""
    for sig in defaults:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def run_child(fn: Callable[[], int], signals=(signal.SIGTERM, signal.SIGINT)) -> None:
    """In a forked child: ``child_signals(signals)``, then ``fn()``; the child exits with its code (1,
    with the traceback on stderr, when it raised). Never returns."""
    code = 1
    try:
        child_signals(signals)
        code = fn()
    except SystemExit as e:
        code = exit_code(e)
    except BaseException:
        traceback.print_exc()
    finally:
        exit_child(code)


def exit_code(e: SystemExit) -> int:
    """The process exit code a ``SystemExit`` stands for (None: 0; a message: 1)."""
    return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


def exit_child(code) -> None:
    """End a forked child with ``code`` (None: 0) after flushing its stdio; no clean-up of the parent's."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code or 0)


def serve(path: str, ready: str) -> None:
    """Import the agent, listen on ``path``, write ``ready``; serve until SIGTERM."""
    import importlib
    for name in WARM:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()     # the imported objects leave the collector's view: a child's collections do not
                    # write to every inherited object (each write copies a shared page: a stall)
    sel = selectors.DefaultSelector()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "signal")
    waiting: dict[int, socket.socket] = {}
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(ready + ".tmp", ready)
    while not stop:
        for key, _ in sel.select():
            if key.data == "signal":
                os.read(wake_r, 4096)
                _reap_children(waiting)
            elif key.data == "accept":
                conn, _ = listener.accept()
                _start(conn, listener, waiting)
    for pid in list(waiting):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(conn: socket.socket, listener: socket.socket, waiting: dict) -> None:
    fds: list[int] = []
    try:
        msg, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 2)
        request = json.loads(msg)
        if len(fds) != 2:
            raise ValueError(f"expected 2 file descriptors, got {len(fds)}")
        if not str(request.get("module", "")).startswith(MODULE_PREFIX):
            raise ValueError(f"module {request.get('module')!r} is not a netslo program")
    except (OSError, ValueError) as e:
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(json.dumps({"error": f"bad request: {e}"}).encode() + b"\n")
        except OSError:
            pass
        conn.close()
        return
    pid = os.fork()
    if pid == 0:
        for sock in (listener, conn, *waiting.values()):    # other runs' connections stay the server's
            sock.close()
        _child(request, fds)
    for fd in fds:
        os.close(fd)
    waiting[pid] = conn
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass


def _reap_children(waiting: dict) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


# ---- client -------------------------------------------------------------------------------------------

class Run:
    """One agent run in the fork server; the subset of ``subprocess.Popen`` that callers use.

    ``output``: a file descriptor the child writes its stdout and stderr to (e.g. a long-running
    responder's log file) instead of two pipes that ``communicate`` drains."""

    def __init__(self, path: str, netns: str, module: str, argv: list[str], env: dict[str, str], cwd: str,
                 output: int | None = None):
        self.args = argv
        self.returncode: int | None = None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if output is None:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            mine, theirs = [out_r, err_r], [out_w, err_w]
        else:
            mine, theirs = [], [output, output]
        try:
            self._sock.connect(path)
            request = {"netns": netns, "module": module, "argv": argv, "env": env, "cwd": cwd}
            socket.send_fds(self._sock, [json.dumps(request).encode()], theirs)
        except BaseException:
            for fd in mine:
                os.close(fd)
            self._sock.close()
            raise
        finally:
            if output is None:
                for fd in theirs:
                    os.close(fd)
        self._out, self._err = mine or (None, None)
        self._bufs = {fd: bytearray() for fd in mine}
        self._sel = selectors.DefaultSelector()
        for fd in self._bufs:
            self._sel.register(fd, selectors.EVENT_READ)
        self._reply = b""
        self._closed = False
        try:
            first = self._read_reply(10.0)
            if "pid" not in first:
                raise OSError(f"fork server: {first.get('error', first)}")
        except BaseException:
            self._close()
            raise
        self.pid = first["pid"]

    def _read_reply(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._reply:
            self._sock.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                chunk = self._sock.recv(4096)
            except (socket.timeout, BlockingIOError):     # BlockingIOError: a timeout of 0 (poll)
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            if not chunk:
                raise OSError("fork server closed the connection")
            self._reply += chunk
        line, self._reply = self._reply.split(b"\n", 1)
        return json.loads(line)

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """stdout and stderr until the child exits (empty with ``output``); ``subprocess.TimeoutExpired``
        after ``timeout`` s (call again after ``kill`` to collect)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            for key, _ in self._sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    self._bufs[key.fd] += chunk
                else:
                    self._sel.unregister(key.fd)
        self.wait(3600.0 if deadline is None else max(0.1, deadline - time.monotonic()))
        self._close()
        return bytes(self._bufs.get(self._out, b"")), bytes(self._bufs.get(self._err, b""))

    def wait(self, timeout: float | None = None) -> int:
        """The exit code once the child has exited; ``subprocess.TimeoutExpired`` after ``timeout`` s.
        When the server has gone (it kills its children as it stops), the code is -SIGKILL."""
        if self.returncode is None:
            try:
                self.returncode = self._read_reply(3600.0 if timeout is None else timeout).get("status", 1)
            except OSError:     # (TimeoutExpired is not one: it propagates)
                self.returncode = -signal.SIGKILL
            if not self._bufs:      # nothing left to drain (``output``): the connection is done
                self._close()
        return self.returncode

    def poll(self) -> int | None:
        """The exit code if the child has exited, else None (does not block)."""
        if self.returncode is None and not self._closed:
            try:
                self.wait(0.0)
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._sel.close()
        for fd in self._bufs:
            try:
                os.close(fd)
            except OSError:
                pass
        self._sock.close()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 2:
        print("usage: python -m netslo.agent.forkserver SOCKET READY_FILE", file=sys.stderr)
        return 2
    serve(argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
