"""CNI installers for real clusters: Calico, Cilium, Antrea, pinned in ``<name>.yaml`` beside this module.

Each data file names the version, the release URL of the upstream manifest or Helm chart (fetched at
install time, never stored in this repo), its sha256, the pod/service subnets to give the cluster, the
encapsulations our overlays can select and the workloads that must become ready.

    spec = load("calico"); data, digest = fetch(spec); install(kubectl, spec, encapsulation="vxlan")

Where the bytes come from: ``$NETSLO_CNI_MIRROR`` (a directory: an air-gapped network's own copy of
the release files, laid out ``<mirror>/<name>/<version>/<file name of the URL>``), else the cache
(``$NETSLO_CNI_CACHE``), else the release URL. With a mirror set nothing is downloaded.

Digest policy, the same on a laptop and in CI: a recorded sha256 is always enforced, whatever the
source; with none recorded the file is refused unless ``$NETSLO_CNI_ALLOW_UNRECORDED=1`` says once
that it may be used, and then its digest is reported (``cni_sha256`` with ``cni_sha256_recorded:
false`` in the run's environment) so it can be recorded:
``python -m netslo.providers.cni digest NAME [--file F] [--record]``.

A mirror may hold a file built from the release's source instead of the published one (kind-offline
packs Cilium's chart from the Go module proxy's source: helm writes the time into the archive, so the
pack is never the published file). Such a file carries a record beside it, ``<file>.local-build``,
first line ``sha256 <hex>`` of the file, then where it was built from; the file is used when its
digest matches that record, and the run reports ``cni_sha256_recorded: local build`` with the
record's provenance (``cni_source``). It is the only way around the recorded digest, and it exists
only where a mirror is set: a download is always the published file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from netslo.core import resources
from netslo.core.errors import InfrastructureError, SpecError

log = logging.getLogger("netslo.cni")

CNIS = ("calico", "cilium", "antrea")
SOURCE_KINDS = ("manifest", "helm")
WORKLOAD_KINDS = ("DaemonSet", "Deployment")
ALLOW_UNRECORDED_ENV = "NETSLO_CNI_ALLOW_UNRECORDED"  # "1": accept a download whose sha256 is not recorded
MIRROR_ENV = "NETSLO_CNI_MIRROR"   # directory <mirror>/<name>/<version>/<file name of the URL>
LOCAL_BUILD_SUFFIX = ".local-build"   # beside a mirror file built from source: "sha256 <hex>\n<provenance>"
_SHA = re.compile(r"^[0-9a-f]{64}$")


def pins_dir() -> Path:
    """The folder of the pinned CNI data files, ``<name>.yaml``: the ones shipped beside this module,
    or ``$NETSLO_CNI_PINS``."""
    env = os.environ.get("NETSLO_CNI_PINS")
    return Path(env) if env else resources.data("providers", "cni")


@dataclass(frozen=True)
class Workload:
    """A CNI workload that must become ready. ``staged``: its documents are applied only once the
    workloads listed before it are ready (a pod-network Deployment whose pods the CNI's own node agent
    must be running to set up)."""

    kind: str
    namespace: str
    name: str
    staged: bool = False


@dataclass(frozen=True)
class CniSpec:
    """One pinned CNI (see providers/cni/*.yaml)."""

    name: str
    version: str
    kind: str                 # manifest | helm
    url: str
    sha256: str               # "" = not recorded yet
    pod_subnet: str
    service_subnet: str
    encapsulations: tuple
    default_encapsulation: str
    bandwidth: str            # what honours bandwidth annotations: cni-plugin | calico-qos-controls | bandwidth-manager
    ready: tuple
    values: dict = field(default_factory=dict)   # helm --set values
    release: str = ""
    namespace: str = "kube-system"
    source_file: str = ""


def _need(d: dict, key: str, where: str, typ=str):
    if key not in d:
        raise SpecError(key, None, f"a {typ.__name__}", where)
    v = d[key]
    if not isinstance(v, typ):
        raise SpecError(key, v, f"a {typ.__name__}", where)
    return v


def load(name: str, directory: Path | None = None) -> CniSpec:
    """Read and validate the pinned data file ``<name>.yaml`` (``pins_dir()``, or ``directory``)."""
    if name not in CNIS:
        raise SpecError("--netslo-cni", name, f"one of {', '.join(CNIS)}")
    path = (directory or pins_dir()) / f"{name}.yaml"
    where = str(path)
    try:
        d = yaml.safe_load(path.read_text())
    except OSError as e:
        raise SpecError("file", str(path), f"a readable CNI data file ({e.strerror})") from None
    src = _need(d, "source", where, dict)
    kind = _need(src, "kind", where)
    if kind not in SOURCE_KINDS:
        raise SpecError("source.kind", kind, f"one of {', '.join(SOURCE_KINDS)}", where)
    url = _need(src, "url", where)
    if not url.startswith("https://"):
        raise SpecError("source.url", url, "an https:// release URL", where)
    sha = _need(src, "sha256", where)
    if sha and not _SHA.match(sha):
        raise SpecError("source.sha256", sha, "64 lowercase hex digits or \"\"", where)
    encs = tuple(_need(d, "encapsulations", where, list))
    default = _need(d, "default_encapsulation", where)
    if default not in encs:
        raise SpecError("default_encapsulation", default, f"one of {encs}", where)
    ready = []
    for w in _need(d, "ready", where, list):
        if w.get("kind") not in WORKLOAD_KINDS:
            raise SpecError("ready[].kind", w.get("kind"), f"one of {', '.join(WORKLOAD_KINDS)}", where)
        staged = w.get("staged", False)
        if not isinstance(staged, bool) or (staged and (kind != "manifest" or not ready)):
            raise SpecError("ready[].staged", staged, "true or false; true only on a manifest source's "
                            "workload after the first", where)
        ready.append(Workload(w["kind"], w.get("namespace", "kube-system"), w["name"], staged))
    spec = CniSpec(name=_need(d, "name", where), version=str(_need(d, "version", where)), kind=kind,
                   url=url, sha256=sha, pod_subnet=_need(d, "pod_subnet", where),
                   service_subnet=_need(d, "service_subnet", where), encapsulations=encs,
                   default_encapsulation=default, bandwidth=_need(d, "bandwidth", where),
                   ready=tuple(ready), values={str(k): str(v) for k, v in (d.get("values") or {}).items()},
                   release=src.get("release", ""), namespace=src.get("namespace", "kube-system"),
                   source_file=where)
    if spec.name != name:
        raise SpecError("name", spec.name, f"{name!r} (the file's name)", where)
    if kind == "helm" and not spec.release:
        raise SpecError("source.release", "", "a Helm release name", where)
    return spec


def encapsulation(spec: CniSpec, value: str | None) -> str:
    """Validated encapsulation (default from the data file)."""
    value = value or spec.default_encapsulation
    if value not in spec.encapsulations:
        raise SpecError(f"{spec.name} encapsulation", value, f"one of {', '.join(spec.encapsulations)}")
    return value


def cache_dir() -> Path:
    return Path(os.environ.get("NETSLO_CNI_CACHE", Path.home() / ".cache" / "netslo" / "cni"))


def verify(spec: CniSpec, data: bytes, allow_unrecorded: bool | None = None, origin: str | None = None) -> str:
    """sha256 of ``data`` (read from ``origin``: the URL unless said); InfrastructureError if it differs
    from the recorded one.

    With no recorded digest the download is refused unless allowed ($NETSLO_CNI_ALLOW_UNRECORDED=1),
    and the digest to record is in the message either way.
    """
    digest = hashlib.sha256(data).hexdigest()
    if spec.sha256:
        if digest != spec.sha256:
            hint = (f"; a file built from source needs its {LOCAL_BUILD_SUFFIX} record beside it"
                    if origin else "")
            raise InfrastructureError(f"CNI {spec.name} {spec.version}: {origin or spec.url} has sha256 {digest}, "
                                      f"expected {spec.sha256} (recorded in {spec.source_file}){hint}")
        return digest
    if allow_unrecorded is None:
        allow_unrecorded = os.environ.get(ALLOW_UNRECORDED_ENV) == "1"
    if not allow_unrecorded:
        raise InfrastructureError(f"CNI {spec.name} {spec.version}: no sha256 recorded in {spec.source_file}; "
                                  f"the download has sha256 {digest} — record it (python -m "
                                  f"netslo.providers.cni digest {spec.name} --record), or set "
                                  f"{ALLOW_UNRECORDED_ENV}=1 to accept it once")
    log.warning("CNI %s %s: sha256 %s is not recorded in %s; accepted because %s=1",
                spec.name, spec.version, digest, spec.source_file, ALLOW_UNRECORDED_ENV)
    return digest


def local_build(path: Path) -> tuple[str, str] | None:
    """(sha256, provenance) of the ``.local-build`` record beside mirror file ``path``; None without one."""
    record = Path(str(path) + LOCAL_BUILD_SUFFIX)
    if not record.is_file():
        return None
    first, _, rest = record.read_text().partition("\n")
    kind, _, digest = first.strip().partition(" ")
    if kind != "sha256" or not _SHA.match(digest):
        raise SpecError(str(record), first.strip(), "a first line 'sha256 <64 hex digits>' (a local-build record)")
    return digest, rest.strip()


def verify_local_build(spec: CniSpec, data: bytes, path: Path) -> str:
    """sha256 of a mirror file built from source; InfrastructureError unless its record names it."""
    recorded, provenance = local_build(path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != recorded:
        raise InfrastructureError(f"CNI {spec.name} {spec.version}: mirror file {path} has sha256 {digest}, its "
                                  f"{LOCAL_BUILD_SUFFIX} record says {recorded}")
    log.warning("CNI %s %s: a local build, not the published file (%s); sha256 %s", spec.name, spec.version,
                provenance or "no provenance given", digest)
    return digest


def file_name(spec: CniSpec) -> str:
    """The release file's name (last path element of its URL)."""
    return spec.url.rstrip("/").rsplit("/", 1)[-1]


def mirror_path(spec: CniSpec, mirror: str | os.PathLike | None = None) -> Path | None:
    """Where the mirror ($NETSLO_CNI_MIRROR) keeps this release file; None without a mirror."""
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    if not mirror:
        return None
    return Path(mirror) / spec.name / spec.version / file_name(spec)


def source(spec: CniSpec) -> str:
    """Where ``fetch`` takes the file from: the mirror's path (with a local build's provenance), or the
    release URL."""
    path = mirror_path(spec)
    if path is None:
        return spec.url
    built = local_build(path) if path.is_file() else None
    return f"{path} (local build: {built[1] or 'no provenance given'})" if built else str(path)


def digest_status(spec: CniSpec) -> str:
    """How the file's digest was checked: 'true' (recorded), 'local build' (a mirror file built from
    source, checked against its record), 'false' (unrecorded, allowed once)."""
    path = mirror_path(spec)
    if path is not None and path.is_file() and local_build(path) is not None:
        return "local build"
    return "true" if spec.sha256 else "false"


def check_source(spec: CniSpec) -> None:
    """Before a cluster is made: a mirror that is set must hold the file (else a SpecError naming it)."""
    path = mirror_path(spec)
    if path is not None and not path.is_file():
        raise SpecError(MIRROR_ENV, os.environ.get(MIRROR_ENV),
                        f"a directory holding {spec.name} {spec.version} as "
                        f"<mirror>/{spec.name}/{spec.version}/{file_name(spec)} (missing: {path})")


def fetch(spec: CniSpec, *, timeout: float = 60.0, allow_unrecorded: bool | None = None,
          directory: Path | None = None) -> tuple[bytes, str]:
    """(bytes, sha256) of the pinned release file: from the mirror if one is set (``source()`` says
    which), else cached by URL or downloaded; always checked with ``verify``."""
    mirrored = mirror_path(spec)
    if mirrored is not None:
        try:
            data = mirrored.read_bytes()
        except OSError as e:
            raise InfrastructureError(f"CNI {spec.name} {spec.version}: mirror file {mirrored}: "
                                      f"{e.strerror} (${MIRROR_ENV} is set, so nothing is downloaded)") from None
        if local_build(mirrored) is not None:
            return data, verify_local_build(spec, data, mirrored)
        return data, verify(spec, data, allow_unrecorded, origin=f"mirror file {mirrored}")
    directory = directory or cache_dir()
    key = hashlib.sha256(spec.url.encode()).hexdigest()[:16]
    cached = directory / f"{spec.name}-{spec.version}-{key}"
    if cached.exists():
        data = cached.read_bytes()
    else:
        try:
            with urllib.request.urlopen(spec.url, timeout=timeout) as r:  # noqa: S310 (https only)
                data = r.read()
        except OSError as e:
            raise InfrastructureError(f"CNI {spec.name} {spec.version}: download of {spec.url} failed: {e}") from None
    digest = verify(spec, data, allow_unrecorded)
    if not cached.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(cached)
    return data, digest
