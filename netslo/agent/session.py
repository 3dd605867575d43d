"""``python -m netslo.agent session``: a warm agent behind one long-lived exec stream.

On Kubernetes every agent command (a probe, a bulk flow) used to be an exec of its own: a new stream
through the API server and kubelet, then an interpreter start and every import in a pod with a small
CPU request, ~1.2 s per call on kind. A session is started once per pod (one exec whose stdin stays
open) and runs each command it is sent in a child forked from itself, so a call costs its schedule
plus a fork and the framing. What a command needs is imported in the session, before the fork, the
first time such a command comes (``COMMAND_MODULES``: numpy and the probes for ``probe`` and ``bulk``,
netlink for a node agent's ``netem`` and ``qos``), so only the first one pays for it and a pod that
only serves never does: on kind the gate's 14 pods all importing the probes at once took 7 s of the
two cores (2026-11-28), and most of those pods never run one.

Protocol, binary, on the session's stdin and stdout:

    request  one JSON line: {"argv": [agent arguments], "env": {NAME: value}}
    reply    one JSON line: {"rc": exit code, "out": N, "err": M}, then N bytes of the command's
             stdout and M bytes of its stderr

A request with an empty argv is answered at once (rc 0, no output, nothing forked): the client's sign
that the session has started. One command at a time (a client wanting two at once opens two
sessions). At end of stdin the session ends; a command still running then is killed, and a child
never outlives the session (PR_SET_PDEATHSIG). Nothing but replies is written to the session's stdout
(its own fd 1 is moved to stderr at start). ``request_line`` and ``parse_reply`` are the client's
side of the framing (``providers.kube_session`` speaks it over the exec stream).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import sys

from netslo.agent.forkserver import WARM, Dispatch, run_child, stdio_to

PR_SET_PDEATHSIG = 1
MAX_HEADER = 1 << 20
# agent command -> modules its runs import; a session imports them once, on the first such command
COMMAND_MODULES = {"probe": WARM, "bulk": WARM,
                   "netem": ("netslo.impair.node_cli",), "qos": ("netslo.impair.shaping.node_cli",),
                   "detach": ("netslo.agent.detach", "netslo.traffic.responders.websocket", "netslo.traffic.responders.proxy",
                              "netslo.traffic.responders.mqtt")}


def _child(dispatch: Dispatch, argv: list[str], env: dict[str, str], out_w: int, err_w: int) -> None:
    """In the forked child: run the agent command (``dispatch(argv)``) with its output on the pipes;
    never returns."""
    def run() -> int:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        stdio_to(out_w, err_w)
        os.environ.update(env)
        return dispatch(argv)

    run_child(run, (signal.SIGCHLD, signal.SIGTERM))   # (the session itself dies of SIGPIPE: ``serve``)


def _run(dispatch: Dispatch, request: dict, stdin_fd: int, pending: bytearray) -> tuple[int, bytes, bytes] | None:
    """Fork one command and collect its output; None when stdin ended meanwhile (the command is
    killed: nobody will read its reply). Input arriving meanwhile is kept in ``pending``."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stderr.flush()      # what this process wrote stays its own, not written again by the child
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(dispatch, list(request["argv"]), dict(request.get("env") or {}), out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    bufs = {out_r: bytearray(), err_r: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in (out_r, err_r, stdin_fd):
        sel.register(fd, selectors.EVENT_READ)
    ended = False
    try:
        while len(sel.get_map()) > (stdin_fd in sel.get_map()):    # a pipe still open
            for key, _ in sel.select():
                data = os.read(key.fd, 1 << 16)
                if key.fd == stdin_fd:
                    pending += data
                    if not data:
                        ended = True
                        os.kill(pid, signal.SIGKILL)
                        sel.unregister(stdin_fd)
                elif data:
                    bufs[key.fd] += data
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return None if ended else (code, bytes(bufs[out_r]), bytes(bufs[err_r]))


def serve(dispatch: Dispatch, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Answer requests on ``stdin_fd`` with replies on ``stdout_fd`` until end of input; each request
    runs ``dispatch(argv)`` (the agent's command line) in a forked child."""
    reply_fd = os.dup(stdout_fd)
    os.dup2(2, stdout_fd)               # stray prints of this process go to stderr, never into a reply
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    pending = bytearray()
    while True:
        while b"\n" not in pending:
            if len(pending) > MAX_HEADER:
                print("netslo session: request line too long", file=sys.stderr)
                return 2
            data = os.read(stdin_fd, 1 << 16)
            if not data:
                return 0
            pending += data
        line, _, rest = bytes(pending).partition(b"\n")
        pending = bytearray(rest)
        try:
            request = json.loads(line)
            argv = request["argv"]
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise ValueError("argv: expected a list of strings")
        except (ValueError, KeyError, TypeError) as e:
            code, out, err = 2, b"", f"netslo session: bad request ({e})\n".encode()
        else:
            if not argv:            # "are you there": answered by this process, nothing forked
                _write_all(reply_fd, json.dumps({"rc": 0, "out": 0, "err": 0}).encode() + b"\n")
                continue
            _warm_for(argv)
            done = _run(dispatch, request, stdin_fd, pending)
            if done is None:
                return 0
            code, out, err = done
        header = json.dumps({"rc": code, "out": len(out), "err": len(err)}).encode() + b"\n"
        _write_all(reply_fd, header + out + err)


def _warm_for(argv: list[str]) -> None:
    """Import, in this process, what command ``argv`` needs (``COMMAND_MODULES``), so its child and
    every later one find it imported; then freeze the collector's view (children's collections leave
    the inherited objects' pages shared). An import that fails is left to the child, which
    reports it as the command's error."""
    modules = COMMAND_MODULES.get(argv[0] if argv else "", ())
    if all(name in sys.modules for name in modules):
        return
    try:
        for name in modules:
            importlib.import_module(name)
    except Exception:
        return
    gc.collect()
    gc.freeze()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def parse_reply(buf: bytearray) -> tuple[int, bytes, bytes] | None:
    """One complete reply taken off the front of ``buf`` (rc, stdout, stderr), or None if incomplete."""
    nl = buf.find(b"\n")
    if nl < 0:
        return None
    header = json.loads(bytes(buf[:nl]))
    end = nl + 1 + header["out"] + header["err"]
    if len(buf) < end:
        return None
    out = bytes(buf[nl + 1:nl + 1 + header["out"]])
    err = bytes(buf[nl + 1 + header["out"]:end])
    del buf[:end]
    return header["rc"], out, err


def request_line(argv: list[str], env: dict[str, str] | None = None) -> bytes:
    return json.dumps({"argv": list(argv), "env": dict(env or {})}).encode() + b"\n"


def main(argv: list[str], dispatch: Dispatch) -> int:
    if argv:
        print(f"netslo.agent session: takes no arguments, got {' '.join(argv)}", file=sys.stderr)
        return 2
    return serve(dispatch)
