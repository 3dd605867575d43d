"""netslo stays in its own namespace inside a pytest session that other plugins share (pytest-kind,
pytest-kubernetes, pytest-helm-charts, pytest-benchmark, allure-pytest): every option it adds starts
with --netslo-, every fixture with netslo_, and its code lives under the netslo package."""

import importlib
import inspect
import subprocess
import sys

import pytest

from netslo.core.resources import shipped_slo

PLUGIN_MODULES = ["netslo.gate.plugin.hooks", "netslo.gate.plugin.gate", "netslo.gate.plugin.report", "netslo.gate.plugin.progress",
                  "netslo.gate.plugin.cluster", "netslo.gate.plugin.impair", "netslo.gate.plugin.protocols", "netslo.gate.plugin.qos"]


class _Group:
    def __init__(self, seen):
        self.seen = seen

    def addoption(self, *names, **kw):
        self.seen.extend(names)


class _Parser:
    def __init__(self):
        self.seen = []

    def getgroup(self, *a, **kw):
        return _Group(self.seen)

    def addini(self, *a, **kw):
        self.seen.append(("ini", a[0]))


def test_every_option_is_prefixed():
    p = _Parser()
    for name in PLUGIN_MODULES:
        mod = importlib.import_module(name)
        if hasattr(mod, "pytest_addoption"):
            mod.pytest_addoption(p)
    assert p.seen and all(isinstance(o, str) and o.startswith("--netslo-") for o in p.seen), p.seen


def test_every_fixture_is_prefixed():
    names = []
    for name in PLUGIN_MODULES:
        mod = importlib.import_module(name)
        for attr, obj in vars(mod).items():
            fdef = getattr(obj, "_fixture_function_marker", None) or getattr(obj, "_pytestfixturefunction", None)
            if fdef is not None or type(obj).__name__ == "FixtureFunctionDefinition":
                if inspect.getmodule(getattr(obj, "__wrapped__", obj)) in (mod, None):
                    names.append(getattr(fdef, "name", None) or attr)
    assert names and all(n.startswith("netslo_") for n in names), names


def test_nothing_generic_is_installed(tmp_path):
    """Outside the repository, the old top-level packages are gone; the plugin imports from netslo."""
    code = ("import importlib.util as u, sys; "
            "sys.exit(0 if u.find_spec('plugins') is None and u.find_spec('fixtures') is None "
            "and u.find_spec('netslo.gate.plugin.hooks') is not None else 1)")
    assert subprocess.run([sys.executable, "-c", code], cwd=tmp_path).returncode == 0


HEAVY = ("scipy", "matplotlib", "kubernetes")   # ~1 s, ~0.7 s, ~1.2 s to import on the CI machine


def test_inert_and_light_in_a_project_that_did_not_ask(tmp_path):
    """Installed, the plugin loads in every pytest session of the environment: there it acts on nothing
    and imports none of the statistics, plotting or Kubernetes libraries before a gate asks for them
    (they made ``pytest --help`` take 3.4 s instead of 0.6 s)."""
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert True\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        "def pytest_unconfigure(config):\n"
        f"    heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "    with open('loaded.txt', 'w') as f:\n"
        "        f.write(' '.join(heavy))\n")
    loaded = tmp_path / "loaded.txt"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
    assert loaded.read_text() == "", "imported at plugin load: " + loaded.read_text()
    loaded.unlink()                            # written again by the --help session's unconfigure
    h = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert h.returncode == 0 and "netslo: network SLO gate" in h.stdout and "--netslo-provider" in h.stdout, h.stderr
    assert loaded.read_text() == "", "imported at plugin load (--help): " + loaded.read_text()


def test_asked_for_with_a_missing_slo_file_is_one_usage_error(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert True\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--netslo-slo", "slo.yaml"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 4, p.stdout + p.stderr
    assert "--netslo-slo: value 'slo.yaml' — expected a readable YAML file" in p.stderr


@pytest.mark.parametrize("args", [["-m", "cni"], ["--netslo-nodes", "2"]])
def test_asked_for_without_an_slo_file_of_its_own_takes_the_shipped_one(tmp_path, args):
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert True\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode in (0, 5), p.stdout + p.stderr      # 5: -m cni selects no test of this project
    assert f"slo={shipped_slo()} " in p.stdout, p.stdout
