"""Scratch files and directories in the system temp directory, named for the process that owns them.

``mkdtemp(kind)`` and ``mkstemp(kind, suffix)`` create ``netslo-<kind>-<pid>-<random>[suffix]``.
Their owners remove them when done; ``reap()`` (run at every embedded cluster start and by
``python -m netslo reap``) removes those whose owner PID is gone, i.e. what a killed run left.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from netslo.core.procs import alive

KINDS = ("exposure", "mosquitto")
NAME_RE = re.compile(rf"netslo-({'|'.join(KINDS)})-(\d+)-[A-Za-z0-9_]+(\.[a-z]+)?")


def _prefix(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"scratch kind: value {kind!r} — expected one of {', '.join(KINDS)}")
    return f"netslo-{kind}-{os.getpid()}-"


def mkdtemp(kind: str) -> Path:
    """A new private directory owned by this process."""
    return Path(tempfile.mkdtemp(prefix=_prefix(kind)))


def mkstemp(kind: str, suffix: str = "") -> tuple[int, str]:
    """A new file owned by this process: (open descriptor, path), as ``tempfile.mkstemp``."""
    return tempfile.mkstemp(prefix=_prefix(kind), suffix=suffix)


def reap(dry_run: bool = False, root: str | os.PathLike | None = None) -> list[str]:
    """Remove scratch entries of dead owners under ``root`` (default: the temp directory); one line each."""
    said = []
    for path in sorted(Path(root or tempfile.gettempdir()).glob("netslo-*")):
        m = NAME_RE.fullmatch(path.name)
        if m is None or alive(int(m.group(2))):
            continue
        what = "directory" if path.is_dir() and not path.is_symlink() else "file"
        said.append(f"reap: scratch {what} {path} (owner process {m.group(2)} gone)")
        if dry_run:
            continue
        if what == "directory":
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
    return said
