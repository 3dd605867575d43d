"""Per-namespace sysctls a test changes in a pod, restored afterwards and checked by reading them back.

``with kept(cluster, pod, ["net.ipv4.tcp_slow_start_after_idle"]): write(cluster, pod, {...})``
reads the values on entry and, on exit (also when the block fails or skips), writes them back and
reads them again. A value that did not come back raises ``InfrastructureError`` naming the sysctl,
the pod, the value it should have and the value it holds.
"""

from __future__ import annotations

import contextlib

from netslo.core.errors import InfrastructureError


def read(cluster, pod, key: str) -> str:
    """The value of sysctl ``key`` in the pod's namespace (as ``sysctl -n`` prints it)."""
    return cluster.exec_in(pod, ["sysctl", "-n", key]).decode().strip()


def write(cluster, pod, settings: dict[str, str]) -> None:
    """Write sysctls in the pod's namespace; InfrastructureError when the kernel refuses one."""
    cluster.exec_in(pod, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items())])


def restore(cluster, pod, before: dict[str, str]) -> None:
    """Write ``before`` back, one sysctl at a time, then read each again; one error naming all that stayed."""
    problems = []
    for key, value in before.items():
        why = ""
        try:
            write(cluster, pod, {key: value})
        except InfrastructureError as e:
            why = f" (write failed: {e})"
        now = read(cluster, pod, key)
        if now.split() != value.split():
            problems.append(f"{key} in pod {pod.name}: should be {value!r} again, holds {now!r}{why}")
    if problems:
        raise InfrastructureError("sysctl not restored: " + "; ".join(problems))


@contextlib.contextmanager
def kept(cluster, pod, keys):
    """The values of ``keys`` on entry come back on exit (checked); yields them as a dict."""
    before = {key: read(cluster, pod, key) for key in keys}
    try:
        yield dict(before)
    finally:
        restore(cluster, pod, before)
