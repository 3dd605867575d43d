"""The one boundary to a Kubernetes cluster: the ``kubernetes`` Python client.

``KubeApi(kubeconfig, context)`` loads a kubeconfig the way kubectl does (a path or a
``os.pathsep``-separated list, else ``$KUBECONFIG``, else ``~/.kube/config``, else the in-cluster
service account; any context; token, client-certificate and ``exec`` credential plugins) and offers:

- objects as the server's JSON (dicts): ``get``, ``list``, ``create``, ``delete``; ``apply`` is
  server-side apply of any kind (CNI manifests, CRDs included);
- ``watch``: events of one object or a label selection from a resourceVersion on, ending at a
  server-side timeout (the waits of ``kube_wait`` are built on it, never on polling);
- ``events``: the last events of an object, for error messages;
- ``exec``/``run``: a command in a container through the API's exec stream (websocket,
  ``v5.channel.k8s.io``): stdout bytes exactly as written (the agent's npz), stdin with a real end of
  file, the exit code. docs/kubernetes.md has the measurement against ``kubectl exec``.

Every call is logged on ``netslo.kube`` at DEBUG (verb, kind, namespace/name or selector). Failures
are ``InfrastructureError`` naming the call and the API's own message; a kubeconfig that does not
exist is one line naming the path. Timeouts are seconds.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Iterator

import urllib3
import yaml

from netslo.core.errors import InfrastructureError


class _Deferred:
    """A module imported on its first attribute access: the ``kubernetes`` client takes ~1.2 s to
    import (its generated models), which every pytest session that collects a module importing this
    one would pay, also on the embedded provider that never talks to an API server."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)


client = _Deferred("kubernetes.client")
config = _Deferred("kubernetes.config")
dynamic = _Deferred("kubernetes.dynamic")
_stream = _Deferred("kubernetes.stream")
_watch = _Deferred("kubernetes.watch.watch")

log = logging.getLogger("netslo.kube")

REQUEST_TIMEOUT = 30.0      # s, for one ordinary API call
FIELD_MANAGER = "netslo"    # who owns the fields netslo creates or applies
DEFAULT_KUBECONFIG = "~/.kube/config"
# kind (as written in manifests and by callers, lower case, singular or plural) -> (API group class
# of kubernetes.client, method suffix, namespaced). The typed client's read_/list_/create_/delete_ methods.
KINDS = {
    "namespace": ("CoreV1Api", "namespace", False),
    "node": ("CoreV1Api", "node", False),
    "pod": ("CoreV1Api", "pod", True),
    "service": ("CoreV1Api", "service", True),
    "serviceaccount": ("CoreV1Api", "service_account", True),
    "event": ("CoreV1Api", "event", True),
    "configmap": ("CoreV1Api", "config_map", True),
    "daemonset": ("AppsV1Api", "daemon_set", True),
    "deployment": ("AppsV1Api", "deployment", True),
    "endpointslice": ("DiscoveryV1Api", "endpoint_slice", True),
    "networkpolicy": ("NetworkingV1Api", "network_policy", True),
}
CRD_WAIT = 30.0   # s an applied object may wait for its kind to be served (a CRD applied just before)


def _kind_key(kind: str) -> str:
    k = kind.lower()
    if k in KINDS:
        return k
    if k.endswith("s") and k[:-1] in KINDS:
        return k[:-1]
    raise ValueError(f"kind: value {kind!r} — expected one of {', '.join(sorted(KINDS))}")


def kubeconfig_files(kubeconfig: str | None) -> list[str]:
    """The kubeconfig files to load: ``kubeconfig``, else $KUBECONFIG, else ~/.kube/config."""
    paths = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    return [os.path.expanduser(p) for p in paths.split(os.pathsep) if p]


def check_kubeconfig(kubeconfig: str | None = None) -> list[str] | None:
    """The kubeconfig files to load, or None for the in-cluster service account (no kubeconfig
    anywhere, inside a pod). A named file that does not exist is an InfrastructureError naming it."""
    files = kubeconfig_files(kubeconfig)
    missing = [f for f in files if not os.path.exists(f)]
    named = kubeconfig or os.environ.get("KUBECONFIG")
    if missing and not named and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    if missing:
        source = "the kubeconfig option" if kubeconfig else "$KUBECONFIG" if named else "the default"
        raise InfrastructureError(f"kubeconfig {', '.join(missing)}: no such file (from {source}; "
                                  f"is the cluster up?)")
    return files


def _first_current_context(files: list[str]) -> str | None:
    """kubectl's rule for a list of kubeconfigs: the first file that sets current-context wins (the
    client alone would take the last file's, even an empty one)."""
    if len(files) < 2:
        return None
    for f in files:
        with open(f) as fh:
            doc = yaml.safe_load(fh) or {}
        if isinstance(doc, dict) and doc.get("current-context"):
            return doc["current-context"]
    return None


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` for ``kubeconfig`` (see ``check_kubeconfig``) and ``context``; a missing file, a
    context that is not in it, or a file the client cannot read is one InfrastructureError line
    naming the file."""
    files = check_kubeconfig(kubeconfig)
    if files is None:
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)
        return client.ApiClient(cfg)
    where = os.pathsep.join(files)
    try:
        context = context or _first_current_context(files)
        api = config.new_client_from_config(config_file=where, context=context, persist_config=False)
    except (config.ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as e:
        what = f"context {context!r} of " if context else ""
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InfrastructureError(f"kubeconfig {what}{where}: {first}") from None
    api.user_agent = "netslo"
    return api


def _api_message(e: client.ApiException) -> str:
    """'404 NotFound: pods "x" not found' from an ApiException's Status body."""
    body = e.body or (e.data if isinstance(getattr(e, "data", None), (str, bytes)) else None)
    try:
        status = json.loads(body) if body else {}
    except (TypeError, ValueError):
        status = {}
    msg = status.get("message") or (str(body)[:200] if body else "") or e.reason or ""
    return f"{e.status} {status.get('reason') or e.reason or ''}: {msg}".strip()


@dataclass
class ExecResult:
    """What a command in a container left: exit code, stdout and stderr bytes."""

    returncode: int
    stdout: bytes
    stderr: bytes


class KubeApi:
    """A cluster reached through a kubeconfig (and context); see the module docstring."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None):
        self.kubeconfig = kubeconfig
        self.context = context
        self.client = load_api_client(kubeconfig, context)
        self._apis: dict[str, object] = {}
        self._dynamic: dynamic.DynamicClient | None = None

    def __repr__(self) -> str:
        return f"KubeApi({self.client.configuration.host}, context={self.context!r})"

    # ---- plumbing -----------------------------------------------------------------------------
    def _group(self, name: str):
        """The typed API group ``kubernetes.client.<name>`` (e.g. CoreV1Api) on this client."""
        if name not in self._apis:
            self._apis[name] = getattr(client, name)(self.client)
        return self._apis[name]

    def _call(self, what: str, fn, *args, missing_ok: bool = False, timeout: float = REQUEST_TIMEOUT, **kw):
        """``fn(*args, **kw)`` with raw JSON back (dict); None for 404 when ``missing_ok``."""
        t0 = time.monotonic()
        try:
            resp = fn(*args, _preload_content=False, _request_timeout=timeout, **kw)
        except client.ApiException as e:
            if missing_ok and e.status == 404:
                log.debug("api %s: not found (%.0f ms)", what, (time.monotonic() - t0) * 1e3)
                return None
            raise InfrastructureError(f"{what}: {_api_message(e)}") from None
        except urllib3.exceptions.HTTPError as e:
            raise InfrastructureError(f"{what}: cannot reach {self.client.configuration.host}: "
                                      f"{getattr(e, 'reason', None) or e}") from None
        log.debug("api %s: %s (%.0f ms)", what, resp.status, (time.monotonic() - t0) * 1e3)
        return json.loads(resp.data) if resp.data else {}

    def _fn(self, verb: str, kind: str, namespace: str | None):
        group, suffix, namespaced = KINDS[_kind_key(kind)]
        api = self._group(group)
        if not namespaced:
            return getattr(api, f"{verb}_{suffix}"), ()
        if namespace is None:
            if verb != "list":
                raise ValueError(f"{kind}: {verb} needs a namespace")
            return getattr(api, f"list_{suffix}_for_all_namespaces"), ()
        return getattr(api, f"{verb}_namespaced_{suffix}"), (namespace,)

    @staticmethod
    def _where(kind: str, name: str | None, namespace: str | None, selector: str | None = None) -> str:
        path = "/".join(p for p in (namespace, name) if p)
        return f"{kind}{' ' + path if path else ''}{' -l ' + selector if selector else ''}"

    # ---- objects ----------------------------------------------------------------------------
    def get(self, kind: str, name: str | None = None, namespace: str | None = None,
            selector: str | None = None, missing_ok: bool = False):
        """One object (dict), or without ``name`` the list's items; None if missing and allowed."""
        if name is None:
            return self.list(kind, namespace, selector=selector)[0]
        fn, args = self._fn("read", kind, namespace)
        return self._call(f"get {self._where(kind, name, namespace)}", fn, name, *args, missing_ok=missing_ok)

    def list(self, kind: str, namespace: str | None = None, *, name: str | None = None,
             selector: str | None = None, field_selector: str | None = None) -> tuple[list[dict], str]:
        """(items, the list's resourceVersion): what a watch of the same selection starts from."""
        fields = ",".join(f for f in (f"metadata.name={name}" if name else None, field_selector) if f)
        kw = {k: v for k, v in (("label_selector", selector), ("field_selector", fields)) if v}
        fn, args = self._fn("list", kind, namespace)
        data = self._call(f"list {self._where(kind, name, namespace, selector)}", fn, *args, **kw)
        return data.get("items") or [], data.get("metadata", {}).get("resourceVersion", "")

    def create(self, obj: dict | list, what: str | None = None) -> None:
        """Create one object (or each of a list); the kind comes from the object."""
        for o in obj if isinstance(obj, list) else [obj]:
            meta = o.get("metadata", {})
            fn, args = self._fn("create", o["kind"], meta.get("namespace"))
            self._call(what or f"create {self._where(o['kind'], meta.get('name'), meta.get('namespace'))}",
                       fn, *args, body=o, field_manager=FIELD_MANAGER)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete (absent is fine); to wait until it is gone, ``kube_wait.wait_deleted`` (a layer above)."""
        fn, args = self._fn("delete", kind, namespace)
        self._call(f"delete {self._where(kind, name, namespace)}", fn, name, *args, missing_ok=True)

    def patch(self, kind: str, name: str, namespace: str | None, body: dict, what: str | None = None) -> dict:
        """A strategic merge patch of one object (a key set to None is removed); the object after it."""
        fn, args = self._fn("patch", kind, namespace)
        return self._call(what or f"patch {self._where(kind, name, namespace)}", fn, name, *args, body=body,
                          field_manager=FIELD_MANAGER)

    def evict(self, pod: str, namespace: str) -> None:
        """Evict a pod through the Eviction API (policy/v1), as ``kubectl drain`` does: its disruption
        budget is honoured (429 while the budget forbids it) and its grace period kept."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        self._call(f"evict pod {namespace}/{pod}", self._group("CoreV1Api").create_namespaced_pod_eviction,
                   pod, namespace, body=body)

    def apply(self, obj: dict | list, what: str | None = None, server_side: bool = True) -> None:
        """Server-side apply (field manager ``netslo``, conflicts forced) of any kinds, in order.

        Used for manifests netslo does not write itself (CNIs: CRDs, RBAC, DaemonSets ...). A kind the
        server does not serve yet (a CRD applied a moment ago) is retried for up to CRD_WAIT s.
        ``server_side`` must stay True: client-side apply is kubectl's, not the API's."""
        if not server_side:
            raise ValueError("apply: only server-side apply is supported")
        if self._dynamic is None:
            self._dynamic = dynamic.DynamicClient(self.client)
        for o in obj if isinstance(obj, list) else [obj]:
            meta = o.get("metadata", {})
            label = what or "apply"
            where = f"{label}: {self._where(o.get('kind', '?'), meta.get('name'), meta.get('namespace'))}"
            resource = self._served(o, where)
            t0 = time.monotonic()
            try:
                self._dynamic.server_side_apply(resource, body=o, field_manager=FIELD_MANAGER,
                                                force_conflicts=True, _request_timeout=120)
            except client.ApiException as e:
                raise InfrastructureError(f"{where}: {_api_message(e)}") from None
            except urllib3.exceptions.HTTPError as e:
                raise InfrastructureError(f"{where}: cannot reach {self.client.configuration.host}: {e}") from None
            log.debug("api %s (server-side apply, %.0f ms)", where, (time.monotonic() - t0) * 1e3)

    def _served(self, obj: dict, where: str):
        deadline = time.monotonic() + CRD_WAIT
        while True:
            try:
                return self._dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            except dynamic.exceptions.ResourceNotFoundError:
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"{where}: the server does not serve {obj['apiVersion']} "
                                              f"{obj['kind']} (after {CRD_WAIT:.0f}s)") from None
                time.sleep(1.0)   # discovery, not an object's state: there is nothing to watch
                self._dynamic.resources.invalidate_cache()

    # ---- watch ------------------------------------------------------------------------------
    def watch(self, kind: str, namespace: str | None = None, *, name: str | None = None,
              selector: str | None = None, resource_version: str, timeout: float) -> Iterator[tuple[str, dict]]:
        """(event type, object) from ``resource_version`` on, for at most ``timeout`` s (server side).

        Types: ADDED, MODIFIED, DELETED, BOOKMARK (only metadata.resourceVersion is meaningful). A
        resourceVersion the server no longer has raises ``Expired`` (list again, then watch)."""
        secs = max(1, math.ceil(timeout))
        kw = {k: v for k, v in (("label_selector", selector),
                                ("field_selector", f"metadata.name={name}" if name else None)) if v}
        fn, args = self._fn("list", kind, namespace)
        what = f"watch {self._where(kind, name, namespace, selector)}"
        log.debug("api %s from resourceVersion %s for %d s", what, resource_version, secs)
        # The typed list call with watch=True, read line by line. (kubernetes.watch.Watch without
        # deserialising into models loses ERROR events: it looks them up under 'raw_object'.)
        try:
            resp = fn(*args, watch=True, resource_version=resource_version, timeout_seconds=secs,
                      allow_watch_bookmarks=True, _preload_content=False,
                      _request_timeout=(REQUEST_TIMEOUT, secs + REQUEST_TIMEOUT), **kw)
        except client.ApiException as e:
            if e.status == 410:
                raise Expired(f"{what}: resourceVersion {resource_version} expired") from None
            raise InfrastructureError(f"{what}: {_api_message(e)}") from None
        except urllib3.exceptions.HTTPError as e:
            raise InfrastructureError(f"{what}: cannot reach {self.host}: {getattr(e, 'reason', None) or e}") from None
        try:
            for line in _watch.iter_resp_lines(resp):
                if not line.strip():
                    continue
                ev = json.loads(line)
                etype, obj = ev.get("type"), ev.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Expired(f"{what}: resourceVersion {resource_version} expired")
                    raise InfrastructureError(f"{what}: {obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
                meta = obj.get("metadata", {})
                log.debug("api %s: %s %s rv=%s", what, etype, meta.get("name", ""), meta.get("resourceVersion"))
                yield etype, obj
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise InfrastructureError(f"{what}: connection lost: {getattr(e, 'reason', None) or e}") from None
        finally:
            resp.close()
            resp.release_conn()

    # ---- events, version --------------------------------------------------------------------
    def events(self, namespace: str, name: str | None = None, limit: int = 3) -> list[str]:
        """The last ``limit`` events of object ``name`` (or of the namespace) as 'Reason: message (xN)'."""
        try:
            items, _ = self.list("event", namespace,
                                 field_selector=f"involvedObject.name={name}" if name else None)
        except InfrastructureError as e:
            return [f"(events unreadable: {e})"]

        def when(ev):
            return (ev.get("lastTimestamp") or ev.get("eventTime") or
                    ev.get("metadata", {}).get("creationTimestamp") or "")
        out = []
        for ev in sorted(items, key=when)[-limit:]:
            count = ev.get("count") or (ev.get("series") or {}).get("count") or 1
            msg = " ".join((ev.get("message") or "").split())[:200]
            who = "" if name else f"{ev.get('involvedObject', {}).get('name', '?')} "
            out.append(f"{who}{ev.get('reason', '?')}: {msg}" + (f" (x{count})" if count > 1 else ""))
        return out

    def server_version(self) -> str:
        """The apiserver's gitVersion, e.g. 'v1.34.4'."""
        return self._call("get /version", self._group("VersionApi").get_code).get("gitVersion", "?")

    def server_endpoint(self) -> tuple[str, int] | None:
        """(address, port) of the API server itself, as its ``kubernetes`` EndpointSlice lists it (the
        address it advertises, which every node reaches without kube-proxy; IPv4 first); None while the
        slice lists none."""
        slices = self.get("endpointslice", namespace="default", selector="kubernetes.io/service-name=kubernetes")
        for s in sorted(slices, key=lambda s: s.get("addressType") != "IPv4"):
            addrs = [a for e in s.get("endpoints") or [] for a in e.get("addresses") or []]
            ports = [p["port"] for p in s.get("ports") or [] if p.get("port")]
            if addrs and ports:
                return addrs[0], int(ports[0])
        return None

    def ready(self) -> bool:
        """Whether the API server answers and says it is ready (``GET /readyz`` is 200: its
        post-start hooks, CRDs and RBAC among them, are done)."""
        conf = self.client.configuration
        headers = {a["key"]: a["value"] for a in conf.auth_settings().values()
                   if a.get("in") == "header" and a.get("value")}
        try:   # one try, no retries: a caller asking while the server starts asks again itself
            resp = self.client.rest_client.pool_manager.request("GET", f"{conf.host}/readyz", headers=headers,
                                                                timeout=5, retries=False)
        except (urllib3.exceptions.HTTPError, OSError):
            return False
        return resp.status == 200

    @property
    def host(self) -> str:
        return self.client.configuration.host

    # ---- exec -------------------------------------------------------------------------------
    def open_exec(self, namespace: str, pod: str, container: str, command: list[str], stdin: bool):
        """The exec stream of ``command`` in a container (no TTY, binary): a ``WSClient``, open."""
        what = f"exec {' '.join(command[:6])} in pod {namespace}/{pod} -c {container}"
        # kubernetes.stream.stream swaps the ApiClient's call_api while it opens the socket: on the
        # shared client, two execs at once (or an exec beside any other call) could leave it swapped.
        # Each exec gets a client of its own (same configuration; no connection pool is used).
        api = client.ApiClient(self.client.configuration)
        api.user_agent = self.client.user_agent
        try:
            return _stream.stream(client.CoreV1Api(api).connect_get_namespaced_pod_exec, pod, namespace,
                                  command=list(command), container=container, stdin=stdin,
                                  stdout=True, stderr=True, tty=False, _preload_content=False, binary=True,
                                  _request_timeout=REQUEST_TIMEOUT)
        except client.ApiException as e:
            raise InfrastructureError(f"{what}: {e.reason or _api_message(e)}") from None
        finally:
            api.close()

    def run(self, namespace: str, pod: str, container: str, command: list[str], timeout: float,
            input: bytes | None = None) -> ExecResult:
        """Run ``command`` in a container (no TTY) through the exec stream; its exit code and output.

        stdout/stderr are bytes exactly as written; ``input`` is written to stdin, which is then
        closed (end of file; needs the v5.channel.k8s.io protocol, Kubernetes >= 1.30). The command
        not ending within ``timeout`` s, or the exec not starting, is an InfrastructureError."""
        what = f"exec {' '.join(command[:6])} in pod {namespace}/{pod} -c {container}"
        t0 = time.monotonic()
        ws = self.open_exec(namespace, pod, container, command, stdin=input is not None)
        out, err, status = bytearray(), bytearray(), b""
        try:
            if input is not None:
                if ws.subprotocol != "v5.channel.k8s.io":
                    raise InfrastructureError(f"{what}: stdin needs the v5.channel.k8s.io exec protocol "
                                              f"(Kubernetes >= 1.30); the server chose {ws.subprotocol}")
                ws.write_stdin(bytes(input))
                ws.close_channel(0)
            deadline = t0 + timeout
            while ws.is_open():
                left = deadline - time.monotonic()
                if left <= 0:
                    tail = bytes(err).decode(errors="replace").strip().splitlines()[-1:] or ["(no stderr)"]
                    raise InfrastructureError(f"{what}: no answer within {timeout:.0f}s (stderr: {tail[0]})")
                ws.update(timeout=min(left, 5.0))
                out += ws.read_channel(1)
                err += ws.read_channel(2)
            out += ws.read_channel(1)
            err += ws.read_channel(2)
            status = ws.read_channel(3)
        finally:
            ws.close()
        rc = _exit_code(status, what)
        log.debug("api %s: exit %d, %d bytes out, %d err (%.0f ms)", what, rc, len(out), len(err),
                  (time.monotonic() - t0) * 1e3)
        return ExecResult(rc, bytes(out), bytes(err))

    def exec(self, namespace: str, pod: str, container: str, command: list[str], timeout: float,
             input: bytes | None = None) -> bytes:
        """``run`` that returns stdout and raises InfrastructureError (with stderr's tail) unless exit 0."""
        res = self.run(namespace, pod, container, command, timeout, input=input)
        if res.returncode != 0:
            raise InfrastructureError(f"exec {' '.join(command[:5])} in pod {namespace}/{pod}: "
                                      f"exit {res.returncode}: {tail(res.stderr)}")
        return res.stdout


class Expired(InfrastructureError):
    """A watch's resourceVersion is too old (HTTP 410): list again and watch from the new one."""


def _exit_code(status: bytes, what: str) -> int:
    """The exit code from the exec stream's status channel (a metav1.Status)."""
    if not status:
        raise InfrastructureError(f"{what}: stream closed without an exit status")
    try:
        st = json.loads(status)
    except ValueError:
        raise InfrastructureError(f"{what}: unreadable exit status {status[:200]!r}") from None
    if st.get("status") == "Success":
        return 0
    for cause in (st.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            return int(cause.get("message", "1"))
    raise InfrastructureError(f"{what}: {st.get('message') or st}")


def tail(data: bytes | str, n: int = 3) -> str:
    """The last ``n`` non-empty lines of ``data`` joined by ' | ' (for one-line errors)."""
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    lines = [ln.strip() for ln in data.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) or "(no output)"
