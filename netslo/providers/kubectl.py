"""The one boundary to a Kubernetes cluster: the real ``kubectl`` command line.

Every provider talks to its cluster through ``Kubectl``: API objects go in and out as JSON, agent
output (npz bytes) comes back from ``kubectl exec`` stdout untouched. Failures become
``InfrastructureError`` naming the command and kubectl's own last words; a missing kubectl binary is
``Unsupported`` (the platform lacks the tool). Timeouts are in seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from ..errors import InfrastructureError, Unsupported

REQUEST_TIMEOUT = 30.0  # s, for ordinary API calls (not exec)


def find_kubectl(explicit: str | None = None) -> str:
    """The kubectl binary: ``explicit``, else $NETSLO_KUBECTL, else ``kubectl`` on PATH."""
    name = explicit or os.environ.get("NETSLO_KUBECTL") or "kubectl"
    path = name if os.sep in name else shutil.which(name)
    if not path or not os.access(path, os.X_OK):
        raise Unsupported(f"kubectl not found ({name!r}); install it or set NETSLO_KUBECTL")
    return path


def _tail(text: bytes | str, n: int = 3) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) or "(no output)"


class Kubectl:
    """Runs ``kubectl [--kubeconfig K] [--context C] ARGS``."""

    def __init__(self, binary: str | None = None, kubeconfig: str | None = None,
                 context: str | None = None):
        self.binary = find_kubectl(binary)
        self.kubeconfig = kubeconfig
        self.context = context

    def argv(self, args: list[str]) -> list[str]:
        """The full command line for ``args``."""
        base = [self.binary]
        if self.kubeconfig:
            base += ["--kubeconfig", self.kubeconfig]
        if self.context:
            base += ["--context", self.context]
        return base + [str(a) for a in args]

    def run(self, args: list[str], *, input: bytes | None = None, timeout: float = REQUEST_TIMEOUT,
            check: bool = True, what: str | None = None) -> subprocess.CompletedProcess:
        """Run kubectl; stdout/stderr as bytes. ``what`` names the step in errors."""
        argv = self.argv(args)
        label = what or "kubectl " + " ".join(str(a) for a in args[:4])
        try:
            proc = subprocess.run(argv, input=input, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise InfrastructureError(f"{label}: no answer within {timeout:.0f}s "
                                      f"(stderr: {_tail(e.stderr or b'')})") from None
        if check and proc.returncode != 0:
            raise InfrastructureError(f"{label}: kubectl exit {proc.returncode}: {_tail(proc.stderr)}")
        return proc

    def json(self, args: list[str], **kw):
        """``kubectl ARGS -o json`` parsed."""
        proc = self.run(list(args) + ["-o", "json", f"--request-timeout={REQUEST_TIMEOUT:.0f}s"], **kw)
        return json.loads(proc.stdout)

    def get(self, kind: str, name: str | None = None, namespace: str | None = None,
            selector: str | None = None, missing_ok: bool = False):
        """One object (dict) or, without ``name``, the list's ``items``; None if missing and allowed."""
        args = ["get", kind] + ([name] if name else [])
        if namespace:
            args += ["-n", namespace]
        if selector:
            args += ["-l", selector]
        if missing_ok and name:
            args += ["--ignore-not-found"]
            proc = self.run(args + ["-o", "json"], what=f"get {kind}/{name}")
            return json.loads(proc.stdout) if proc.stdout.strip() else None
        data = self.json(args, what=f"get {kind}{'/' + name if name else ''}")
        return data if name else data.get("items", [])

    def create(self, obj: dict | list, what: str | None = None) -> None:
        """``kubectl create -f -`` with one object or a list of objects."""
        self.run(["create", "-f", "-"], input=_as_json(obj), what=what or "create")

    def apply(self, obj: dict | list | bytes, what: str | None = None, server_side: bool = False) -> None:
        """``kubectl apply -f -`` (manifests, e.g. CNI installs)."""
        args = ["apply", "-f", "-"] + (["--server-side", "--force-conflicts"] if server_side else [])
        data = obj if isinstance(obj, bytes) else _as_json(obj)
        self.run(args, input=data, timeout=120, what=what or "apply")

    def delete(self, kind: str, name: str, namespace: str | None = None, wait: bool = False) -> None:
        args = ["delete", kind, name, "--ignore-not-found", f"--wait={'true' if wait else 'false'}"]
        if namespace:
            args += ["-n", namespace]
        self.run(args, what=f"delete {kind}/{name}")

    def exec(self, namespace: str, pod: str, container: str, command: list[str],
             timeout: float, input: bytes | None = None) -> bytes:
        """``kubectl exec`` without a TTY: stdout bytes exactly as the command wrote them
        (``input``: bytes for the command's stdin, via ``-i``)."""
        flags = ["-i"] if input is not None else []
        proc = self.run(["exec", *flags, "-n", namespace, pod, "-c", container, "--"] + list(command),
                        input=input, timeout=timeout, check=False, what=f"exec in pod {namespace}/{pod}")
        if proc.returncode != 0:
            raise InfrastructureError(f"exec {' '.join(command[:5])} in pod {namespace}/{pod}: "
                                      f"exit {proc.returncode}: {_tail(proc.stderr)}")
        return proc.stdout


def _as_json(obj) -> bytes:
    if isinstance(obj, list):
        obj = {"apiVersion": "v1", "kind": "List", "items": obj}
    return json.dumps(obj).encode()
