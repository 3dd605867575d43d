"""C programs netslo compiles on first use with the system's C compiler, cached by source hash.

A build lands in ``<cache>/<stem>-<sha256[:16]>.<suffix>`` next to its source; a cold cache builds
it (well under a second each), later runs reuse it, and a build of a new source removes the builds
of earlier ones.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path


def build(cache: Path, stem: str, suffix: str, source: str, flags: list[str], libs: list[str],
          what: str) -> tuple[Path | None, str]:
    """(path of the build of ``source``, "") or (None, why not). ``what`` names it in the reason."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    out = cache / f"{stem}-{digest}{suffix}"
    if out.exists():
        return out, ""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, f"no C compiler (cc) to build {what}"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return None, f"cannot create {cache} for {what}: {e}"
    src, tmp = out.with_suffix(".c"), out.with_suffix(f".{os.getpid()}.tmp")
    src.write_text(source)
    done = subprocess.run([cc, *flags, "-o", str(tmp), str(src), *libs], capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"building {what} failed: {done.stderr.strip()[-300:]}"
    os.replace(tmp, out)
    for old in cache.glob(f"{stem}-*"):   # earlier sources' builds (not another process's .tmp)
        if old.name.split(".")[0] != f"{stem}-{digest}" and old.suffix in (suffix, ".c"):
            old.unlink(missing_ok=True)
    return out, ""
