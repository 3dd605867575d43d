"""Warm agents in a Kubernetes cluster's pods: ``python -m netslo.agent session`` behind one exec
stream each (``netslo.agent.session`` has the protocol).

``AgentSessions(api, namespace, container)`` keeps, per pod, the sessions it opened; ``call(pod,
argv, env, timeout)`` runs one agent command in a session that is free (opening another when all of
the pod's are busy: two probes at once from one pod each get their own) and returns its exit code and
output like ``KubeApi.run``. ``warm(pod)`` opens a pod's first session ahead of use (its interpreter
starts while the caller does other work); ``await_warm(pods, timeout)`` returns once those sessions
answer, so a first measurement never shares the CPU with their start. A command that does not answer
within its timeout closes its session (the next call opens a fresh one) and is an
``InfrastructureError``; so is a session whose stream ends, with the session's stderr. ``close()``
ends them all (end of stdin ends the agent).
"""

from __future__ import annotations

import threading
import time

from netslo.agent.session import parse_reply, request_line
from netslo.core.errors import InfrastructureError
from netslo.providers.kube.api import ExecResult, tail

COMMAND = ["python", "-m", "netslo.agent", "session"]


class AgentSession:
    """One warm agent in one pod's container, over one exec stream (stdin kept open)."""

    def __init__(self, api, namespace: str, pod: str, container: str):
        self.where = f"netslo agent session in pod {namespace}/{pod}"
        self.ws = api.open_exec(namespace, pod, container, COMMAND, stdin=True)
        self.lock = threading.Lock()
        self._out = bytearray()
        self._err = bytearray()

    def call(self, argv: list[str], env: dict[str, str], timeout: float) -> ExecResult:
        """Run one agent command; its exit code, stdout and stderr. The caller holds ``lock``."""
        what = f"{self.where}: {' '.join(argv[:3])}"
        deadline = time.monotonic() + timeout
        try:
            self.ws.write_stdin(request_line(argv, env))
            while True:
                reply = parse_reply(self._out)
                if reply is not None:
                    return ExecResult(*reply)
                if not self.ws.is_open():
                    raise InfrastructureError(f"{what}: the session ended ({tail(bytes(self._err))})")
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise InfrastructureError(f"{what}: no answer within {timeout:.0f}s "
                                              f"(session stderr: {tail(bytes(self._err), 1)})")
                self.ws.update(timeout=min(left, 5.0))
                self._out += self.ws.read_channel(1)
                self._err += self.ws.read_channel(2)
        except InfrastructureError:
            raise
        except Exception as e:     # the stream broke (websocket closed, connection reset)
            raise InfrastructureError(f"{what}: the exec stream failed ({type(e).__name__}: {e}; "
                                      f"session stderr: {tail(bytes(self._err), 1)})") from e

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:   # already gone: nothing left to end
            pass


class AgentSessions:
    """The warm agents of one run's pods."""

    def __init__(self, api, namespace: str, container: str):
        self.api, self.namespace, self.container = api, namespace, container
        self._by_pod: dict[str, list[AgentSession]] = {}
        self._guard = threading.Lock()

    def _open(self, pod: str) -> AgentSession:
        s = AgentSession(self.api, self.namespace, pod, self.container)
        with self._guard:
            self._by_pod.setdefault(pod, []).append(s)
        return s

    def warm(self, pod: str) -> None:
        """Open the pod's first session now (its interpreter starts while the caller goes on)."""
        with self._guard:
            if self._by_pod.get(pod):
                return
        self._open(pod)

    def await_warm(self, pods: list[str], timeout: float) -> None:
        """Until the first session of each of ``pods`` answers an empty request (it has started);
        InfrastructureError naming the pod whose session ended or did not answer within ``timeout`` s."""
        for pod in pods:
            self.warm(pod)
        for pod in pods:
            res = self.call(pod, [], {}, timeout)
            if res.returncode:   # an agent of another version, that does not know the empty request
                raise InfrastructureError(f"netslo agent session in pod {self.namespace}/{pod}: exit "
                                          f"{res.returncode} for the readiness request: {tail(res.stderr)}")

    def _acquire(self, pod: str) -> AgentSession:
        with self._guard:
            for s in self._by_pod.get(pod, []):
                if s.ws.is_open() and s.lock.acquire(blocking=False):
                    return s
        s = self._open(pod)
        s.lock.acquire()
        return s

    def call(self, pod: str, argv: list[str], env: dict[str, str], timeout: float) -> ExecResult:
        s = self._acquire(pod)
        try:
            return s.call(argv, env, timeout)
        except InfrastructureError:
            self._drop(pod, s)
            raise
        finally:
            s.lock.release()

    def _drop(self, pod: str, s: AgentSession) -> None:
        s.close()
        with self._guard:
            if s in self._by_pod.get(pod, []):
                self._by_pod[pod].remove(s)

    def forget(self, pod: str) -> None:
        """End a pod's sessions (the pod is going away)."""
        with self._guard:
            sessions = self._by_pod.pop(pod, [])
        for s in sessions:
            s.close()

    def close(self) -> None:
        with self._guard:
            pods = list(self._by_pod)
        for pod in pods:
            self.forget(pod)
