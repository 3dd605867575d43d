"""``python -m netslo.agent detach``: start a long-lived agent command (a responder) that outlives the
command itself, and return once it is ready.

    python -m netslo.agent detach --ready-file F --log L [--timeout 30] -- serve ws --port 8081 --ready-file F

The command runs in a process of its own (a new session, stdin /dev/null, stdout and stderr to L, no
file descriptor of the caller's) started by ``fork`` from this one, so through a warm agent session
(``netslo.agent.session``) a responder starts without an exec, an interpreter start or its imports
(the session imports them once: ``COMMAND_MODULES["detach"]``). Exit 0 once F exists, the
command's pid on stdout; 1 when the command ended first or F did not appear within the timeout
(seconds; the command is then killed), with L's last lines on stderr; 2 for bad options. F is
removed first, so an old one never counts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from netslo.agent.forkserver import Dispatch, run_child, stdio_to

POLL_S = 0.01          # how often the ready file is looked for
LOG_TAIL = 400         # bytes of the command's log shown when it failed


def _run_detached(dispatch: Dispatch, argv: list[str], log_fd: int) -> None:
    """In the forked child: a session of its own, the log as output, then the agent command
    (``dispatch(argv)``); never returns. (A fork clears the parent-death signal the warm session sets
    on its children.)"""

    def detached() -> int:
        os.setsid()
        stdio_to(log_fd, log_fd)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))   # the session's exec stream among them
        sys.stdout = open(1, "w", buffering=1, closefd=False)   # whatever objects they were, they write
        sys.stderr = open(2, "w", buffering=1, closefd=False)   # to the log now
        return dispatch(argv)
    run_child(detached, (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT))


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - LOG_TAIL))
            return f.read().decode(errors="replace").strip() or "(empty)"
    except OSError as e:
        return f"(unreadable: {e})"


def start(dispatch: Dispatch, argv: list[str], ready_file: str, log: str, timeout: float) -> tuple[int | None, str]:
    """Start agent command ``argv`` detached (run as ``dispatch(argv)``); (its pid, "") once ``ready_file`` exists, else (None, why)."""
    try:
        os.unlink(ready_file)
    except FileNotFoundError:
        pass
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _run_detached(dispatch, argv, log_fd)
    os.close(log_fd)
    deadline = time.monotonic() + timeout
    while not os.path.exists(ready_file):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return None, f"exited ({os.waitstatus_to_exitcode(status)}) before it was ready; log: {_tail(log)}"
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, f"not ready after {timeout:g}s (killed); log: {_tail(log)}"
        time.sleep(POLL_S)
    return pid, ""


def main(argv: list[str], dispatch: Dispatch) -> int:
    p = argparse.ArgumentParser(prog="python -m netslo.agent detach")
    p.add_argument("--ready-file", required=True, help="the command creates it once it serves")
    p.add_argument("--log", required=True, help="the command's stdout and stderr")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the ready file")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- and the agent command")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("netslo.agent detach: command: none given — expected '-- serve KIND ...'", file=sys.stderr)
        return 2
    if not args.timeout > 0:
        print(f"netslo.agent detach: --timeout: value {args.timeout:g} — expected seconds > 0", file=sys.stderr)
        return 2
    pid, why = start(dispatch, command, args.ready_file, args.log, args.timeout)
    if pid is None:
        print(f"netslo.agent {' '.join(command[:2])}: {why}", file=sys.stderr)
        return 1
    print(pid)
    return 0
