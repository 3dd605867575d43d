"""Bounded helper processes in a pod's network namespace: start, stop by PID, collect their output.

``Background(cluster, pod, argv, limit_s)`` starts ``argv`` (``["-m", "netslo.studies.qos.tcpflow", ...]`` runs
this Python) in the pod's namespace: the cluster's ``spawn_in`` (Kubernetes: the node agent,
``netslo.providers.kube.links.Spawned``), else with ``nsenter`` from this host; ``stop()`` sends
SIGTERM (the process reports and exits), waits, then SIGKILLs only what it started; ``json()`` is the
last stdout line parsed.
Every process is also killed by ``limit_s`` (hard bound) and when the ``with`` block exits.

``run(cluster, pod, argv, timeout)`` runs one synchronously with the cluster's ``exec_in`` (works in a
user-mode-linux guest too) and returns the parsed JSON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.procs import CHILD_CWD, child_env

NETNS_DIR = Path("/run/netns")


def host_netns(cluster, pod) -> str:
    """The namespace name of ``pod`` as this process sees it; Unsupported when it cannot enter it."""
    netns_of = getattr(cluster, "netns_of", None)
    name = netns_of(pod) if netns_of else None
    if not name or not (NETNS_DIR / name).exists():
        raise Unsupported(f"provider {cluster.provider}: pod {pod.name}'s network namespace is not "
                          f"reachable from this process (needs the embedded netns provider on this kernel)")
    return name


class LocalSpawn:
    """``argv`` in the pod's namespace as a child of this process (``nsenter``), in its own process
    group, killed after ``limit_s`` s; ``signal("TERM"|"KILL")`` reaches its whole group."""

    def __init__(self, cluster, pod, argv: list[str], limit_s: float):
        ns = host_netns(cluster, pod)
        self.proc = subprocess.Popen(["timeout", "-s", "KILL", f"{limit_s:.0f}", "nsenter",
                                      f"--net={NETNS_DIR / ns}", *argv],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
                                     cwd=CHILD_CWD, start_new_session=True)
        self.poll, self.communicate, self.pid = self.proc.poll, self.proc.communicate, self.proc.pid

    @property
    def returncode(self):
        return self.proc.returncode

    def signal(self, name: str) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, getattr(signal, f"SIG{name}"))
            except ProcessLookupError:
                pass


class Background:
    """One helper process in a pod namespace (context manager; always reaped). Started by the
    cluster's ``spawn_in(pod, argv, limit_s)`` where it has one (a node agent on a real cluster's
    node), else from this host (``LocalSpawn``)."""

    def __init__(self, cluster, pod, argv: list[str], limit_s: float):
        self.pod = pod
        self.limit_s = limit_s
        full = argv if argv[:1] != ["-m"] else [sys.executable, *argv]
        spawn = getattr(cluster, "spawn_in", None) or (lambda *a: LocalSpawn(cluster, *a))
        self.proc = spawn(pod, full, limit_s)
        self.out = b""
        self.err = b""

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM to the helper, then SIGKILL after ``grace`` s; collects the output."""
        self.proc.signal("TERM")
        try:
            self.out, self.err = self.proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.signal("KILL")
            self.out, self.err = self.proc.communicate()

    def wait(self, timeout: float | None = None) -> None:
        try:
            self.out, self.err = self.proc.communicate(timeout=timeout if timeout is not None else self.limit_s + 5)
        except subprocess.TimeoutExpired:
            self.stop()

    def json(self) -> dict:
        lines = self.out.decode(errors="replace").strip().splitlines()
        try:
            return json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = self.err.decode(errors="replace").strip().splitlines()
            raise InfrastructureError(f"helper in pod {self.pod.name} exited with {self.proc.returncode}: "
                                      f"{tail[-1] if tail else 'no output'}") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def run(cluster, pod, argv: list[str], timeout: float) -> dict:
    """Run ``python -m ...`` synchronously in ``pod`` (any cluster with ``exec_in``); parsed JSON."""
    exec_in = getattr(cluster, "exec_in", None)
    if exec_in is None:
        raise Unsupported(f"provider {cluster.provider} cannot run helper programs in pods")
    full = argv if argv[:1] != ["-m"] else [sys.executable, *argv]
    out = exec_in(pod, full, timeout)
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (IndexError, ValueError) as e:
        raise InfrastructureError(f"helper in pod {pod.name}: unreadable output ({e})") from None
