"""An existing path given as ``--netslo-results DIR`` (two words) moves pytest's rootdir before the
plugin's options are known; a netslo session stops with one line instead of running with another
project's configuration. Real pytest sessions in a small project of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from netslo.core.resources import shipped_slo

INI = "[pytest]\ntestpaths = checks\nmarkers =\n    own: a marker only this project declares\naddopts = --strict-markers\n"
CHECK = "import pytest\n\n@pytest.mark.cni\n@pytest.mark.own\ndef test_in_testpaths():\n    pass\n"
OTHER = "def test_outside_testpaths():\n    pass\n"


def _plugin_args() -> list[str]:
    """``-p netslo.gate.plugin.hooks`` unless an installed pytest11 entry point loads it already."""
    installed = any(ep.name == "netslo" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "netslo.gate.plugin.hooks"]


@pytest.fixture
def project(tmp_path):
    proj = tmp_path / "project"
    (proj / "checks").mkdir(parents=True)
    (proj / "other").mkdir()
    (proj / "pytest.ini").write_text(INI)
    (proj / "checks" / "test_a.py").write_text(CHECK)
    (proj / "other" / "test_b.py").write_text(OTHER)
    outside = tmp_path / "runner-temp" / "results"
    outside.mkdir(parents=True)
    return proj, outside


def _collect(proj, *args):
    return subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *_plugin_args(),
                           *args], cwd=proj, capture_output=True, text=True, timeout=120)


def test_an_existing_path_as_a_separate_word_moves_the_rootdir_and_drops_the_projects_configuration(project):
    """What the check guards against, shown without netslo asked for: pytest alone takes the word for a
    test path, leaves the project's pytest.ini and collects outside its testpaths."""
    proj, outside = project
    moved = _collect(proj, "--alluredir", str(outside))
    assert "other/test_b.py::test_outside_testpaths" in moved.stdout, moved.stdout + moved.stderr
    kept = _collect(proj, f"--alluredir={outside}")
    assert kept.returncode == 0 and "other/test_b.py" not in kept.stdout, kept.stdout + kept.stderr


def test_a_netslo_session_stops_with_one_line_naming_the_option_and_its_one_word_spelling(project):
    proj, outside = project
    proc = _collect(proj, "-m", "cni", "--netslo-results", str(outside))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "netslo:" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"ERROR: netslo: --netslo-results {outside}: "), lines
    assert f"(without it: {proj}, {proj / 'pytest.ini'})" in lines[0] and f"write --netslo-results={outside}" in lines[0]


def test_the_one_word_spelling_and_a_path_inside_the_project_keep_the_projects_configuration(project):
    proj, outside = project
    (proj / "results").mkdir()
    (outside / "junit.xml").write_text("")
    for args in ([f"--netslo-results={outside}"], ["--netslo-results", "results"],
                 ["--netslo-results", "results", "--junitxml", str(outside / "junit.xml")]):   # (--junitxml is pytest's own)
        proc = _collect(proj, "-m", "cni", *args)
        assert proc.returncode == 0, (args, proc.stdout + proc.stderr)
        assert "checks/test_a.py::test_in_testpaths" in proc.stdout and "other/" not in proc.stdout, proc.stdout


def test_path_options_expand_the_home_directory_that_the_shell_leaves_inside_one_word(project, tmp_path):
    """``--netslo-slo=~/slo.yaml`` (the spelling the rootdir check asks for) reads the user's file, and
    ``--netslo-results=~/runs/1`` writes there, not into a directory named ``~`` in the project."""
    proj, _ = project
    home = tmp_path / "home"
    home.mkdir()
    (home / "slo.yaml").write_bytes(shipped_slo("slo.yaml").read_bytes())
    env = {**os.environ, "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(), "-m", "cni",
                           "--netslo-slo=~/slo.yaml", "--netslo-results=~/runs/1"],
                          cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (home / "runs" / "1" / "results.json").is_file(), sorted(p.name for p in home.rglob("*"))
    assert not (proj / "~").exists()
