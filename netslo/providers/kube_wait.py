"""Readiness waits with deadlines, and one-line status summaries of Kubernetes objects.

A wait that runs out raises ``InfrastructureError`` naming the component and its last status, e.g.
``CNI calico: DaemonSet kube-system/calico-node not ready after 300s; last status: 0/2 ready; pod
calico-node-x7k: Init:ImagePullBackOff (...)``. Times are seconds.
"""

from __future__ import annotations

import time
from typing import Callable

from ..errors import InfrastructureError

POLL = 0.5  # s between polls
# Container states that can never turn into "running" without someone changing the pod spec.
HOPELESS = {"ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError"}


def wait_until(component: str, timeout: float, check: Callable[[], tuple[bool, str]],
               poll: float = POLL, clock=time.monotonic, sleep=time.sleep) -> str:
    """Call ``check() -> (ready, status)`` until ready; return the status.

    Raises InfrastructureError '<component>: not ready after <timeout>s; last status: <status>' when
    the deadline passes, or at once when ``check`` raises ``Hopeless`` (it never can be ready).
    """
    deadline = clock() + timeout
    status = "never observed"
    while True:
        try:
            ready, status = check()
        except Hopeless as e:
            raise InfrastructureError(f"{component}: cannot become ready: {e}") from None
        except InfrastructureError as e:  # a failed poll is a status, not the end
            ready, status = False, str(e)
        if ready:
            return status
        if clock() >= deadline:
            raise InfrastructureError(f"{component}: not ready after {timeout:.0f}s; last status: {status}")
        sleep(poll)


class Hopeless(Exception):
    """Raised by a check when the object can never become ready (e.g. ErrImageNeverPull)."""


def _container_state(cs: dict) -> str:
    state = cs.get("state", {})
    if "waiting" in state:
        w = state["waiting"]
        msg = (w.get("message") or "").strip().splitlines()
        return f"waiting {w.get('reason', '?')}" + (f" ({msg[0][:160]})" if msg else "")
    if "terminated" in state:
        t = state["terminated"]
        return f"terminated {t.get('reason', '?')} exit {t.get('exitCode', '?')}"
    if "running" in state:
        return "running" + ("" if cs.get("ready") or cs.get("started") else ", not started")
    return "unknown"


def pod_summary(pod: dict) -> str:
    """'phase=Pending; Unschedulable: 0/1 nodes ...; agent: waiting ErrImageNeverPull (...)'."""
    st = pod.get("status", {})
    parts = [f"phase={st.get('phase', '?')}"]
    for c in st.get("conditions", []):
        if c.get("status") != "True" and c.get("reason"):
            parts.append(f"{c['type']}={c['reason']}" + (f": {c['message'][:160]}" if c.get("message") else ""))
    for cs in st.get("initContainerStatuses", []) + st.get("containerStatuses", []):
        parts.append(f"{cs['name']}: {_container_state(cs)}" + (f" restarts={cs['restartCount']}"
                                                                   if cs.get("restartCount") else ""))
    return "; ".join(parts)


def pod_ready(pod: dict) -> tuple[bool, str]:
    """(Ready condition is True, summary); raises Hopeless for states that never recover."""
    st = pod.get("status", {})
    for cs in st.get("initContainerStatuses", []) + st.get("containerStatuses", []):
        reason = cs.get("state", {}).get("waiting", {}).get("reason")
        if reason in HOPELESS:
            raise Hopeless(pod_summary(pod))
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions", []))
    return ready, pod_summary(pod)


def node_ready(node: dict) -> tuple[bool, str]:
    conds = {c["type"]: c for c in node.get("status", {}).get("conditions", [])}
    r = conds.get("Ready", {})
    ok = r.get("status") == "True"
    return ok, f"Ready={r.get('status', '?')} ({r.get('reason', '')}: {r.get('message', '')[:160]})"


def daemonset_ready(ds: dict) -> tuple[bool, str]:
    st = ds.get("status", {})
    want = st.get("desiredNumberScheduled", 0)
    ready = st.get("numberReady", 0)
    updated = st.get("updatedNumberScheduled", 0)
    ok = want > 0 and ready == want and updated == want
    return ok, f"{ready}/{want} ready, {updated} updated"


def deployment_ready(dep: dict) -> tuple[bool, str]:
    st = dep.get("status", {})
    want = dep.get("spec", {}).get("replicas", 1)
    avail = st.get("availableReplicas", 0)
    updated = st.get("updatedReplicas", 0)
    ok = avail >= want and updated >= want
    return ok, f"{avail}/{want} available, {updated} updated"


_READY_FN = {"DaemonSet": daemonset_ready, "Deployment": deployment_ready}


def wait_workload(kubectl, kind: str, namespace: str, name: str, component: str, timeout: float,
                  poll: float = POLL) -> str:
    """Wait for a DaemonSet/Deployment to be fully ready.

    The error names ``component`` (e.g. 'CNI calico'), the object, its counts and the summary of each
    of its pods that is not Ready, e.g. '0/1 ready; pod calico-node-x: Init:ImagePullBackOff ...'.
    """
    if kind not in _READY_FN:
        raise ValueError(f"kind: value {kind!r} — expected one of {sorted(_READY_FN)}")

    def check():
        obj = kubectl.get(kind.lower(), name, namespace, missing_ok=True)
        if obj is None:
            return False, "not created"
        ok, status = _READY_FN[kind](obj)
        if ok:
            return True, status
        sel = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
        selector = ",".join(f"{k}={v}" for k, v in sorted(sel.items()))
        pods = kubectl.get("pods", namespace=namespace, selector=selector) if selector else []
        bad = [f"pod {p['metadata']['name']}: {pod_summary(p)}" for p in pods if not pod_ready_safe(p)]
        return False, "; ".join([status] + bad[:3])
    return wait_until(f"{component}: {kind} {namespace}/{name}", timeout, check, poll=poll)


def pod_ready_safe(pod: dict) -> bool:
    try:
        return pod_ready(pod)[0]
    except Hopeless:
        return False
