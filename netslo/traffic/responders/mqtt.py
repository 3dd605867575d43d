"""MQTT broker responder: a real mosquitto (Debian package ``mosquitto``) run as a child process.

The agent writes a broker config (one listener, anonymous access, no persistence, no in-flight
limit, ``set_tcp_nodelay true`` unless Nagle is asked for), starts mosquitto, reports ready once a
TCP connect to the listener succeeds, and stops the broker (SIGTERM, then SIGKILL) when told to.
The broker dies with the agent (PR_SET_PDEATHSIG) and its config file is removed.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from netslo.core import scratch
from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.families import ANY

PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 10.0


def config(port: int, bind: str, nodelay: bool) -> str:
    """mosquitto.conf text for one listener (mosquitto 2.x option names); on ``ANY`` without an
    address: mosquitto then listens on every address of both families."""
    return "\n".join([
        f"listener {port}" if bind in (ANY, "") else f"listener {port} {bind}",
        "allow_anonymous true",
        f"set_tcp_nodelay {'true' if nodelay else 'false'}",
        "persistence false",
        "max_inflight_messages 0",
        "max_queued_messages 100000",
        "log_dest stderr",
        "log_type error",
        "log_type warning",
        "",
    ])


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _wait_listening(port: int, bind: str, proc: subprocess.Popen) -> None:
    host = "127.0.0.1" if bind in (ANY, "0.0.0.0", "") else bind
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InfrastructureError(f"mosquitto exited with code {proc.returncode} before listening on {port}")
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise InfrastructureError(f"mosquitto not listening on {host}:{port} after {READY_TIMEOUT_S:.0f} s")


def serve(port: int, bind: str = ANY, nodelay: bool = True, ready=None, stop=None) -> None:
    """Run mosquitto on ``bind:port`` until ``stop()`` returns True (checked every 0.1 s)."""
    exe = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
    if exe is None:
        raise Unsupported("the MQTT responder needs mosquitto (Debian package 'mosquitto')")
    fd, path = scratch.mkstemp("mosquitto", ".conf")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(config(port, bind, nodelay))
        os.chmod(path, 0o644)  # mosquitto may drop to its own user
        proc = subprocess.Popen([exe, "-c", path], preexec_fn=_die_with_parent)
        try:
            _wait_listening(port, bind, proc)
            if ready:
                ready()
            while not (stop and stop()) and proc.poll() is None:
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    finally:
        Path(path).unlink(missing_ok=True)
