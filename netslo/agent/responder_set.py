"""A pod's standard responders in one container: ``python -m netslo.agent responders udp,tcp,http
--ready-dir DIR``.

One interpreter imports the responders once and forks a child per protocol; each child serves as
``python -m netslo.agent serve PROTOCOL --port <its standard port> --ready-file DIR/PROTOCOL.ready``
would, in a process of its own (one protocol's work never waits on another's interpreter lock). On a
Kubernetes node that is one container start and one interpreter start per pod instead of one per
protocol (each costs about a second of a node's CPU while a gate creates its pods).

With ``--ready-port PORT`` one more child waits until every responder's ready file exists, then
listens on TCP ``PORT`` and accepts (and closes) every connection: a Kubernetes startup probe then is
a ``tcpSocket`` check the kubelet makes itself, not an exec (a container runtime exec, about 0.3 s of
a node's CPU, every second per pod while a gate's pods start).

The parent forwards SIGTERM/SIGINT to its children and ends with 0 once they have ended. When a child
ends on its own, the parent says which (on stderr), stops the others and ends with that child's code
(1 if it was 0 or a signal), so the container restarts and its status shows the restart: a pod never keeps running
with one of its responders gone.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Callable

from netslo.agent.forkserver import run_child
from netslo.core.errors import SpecError

PROTOCOLS = ("udp", "tcp", "http")     # the responders that need no options (the others: ``serve``)
# Well-known responder ports inside every responder pod (same on every provider). Here, not beside the
# providers' Pod, so a pod's agent starting its responders imports no more than they need (no numpy).
RESPONDER_PORTS = {"udp": 7000, "tcp": 7001, "http": 7080,
                   "ws": 7081, "tls": 7443, "mqtt": 1883, "proxy": 8080,  # ws..proxy: issue 7 kinds
                   "dns": 7053}   # the emulated DNS responder (UDP; a cluster's own DNS listens on 53)
READY_PORT = 7099     # TCP: accepts once every responder of the set serves (``--ready-port``)
READY_POLL_S = 0.02   # how often the ready child looks for the responders' ready files
Serve = Callable[[str, str], int]      # (protocol, ready file) -> exit code; serves until SIGTERM


def ready_file(ready_dir: str, protocol: str) -> str:
    """The file a responder creates once it serves."""
    return f"{ready_dir}/{protocol}.ready"


def parse_protocols(text: str) -> list[str]:
    """'udp,tcp,http' -> the protocols, each once, each one of ``PROTOCOLS``; SpecError otherwise."""
    protocols = [p for p in text.split(",") if p]
    if not protocols or len(set(protocols)) != len(protocols) or any(p not in PROTOCOLS for p in protocols):
        raise SpecError("protocols", text, f"a comma-separated list of distinct {', '.join(PROTOCOLS)}")
    return protocols


def announce_ready(protocols: list[str], ready_dir: str, port: int) -> int:
    """The ready child's work: once every protocol's ready file exists, listen on TCP ``port`` (all
    addresses, both families where the pod has IPv6) and accept and close connections until SIGTERM."""
    while not all(os.path.exists(ready_file(ready_dir, p)) for p in protocols):
        time.sleep(READY_POLL_S)
    try:
        sock = socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
    except OSError:      # no IPv6 in this pod
        sock = socket.create_server(("", port))
    while True:
        conn, _ = sock.accept()
        conn.close()


def run(protocols: list[str], ready_dir: str, serve: Serve, ready_port: int | None = None) -> int:
    """Fork one child per protocol (and the ready child with ``ready_port``) and supervise them (see
    the module docstring); the exit code."""
    children: dict[int, str] = {}
    stopping = []

    def stop(*_):
        stopping.append(1)
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    work = {p: (lambda p=p: serve(p, ready_file(ready_dir, p))) for p in protocols}
    if ready_port is not None:
        work["ready"] = lambda: announce_ready(protocols, ready_dir, ready_port)
    for name, fn in work.items():
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            run_child(fn)
        children[pid] = name
    if stopping:        # a signal during the forks: the children forked after it get it too
        stop()
    code = 0
    while children:
        pid, status = os.wait()
        protocol = children.pop(pid, None)
        if protocol is None or stopping:
            continue
        child_code = os.waitstatus_to_exitcode(status)
        print(f"netslo responders: {protocol} ended (code {child_code}); stopping {', '.join(children.values())}",
              file=sys.stderr, flush=True)
        code = child_code if child_code > 0 else 1
        stop()
    return code
