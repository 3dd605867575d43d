"""scripts/kind-offline/calico.sh builds Calico only from the pinned tag's source: a source archive is
accepted when its sha256 is the pinned one or, whatever its compression and top-level folder (GitHub's
tag archive), when its files' git tree id is the tag's; anything else is refused before a build.

The mechanism is checked on a small tree of its own (the pins overridden with that tree's values);
with ``NETSLO_CALICO_SRC`` naming the real v3.31.3 archive (as .ci/run sets it), also on that archive
and on a GitHub-style repack of it (gzip, a top-level folder: another sha256, the same files)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KO = ROOT / "scripts" / "kind-offline"


def _calico_sh(script: str, **pins: str) -> subprocess.CompletedProcess:
    """Run ``script`` after sourcing calico.sh with the toolchain's logging (pins overridden)."""
    over = "".join(f"{k}={v}\n" for k, v in pins.items())
    prelude = (f"set -euo pipefail\nKO_CACHE=$(mktemp -d)\ntrap 'rm -rf \"$KO_CACHE\"' EXIT\n"
               f"ko_log() {{ echo \"$*\" >&2; }}\nko_die() {{ ko_log \"ERROR: $*\"; exit 1; }}\n"
               f". {KO / 'calico.sh'}\n{over}")
    return subprocess.run(["bash", "-c", prelude + script], capture_output=True, text=True, timeout=300)


def _tree_of(directory: Path) -> str:
    p = _calico_sh(f"calico_files_tree {directory}")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def _pack(src: Path, out: Path, mode: str, top: str | None) -> Path:
    with tarfile.open(out, mode) as t:
        for f in sorted(src.rglob("*")):
            rel = f.relative_to(src)
            t.add(f, arcname=str(Path(top) / rel) if top else str(rel), recursive=False)
    return out


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "api").mkdir(parents=True)
    (src / "api" / "go.mod").write_text("module github.com/projectcalico/api\n")
    (src / "go.mod").write_text("replace github.com/projectcalico/api => ./api\n")
    (src / "win.ps1").write_bytes(b"Write-Host hi\r\n")              # CRLF kept as it is
    (src / ".gitattributes").write_text("*.ps1 text eol=crlf\n* text=auto\n")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "charts").mkdir()
    (src / "charts" / "crds").symlink_to("../api")                  # symlinks as upstream has them
    return src


def _accepts(archive: Path, tmp_path: Path, **pins) -> subprocess.CompletedProcess:
    out = tmp_path / f"out-{archive.name}"
    return _calico_sh(f"calico_archive_ok {archive} {out} && ls -A {out}", **pins)


def test_an_archive_of_the_same_files_is_accepted_whatever_its_compression_and_folder(tree, tmp_path):
    pins = {"CALICO_FILES_TREE": _tree_of(tree), "CALICO_ARCHIVE_SHA256": "0" * 64}
    for archive in (_pack(tree, tmp_path / "a.tar.gz", "w:gz", "calico-3.31.3"),
                    _pack(tree, tmp_path / "b.tar.xz", "w:xz", None)):
        p = _accepts(archive, tmp_path, **pins)
        assert p.returncode == 0, p.stderr
        assert "its files are tag" in p.stderr and sorted(p.stdout.split()) == [".gitattributes", "api", "charts",
                                                                                  "go.mod", "run.sh", "win.ps1"]


def test_the_pinned_sha256_is_accepted_without_the_tree(tree, tmp_path):
    archive = _pack(tree, tmp_path / "c.tar.xz", "w:xz", "x")
    digest = subprocess.run(["sha256sum", str(archive)], capture_output=True, text=True).stdout[:64]
    p = _accepts(archive, tmp_path, CALICO_ARCHIVE_SHA256=digest, CALICO_FILES_TREE="f" * 40)
    assert p.returncode == 0 and "is the pinned archive's" in p.stderr, p.stderr


@pytest.mark.parametrize("change", ["content", "line end", "mode", "extra file"])
def test_any_other_file_is_refused_before_a_build(tree, tmp_path, change):
    pins = {"CALICO_FILES_TREE": _tree_of(tree), "CALICO_ARCHIVE_SHA256": "0" * 64}
    if change == "content":
        (tree / "go.mod").write_text("replace github.com/projectcalico/api => ../elsewhere\n")
    elif change == "line end":
        (tree / "win.ps1").write_bytes(b"Write-Host hi\n")
    elif change == "mode":
        (tree / "run.sh").chmod(0o644)
    else:
        (tree / "extra.go").write_text("package main\n")
    p = _accepts(_pack(tree, tmp_path / "d.tar.gz", "w:gz", "calico-3.31.3"), tmp_path, **pins)
    assert p.returncode != 0 and "REFUSED" in p.stderr and "expected " + pins["CALICO_FILES_TREE"] in p.stderr, p.stderr


def test_not_an_archive_is_refused(tmp_path):
    bogus = tmp_path / "calico.tar.gz"
    bogus.write_text("not a tar file\n")
    p = _accepts(bogus, tmp_path)
    assert p.returncode != 0 and "REFUSED" in p.stderr and "not a tar archive" in p.stderr, p.stderr


REAL = os.environ.get("NETSLO_CALICO_SRC", "")


@pytest.mark.skipif(not Path(REAL).is_file(), reason="NETSLO_CALICO_SRC names no Calico source archive")
def test_the_real_archive_and_a_github_style_repack_of_it_are_accepted(tmp_path):
    p = _accepts(Path(REAL), tmp_path)
    assert p.returncode == 0 and "is the pinned archive's" in p.stderr, p.stderr
    files = tmp_path / "files" / "calico-3.31.3"
    files.mkdir(parents=True)
    subprocess.run(["tar", "-xf", REAL, "-C", str(files)], check=True)
    repack = tmp_path / "v3.31.3.tar.gz"
    subprocess.run(["tar", "-czf", str(repack), "-C", str(files.parent), files.name], check=True)
    p = _accepts(repack, tmp_path)
    assert p.returncode == 0 and "its files are tag v3.31.3's" in p.stderr, p.stderr
