"""What killed runs leave on Kubernetes: run namespaces of dead owners, and kind clusters of dead owners.

The owner record (written by the run; ``owner_record()``): host name, boot id, PID and the PID's start
time (clock ticks after boot, field 22 of /proc/PID/stat, so a reused PID is not mistaken for the
owner). Run namespaces carry it as annotations ``netslo.io/owner-{host,boot,pid,start}``; a kind
cluster's record is a JSON file ``<KIND_OWNER_DIR>/<cluster>.json`` written by whoever created it.

An owner is **gone** when it is on this host and boot and its process (PID + start time) does not
exist, or when this host has rebooted since. An owner on another host, or a namespace without a
record (older netslo), cannot be checked from here: it counts as gone once older than ``max_age``
(``DEFAULT_MAX_AGE``, 3 h; a gate run takes minutes). A live owner is never touched.

    reap(api, dry_run=False, max_age=DEFAULT_MAX_AGE, wait=False) -> lines   # namespaces
    write_kind_owner(name); reap_kind_clusters(kind="kind", keep_cluster=False, dry_run=False) -> lines

Only namespaces labelled ``app.kubernetes.io/managed-by=netslo`` whose name is ``netslo-<their
netslo.io/run-id label>`` are considered; deleting one removes everything of that run in it (agent
pods, Services, the impairment DaemonSet). A node a run cordoned for a drain carries that run's id
(``netslo.providers.kube.drain``): it is uncordoned once no live namespace of that run is left.
Times are seconds.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import tempfile
from pathlib import Path

from netslo.core.errors import InfrastructureError
from netslo.core.procs import alive
from netslo.providers.kube import manifests as km
from netslo.providers.kube.drain import CORDON_ANNOTATION, uncordon
from netslo.providers.tool import run_tool

DEFAULT_MAX_AGE = 3 * 3600.0   # s: owners this host cannot check count as gone after this long
OWNER_PREFIX = "netslo.io/owner-"
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=netslo"


# ---- the owner record -------------------------------------------------------------------------

def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_start_ticks(pid: int) -> str:
    """Start time of ``pid`` in clock ticks after boot ('' if it does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]   # field 22; the command name may hold spaces


def owner_record(pid: int | None = None) -> dict[str, str]:
    """{'host', 'boot', 'pid', 'start'} of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return {"host": socket.gethostname(), "boot": _boot_id(), "pid": str(pid), "start": pid_start_ticks(pid)}


def owner_annotations(pid: int | None = None) -> dict[str, str]:
    """The owner record as namespace annotations."""
    return {OWNER_PREFIX + k: v for k, v in owner_record(pid).items()}


def owner_gone(record: dict[str, str], age_s: float, max_age: float = DEFAULT_MAX_AGE) -> str | None:
    """Why the owner is gone (one phrase), or None while it may be alive."""
    host, pid = record.get("host"), record.get("pid")
    if host and host == socket.gethostname() and pid:
        if record.get("boot") and record.get("boot") != _boot_id():
            return f"owner pid {pid} on {host} died with a reboot"
        if not alive(int(pid)):
            return f"owner pid {pid} on {host} is gone"
        if record.get("start") and pid_start_ticks(int(pid)) != record["start"]:
            return f"owner pid {pid} on {host} is gone (the pid now belongs to another process)"
        return None
    if age_s > max_age:
        who = f"owner on host {host}" if host else "no owner record"
        return f"{who}, {age_s / 3600:.1f} h old (> {max_age / 3600:.1f} h)"
    return None


def _age_s(created: str | None) -> float:
    if not created:
        return 0.0
    t = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    return (dt.datetime.now(dt.timezone.utc) - t).total_seconds()


# ---- run namespaces ---------------------------------------------------------------------------

def dead_namespaces(api, max_age: float = DEFAULT_MAX_AGE) -> list[tuple[dict, str]]:
    """(namespace object, why its run is gone) for every netslo run namespace whose owner is gone."""
    out = []
    for ns in api.get("namespaces", selector=MANAGED_SELECTOR):
        meta = ns.get("metadata", {})
        run_id = (meta.get("labels") or {}).get(km.RUN_LABEL, "")
        if not run_id or meta.get("name") != f"netslo-{run_id}" or meta.get("deletionTimestamp"):
            continue   # not a run namespace by name, or already being deleted
        ann = meta.get("annotations") or {}
        record = {k[len(OWNER_PREFIX):]: v for k, v in ann.items() if k.startswith(OWNER_PREFIX)}
        why = owner_gone(record, _age_s(meta.get("creationTimestamp")), max_age)
        if why:
            out.append((ns, why))
    return out


def _contents(api, namespace: str) -> str:
    """'DaemonSet netslo-impair, 3 pods' (what deleting the namespace removes)."""
    try:
        ds = [d["metadata"]["name"] for d in api.get("daemonsets", namespace=namespace)]
        pods = api.get("pods", namespace=namespace)
    except InfrastructureError:
        return "contents unreadable"
    parts = [f"DaemonSet {d}" for d in ds] + [f"{len(pods)} pod{'s' if len(pods) != 1 else ''}"]
    return ", ".join(parts)


def reap(api, *, dry_run: bool = False, max_age: float = DEFAULT_MAX_AGE, wait: bool = False,
         timeout: float = 120.0) -> list[str]:
    """Delete the namespaces of dead runs (``dead_namespaces``) and uncordon the nodes a drain of a run
    without a live namespace left cordoned (``drain.CORDON_ANNOTATION``); one line per thing.

    ``wait``: watch each until it is gone (InfrastructureError after ``timeout`` s)."""
    from netslo.providers.kube.wait import wait_deleted
    said = []
    dead = dead_namespaces(api, max_age)
    for ns, why in dead:
        name = ns["metadata"]["name"]
        verb = "would delete" if dry_run else "deleted" if wait else "deleting"
        said.append(f"kube reap: {verb} namespace {name} on {api.host} ({why}): {_contents(api, name)}")
        if not dry_run:
            api.delete("namespace", name)
            if wait:
                wait_deleted(api, "namespace", name, None, timeout)
    live = {ns["metadata"]["name"] for ns in api.get("namespaces", selector=MANAGED_SELECTOR)
            if not ns["metadata"].get("deletionTimestamp")} - {ns["metadata"]["name"] for ns, _ in dead}
    try:
        nodes = api.get("nodes")
    except InfrastructureError as e:      # (a run lists them anyway; reaping namespaces needs not)
        return said + [f"kube reap: nodes not checked for a drain's cordon ({e})"]
    for node in nodes:
        meta = node.get("metadata", {})
        run_id = (meta.get("annotations") or {}).get(CORDON_ANNOTATION)
        if run_id and km.namespace_name(run_id) not in live:
            verb = "would uncordon" if dry_run else "uncordoned"
            said.append(f"kube reap: {verb} node {meta['name']} on {api.host} (cordoned for a drain by run "
                        f"{run_id}, which is gone)")
            if not dry_run:
                uncordon(api, meta["name"])
    return said


# ---- kind clusters ----------------------------------------------------------------------------

def kind_owner_dir() -> Path:
    """Where kind clusters' owner records live: /run/netslo/kind (root) or a per-user temp directory."""
    root = Path("/run/netslo/kind")
    if os.geteuid() == 0:
        return root
    return Path(tempfile.gettempdir()) / f"netslo-{os.getuid()}" / "kind"


def write_kind_owner(name: str, pid: int | None = None) -> Path:
    """Record this process (or ``pid``) as the owner of kind cluster ``name``; call it right after
    ``kind create cluster`` and ``remove_kind_owner`` after ``kind delete cluster``."""
    path = kind_owner_dir() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cluster": name, **owner_record(pid)}))
    return path


def remove_kind_owner(name: str) -> None:
    (kind_owner_dir() / f"{name}.json").unlink(missing_ok=True)


def _kind(argv: list[str], timeout: float) -> str:
    return run_tool(argv, timeout, "kind clusters of dead runs cannot be reaped").stdout.decode()


def reap_kind_clusters(kind: str = "kind", *, keep_cluster: bool = False, dry_run: bool = False) -> list[str]:
    """Delete kind clusters whose owner record names a dead owner; one line per cluster.

    Clusters without a record (made by hand, or kept on purpose) are never touched; with
    ``keep_cluster`` a dead owner's cluster is kept and its record removed (it is reused as is)."""
    directory = kind_owner_dir()
    records = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not records:
        return []
    clusters = set(_kind([kind, "get", "clusters"], 30).split())
    said = []
    for path in records:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        name = record.get("cluster") or path.stem
        if name not in clusters:
            if not dry_run:
                path.unlink(missing_ok=True)   # the cluster went some other way
            continue
        why = owner_gone(record, 0.0)
        if not why:
            continue
        if keep_cluster:
            said.append(f"kind reap: kept kind cluster {name} ({why}; keep-cluster is set)")
            if not dry_run:
                path.unlink(missing_ok=True)
            continue
        said.append(f"kind reap: {'would delete' if dry_run else 'deleted'} kind cluster {name} ({why})")
        if not dry_run:
            _kind([kind, "delete", "cluster", "--name", name], 300)
            path.unlink(missing_ok=True)
    return said
