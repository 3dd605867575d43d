#!/usr/bin/env python3
"""Pack layer tarballs into a docker-archive image (what `docker save` writes), no registry, no daemon.

    image_pack.py layer  ROOTFS_DIR OUT.tar            one uncompressed layer from a directory
    image_pack.py layer  --file SRC:DEST[:MODE] ... OUT.tar   a layer from single files
    image_pack.py image  --tag REF --layer L.tar ... [--env K=V] [--workdir D] [--entrypoint JSON]
                         [--cmd JSON] [--user UID[:GID]] [--oci OCI.tar [--oci-omit L.tar ...]] OUT.tar
    image_pack.py timestamp-pyc DIR ...                the timestamp-checked .pyc under DIRs (one line)

The result imports with `ctr -n k8s.io images import OUT.tar` (and `docker load`). Layers are
reproducible: entries sorted, owner root, mtime 0, so an unchanged tree gives the same digest.
``--oci`` also writes the same image (same config, same layer digests) as an OCI image layout
tarball, named for ctr by the ``io.containerd.image.name`` annotation; ``--oci-omit`` leaves a layer's
blob out of it (the manifest still lists it): for a containerd that already holds that blob, the
import then reads and hashes only the rest. Layers are uncompressed, so a layer's blob digest is its
diff ID, in both formats. Since every mtime becomes 0, a timestamp-checked .pyc in a layer is stale
(its interpreter compiles the source again on every import); ``timestamp-pyc`` finds them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile

BLOCK = 1 << 20


def _normalize(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    return info


def layer_from_dir(root: str, out: str) -> None:
    """Tar ``root``'s contents (paths relative to it), sorted, without crossing into special files."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            if rel != ".":
                tar.add(dirpath, arcname=rel, recursive=False, filter=_normalize)
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                arc = os.path.normpath(os.path.join(rel, name))
                tar.add(full, arcname=arc, recursive=False, filter=_normalize)
            # symlinks to directories are listed in dirnames but not walked: add them as links
            for name in list(dirnames):
                full = os.path.join(dirpath, name)
                if os.path.islink(full):
                    tar.add(full, arcname=os.path.normpath(os.path.join(rel, name)), recursive=False,
                            filter=_normalize)


def layer_from_files(specs: list[str], out: str) -> None:
    """SRC:DEST[:MODE] entries (parent directories created, mode octal, default from SRC)."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        made = set()
        for spec in specs:
            parts = spec.split(":")
            if len(parts) not in (2, 3):
                sys.exit(f"--file: value {spec!r} — expected SRC:DEST[:MODE]")
            src, dest = parts[0], parts[1].lstrip("/")
            parent = os.path.dirname(dest)
            chain = []
            while parent and parent not in made:
                chain.append(parent)
                parent = os.path.dirname(parent)
            for d in reversed(chain):
                ti = _normalize(tarfile.TarInfo(d))
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(ti)
                made.add(d)
            ti = _normalize(tar.gettarinfo(src, arcname=dest))
            if len(parts) == 3:
                ti.mode = int(parts[2], 8)
            with open(src, "rb") as f:
                tar.addfile(ti, f)


def _sha256(path: str) -> str:
    """sha256 of a file, remembered in PATH.sha256 while the file's size and mtime are unchanged."""
    st = os.stat(path)
    stamp = f"{st.st_size}:{st.st_mtime_ns}"
    side = path + ".sha256"
    try:
        with open(side) as f:
            old_stamp, digest = f.read().split()
        if old_stamp == stamp:
            return digest
    except (OSError, ValueError):
        pass
    digest = _hash_file(path)
    with open(side, "w") as f:
        f.write(f"{stamp} {digest}\n")
    return digest


def _hash_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(BLOCK):
            h.update(chunk)
    return h.hexdigest()


def image(tag: str, layers: list[str], env: list[str], workdir: str, entrypoint, cmd, out: str,
          user: str | None = None, oci: str | None = None, oci_omit: tuple[str, ...] = ()) -> str:
    """Write a docker-archive (and with ``oci`` an OCI layout tarball without the blobs of the layers
    in ``oci_omit``); returns the image config digest (sha256:...)."""
    diff_ids = [_sha256(p) for p in layers]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Env": env, "WorkingDir": workdir or "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "netslo image_pack.py"}
                    for _ in layers],
    }
    if entrypoint is not None:
        config["config"]["Entrypoint"] = entrypoint
    if cmd is not None:
        config["config"]["Cmd"] = cmd
    if user:
        config["config"]["User"] = user
    raw = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    cfg_digest = hashlib.sha256(raw).hexdigest()
    manifest = [{"Config": f"{cfg_digest}.json", "RepoTags": [tag],
                 "Layers": [f"{d}/layer.tar" for d in diff_ids]}]
    if oci:
        unknown = set(oci_omit) - set(layers)
        if unknown:
            sys.exit(f"--oci-omit: {sorted(unknown)[0]!r} is not one of the --layer files")
        _oci_layout(tag, raw, [(p, d) for p, d in zip(layers, diff_ids)], set(oci_omit), oci)
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes = _adder(tar)
        add_bytes(f"{cfg_digest}.json", raw)
        for path, d in zip(layers, diff_ids):
            tar.add(path, arcname=f"{d}/layer.tar", filter=_normalize)
        add_bytes("manifest.json", json.dumps(manifest).encode())
        add_bytes("repositories", json.dumps(
            {tag.rsplit(":", 1)[0]: {tag.rsplit(":", 1)[1]: diff_ids[-1]}}).encode())
    os.replace(tmp, out)
    return f"sha256:{cfg_digest}"


def _adder(tar: tarfile.TarFile):
    """A function adding a member NAME with bytes DATA to ``tar`` (root-owned, mtime 0)."""
    def add_bytes(name: str, data: bytes) -> None:
        ti = _normalize(tarfile.TarInfo(name))
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
    return add_bytes


def _oci_layout(tag: str, config: bytes, layers: list[tuple[str, str]], omit: set[str], out: str) -> None:
    """An OCI image layout tarball (image-spec "Image Layout") of one image: the config, the manifest
    listing every layer (uncompressed: digest = diff ID), the blobs of the layers not in ``omit``."""
    def descriptor(media_type: str, data: bytes) -> dict:
        return {"mediaType": media_type, "digest": f"sha256:{hashlib.sha256(data).hexdigest()}", "size": len(data)}
    cfg = descriptor("application/vnd.oci.image.config.v1+json", config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cfg,
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": f"sha256:{d}",
                    "size": os.path.getsize(p)} for p, d in layers]}, sort_keys=True).encode()
    man = descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{**man, "annotations": {"io.containerd.image.name": tag,
                                                   "org.opencontainers.image.ref.name": tag.rsplit(":", 1)[1]}}]}
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes = _adder(tar)
        add_bytes("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add_bytes(f"blobs/sha256/{cfg['digest'][7:]}", config)
        add_bytes(f"blobs/sha256/{man['digest'][7:]}", manifest)
        for path, d in layers:
            if path not in omit:
                tar.add(path, arcname=f"blobs/sha256/{d}", filter=_normalize)
        add_bytes("index.json", json.dumps(index, sort_keys=True).encode())
    os.replace(tmp, out)


def timestamp_pyc(dirs) -> list[str]:
    """The .pyc files under ``dirs`` that check their source's mtime (PEP 552 flags 0), sorted."""
    found = []
    for top in dirs:
        for d, _, files in os.walk(top):
            for f in files:
                if f.endswith(".pyc"):
                    with open(os.path.join(d, f), "rb") as fh:
                        head = fh.read(8)
                    if len(head) == 8 and int.from_bytes(head[4:8], "little") == 0:
                        found.append(os.path.join(d, f))
    return sorted(found)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    layer = sub.add_parser("layer")
    layer.add_argument("--file", action="append", default=[])
    layer.add_argument("args", nargs="+", help="[ROOTFS_DIR] OUT.tar")
    i = sub.add_parser("image")
    i.add_argument("--tag", required=True)
    i.add_argument("--layer", action="append", required=True)
    i.add_argument("--env", action="append", default=[])
    i.add_argument("--workdir", default="/")
    i.add_argument("--entrypoint", type=json.loads)
    i.add_argument("--cmd", type=json.loads)
    i.add_argument("--user", help="numeric UID[:GID] (runAsNonRoot checks a numeric user)")
    i.add_argument("--oci", help="also write the image as an OCI layout tarball here")
    i.add_argument("--oci-omit", action="append", default=[], help="a --layer whose blob the OCI tarball leaves out")
    i.add_argument("out")
    t = sub.add_parser("timestamp-pyc")
    t.add_argument("dirs", nargs="+")
    a = p.parse_args(argv)
    if a.cmd == "timestamp-pyc":
        found = timestamp_pyc(a.dirs)
        if found:
            print(f"{len(found)} files, e.g. {', '.join(found[:5])}")
        return 0
    if a.cmd == "layer":
        if a.file:
            if len(a.args) != 1:
                sys.exit("layer --file ...: expected exactly one OUT.tar")
            layer_from_files(a.file, a.args[0])
        else:
            if len(a.args) != 2:
                sys.exit("layer: expected ROOTFS_DIR OUT.tar")
            layer_from_dir(a.args[0], a.args[1])
        return 0
    if a.oci_omit and not a.oci:
        sys.exit("--oci-omit: only with --oci")
    print(image(a.tag, a.layer, a.env, a.workdir, a.entrypoint, a.cmd, a.out, a.user, a.oci, tuple(a.oci_omit)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
