"""Scratch files carry their owner's PID; reap removes those of dead owners and nothing else."""

import os
import subprocess
import sys

import pytest

from netslo.core import scratch
from netslo.core.resources import IMPORT_ROOT

CHILD = ("from netslo.core import scratch; import os; d = scratch.mkdtemp('exposure'); (d / 'ready').write_text('1'); "
         "fd, p = scratch.mkstemp('mosquitto', '.conf'); os.close(fd); print(d); print(p)")


def test_reap_removes_what_a_dead_owner_left_and_keeps_the_rest(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD], env={**os.environ, "TMPDIR": str(tmp_path),
                                                           "PYTHONPATH": str(IMPORT_ROOT)},
                         check=True, capture_output=True, text=True).stdout.split()
    dead_dir, dead_file = out
    assert os.path.isdir(dead_dir) and os.path.isfile(dead_file)       # the child exited without removing them
    mine = tmp_path / f"netslo-exposure-{os.getpid()}-keepme"
    mine.mkdir()
    others = [tmp_path / "netslo-kind-netslo-1a2b3c", tmp_path / "netslo-exposure-jnaqknxi", tmp_path / "unrelated"]
    for o in others:
        o.mkdir()

    listed = scratch.reap(dry_run=True, root=tmp_path)
    assert len(listed) == 2 and os.path.isdir(dead_dir) and os.path.isfile(dead_file)
    said = scratch.reap(root=tmp_path)
    assert said == listed
    assert any(f"scratch directory {dead_dir}" in s for s in said)
    assert any(f"scratch file {dead_file}" in s for s in said)
    assert not os.path.exists(dead_dir) and not os.path.exists(dead_file)
    assert mine.is_dir() and all(o.is_dir() for o in others)
    assert scratch.reap(root=tmp_path) == []


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="expected one of exposure, mosquitto"):
        scratch.mkdtemp("other")
