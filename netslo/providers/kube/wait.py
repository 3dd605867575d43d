"""Waits on Kubernetes objects by watch, with deadlines, and one-line status summaries of them.

``watch_until`` lists the objects (one by name, or a label selection), then follows them with a watch
from the list's resourceVersion (re-listing when the server has expired it) until a check says done;
nothing polls. A wait that runs out raises ``InfrastructureError`` naming the component, its last
status and the objects' last events, e.g. ``CNI calico: DaemonSet kube-system/calico-node: not ready
after 300s; last status: 0/2 ready, 2 updated; pod calico-node-x7k: phase=Pending; install-cni: waiting
ImagePullBackOff (...); events: Failed: ...``. ``wait_until`` is the plain deadline loop for conditions
that are not API objects. Times are seconds.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from netslo.core.errors import InfrastructureError
from netslo.providers.kube.api import Expired

log = logging.getLogger("netslo.kube")
POLL = 0.5  # s between checks of wait_until (non-API conditions only)
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


# Taints a node carries while it starts (the node lifecycle controller's, and a CNI's until its agent
# runs there: Cilium's agent-not-ready, which its operator removes a moment after the agent is Ready).
# A node with one takes no pods yet, so it is not ready for the gate either: on a fresh kind + Cilium
# cluster (2026-11-28) the control-plane node still had Cilium's taint when the nodes were listed, the
# gate saw one node and skipped every cross-node test.
STARTUP_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                  "node.kubernetes.io/network-unavailable", "node.cloudprovider.kubernetes.io/uninitialized",
                  "node.cilium.io/agent-not-ready")


def node_ready(node: dict) -> tuple[bool, str]:
    """Ready condition True and none of ``STARTUP_TAINTS``; the status for messages."""
    conds = {c["type"]: c for c in node.get("status", {}).get("conditions", [])}
    r = conds.get("Ready", {})
    starting = [t["key"] for t in node.get("spec", {}).get("taints", []) or [] if t.get("key") in STARTUP_TAINTS]
    ok = r.get("status") == "True" and not starting
    return ok, (f"Ready={r.get('status', '?')} ({r.get('reason', '')}: {r.get('message', '')[:160]})"
                + (f"; start-up taint {', '.join(starting)}" if starting else ""))


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


def watch_until(api, kind: str, component: str, timeout: float,
                check: Callable[[dict[str, dict]], tuple[bool, str]], *, namespace: str | None = None,
                name: str | None = None, selector: str | None = None,
                explain: Callable[[dict[str, dict]], list[str]] | None = None, verb: str = "ready",
                clock=time.monotonic) -> str:
    """Follow ``kind`` objects (``name``, or label ``selector``, in ``namespace``) until
    ``check(objects) -> (done, status)`` is done; return the status. ``objects``: name -> object as
    last seen (absent once deleted).

    One list, then watches from its resourceVersion (again from the last one seen when the server
    ends a watch, a new list when it has expired that version). ``check`` raising ``Hopeless`` ends
    the wait at once; the deadline raises InfrastructureError '<component>: not <verb> after <T>s;
    last status: <status>[; <explain(objects)>...]'."""
    deadline = clock() + timeout
    objects: dict[str, dict] = {}
    rv = None
    status = "never observed"

    def judge() -> bool:
        nonlocal status
        try:
            done, status = check(objects)
        except Hopeless as e:
            raise _Hopeless(f"{component}: cannot become {verb}: " +
                            "; ".join([str(e)] + _explained(explain, objects))) from None
        return done

    try:
        while True:
            if rv is None:
                try:
                    items, rv = api.list(kind, namespace, name=name, selector=selector)
                    objects = {o["metadata"]["name"]: o for o in items}
                except InfrastructureError as e:   # an apiserver hiccup is a status, not the end
                    status, rv = str(e), None
            if rv is not None and judge():
                return status
            left = deadline - clock()
            if left <= 0:
                break
            if rv is None:
                time.sleep(min(1.0, left))          # the list failed: try it again shortly
                continue
            try:
                for etype, obj in api.watch(kind, namespace, name=name, selector=selector,
                                            resource_version=rv, timeout=left):
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype == "BOOKMARK":
                        continue
                    key = obj["metadata"]["name"]
                    if etype == "DELETED":
                        objects.pop(key, None)
                    else:
                        objects[key] = obj
                    if judge():
                        return status
                    if clock() >= deadline:
                        break
            except Expired:
                rv = None
            except InfrastructureError as e:
                log.debug("%s: watch ended (%s); listing again", component, e)
                status, rv = str(e), None
            if clock() >= deadline:
                break
    except _Hopeless as e:
        raise InfrastructureError(str(e)) from None
    raise InfrastructureError("; ".join([f"{component}: not {verb} after {timeout:.0f}s; last status: {status}"]
                                        + _explained(explain, objects)))


class _Hopeless(Exception):
    """Carries a Hopeless check's message out of the watch loop (which retries InfrastructureErrors)."""


def _explained(explain, objects) -> list[str]:
    if explain is None:
        return []
    try:
        return explain(objects)
    except InfrastructureError as e:
        return [f"(details unreadable: {e})"]


def _events(api, namespace: str, name: str) -> list[str]:
    ev = api.events(namespace, name)
    return [f"events of {name}: " + " | ".join(ev)] if ev else []


def wait_pods(api, namespace: str, names: list[str], selector: str, timeout: float,
              clock=time.monotonic, on_running: Callable[[str], None] | None = None) -> list[dict]:
    """Watch the pods of ``selector`` in ``namespace`` until every one of ``names`` is Ready (one
    watch for all); their objects in that order. An image that can never start fails at once; the
    error names the pods not ready with their status and the last events of the first of them.
    ``on_running(name)`` is called once per pod as soon as all its containers run (before it is Ready)."""
    waiting: list[str] = []
    seen: dict[str, dict] = {}
    running: set[str] = set()

    def check(objects):
        seen.update(objects)
        if on_running is not None:
            for n in names:
                if n not in running and n in objects and containers_running(objects[n]):
                    running.add(n)
                    on_running(n)
        waiting[:] = [n for n in names if n not in objects or not pod_ready(objects[n])[0]]
        return not waiting, "; ".join(f"pod {n}: {pod_ready(objects[n])[1] if n in objects else 'not created'}"
                                      for n in waiting) or f"{len(names)} pods Ready"
    component = f"pod {namespace}/{names[0]}" if len(names) == 1 else f"pods {', '.join(names)} in {namespace}"
    watch_until(api, "pod", component, timeout, check,
                namespace=namespace, selector=selector, clock=clock,
                explain=lambda _: _events(api, namespace, waiting[0]) if waiting else [])
    return [seen[n] for n in names]


def containers_running(pod: dict) -> bool:
    """Whether every container of ``pod`` has a running process (an exec into it can start)."""
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (cs.get("state") or {}) for cs in statuses)


def wait_nodes_ready(api, component: str, timeout: float) -> list[dict]:
    """Watch the nodes until there is one and every one is Ready; the node objects."""
    seen: dict[str, list] = {"nodes": []}

    def check(objects):
        seen["nodes"] = list(objects.values())
        if not objects:
            return False, "no nodes"
        bad = [f"{k}: {node_ready(n)[1]}" for k, n in sorted(objects.items()) if not node_ready(n)[0]]
        return not bad, "; ".join(bad) or f"{len(objects)} nodes Ready"
    watch_until(api, "node", component, timeout, check)
    return seen["nodes"]


def wait_workload(api, kind: str, namespace: str, name: str, component: str, timeout: float) -> str:
    """Watch a DaemonSet/Deployment until it is fully ready.

    The error names ``component`` (e.g. 'CNI calico'), the object, its counts, the summary of each of
    its pods that is not Ready and their last events, e.g. '0/1 ready; pod calico-node-x: ...'."""
    if kind not in _READY_FN:
        raise ValueError(f"kind: value {kind!r} — expected one of {sorted(_READY_FN)}")

    def check(objects):
        obj = objects.get(name)
        if obj is None:
            return False, "not created"
        return _READY_FN[kind](obj)

    def explain(objects):
        obj = objects.get(name)
        sel = (obj or {}).get("spec", {}).get("selector", {}).get("matchLabels", {})
        if not sel:
            return []
        pods = api.get("pods", namespace=namespace, selector=",".join(f"{k}={v}" for k, v in sorted(sel.items())))
        bad = [p for p in pods if not pod_ready_safe(p)][:3]
        out = [f"pod {p['metadata']['name']}: {pod_summary(p)}" for p in bad]
        for p in bad[:1]:
            out += _events(api, namespace, p["metadata"]["name"])
        return out
    return watch_until(api, kind.lower(), f"{component}: {kind} {namespace}/{name}", timeout, check,
                       namespace=namespace, name=name, explain=explain)


def wait_endpoints(api, namespace: str, service: str, component: str, timeout: float, every: bool = False) -> str:
    """Watch Service ``service``'s EndpointSlices until one endpoint is ready (``every``: until each
    endpoint they list is, and at least one)."""
    def endpoints(slices):
        listed = [ep for s in slices.values() for ep in s.get("endpoints") or []]
        ready = [ep for ep in listed if (ep.get("conditions") or {}).get("ready")]
        done = bool(ready) and (not every or len(ready) == len(listed))
        return done, f"{len(ready)} of {len(listed)} endpoints ready"
    return watch_until(api, "endpointslice", component, timeout, endpoints, namespace=namespace,
                       selector=f"kubernetes.io/service-name={service}")


def wait_deleted(api, kind: str, name: str, namespace: str | None, timeout: float) -> None:
    """Watch until ``kind`` ``name`` is gone; the error says what is still there."""
    def check(objects):
        obj = objects.get(name)
        if obj is None:
            return True, "deleted"
        st = obj.get("status", {})
        conds = [f"{c['type']}: {c.get('message', '')[:160]}" for c in st.get("conditions", []) or []
                 if c.get("status") == "True" and c.get("type", "").startswith("Namespace")]
        return False, "; ".join([f"phase={st.get('phase', '?')}"] + conds)

    def explain(_):
        if kind.lower() not in ("namespace", "namespaces"):
            return []
        pods = api.get("pods", namespace=name)
        return [f"{len(pods)} pods left" + (f": {', '.join(p['metadata']['name'] for p in pods[:5])}" if pods else "")]
    where = f"{namespace}/{name}" if namespace else name
    watch_until(api, kind, f"deletion of {kind} {where}", timeout, check, namespace=namespace, name=name,
                explain=explain, verb="gone")


def pod_ready_safe(pod: dict) -> bool:
    try:
        return pod_ready(pod)[0]
    except Hopeless:
        return False
