"""The agent image carries what the agent imports, and only that (netslo/agent/recipe/packages.txt).

The list is checked against netslo's own source: every import statement of every netslo module the
agent can reach from ``netslo.agent`` and ``netslo.agent.session`` (also imports inside functions:
a command imports its module when it runs), following netslo's modules to the third-party ones they
name, and the modules it loads by name (``importlib``: a string naming a netslo module). Imports
inside the functions of a package's ``__init__`` are left out: there they are the lazy dispatch of
a factory (``providers.make_provider``) the agent does not call.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from netslo.agent import image
from netslo.core import resources
from netslo.core.errors import InfrastructureError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(resources.PACKAGE_DIR)


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["netslo", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imported_names(name: str, path: Path, mods) -> set[str]:
    """Dotted names module ``name`` imports (relative ones resolved); in a module that imports by name
    (``importlib.import_module``) also each string constant naming a netslo module, whole or relative
    to the module's package (``probes.MODULES``' values, ``forkserver.WARM``,
    ``agent_session.COMMAND_MODULES``)."""
    is_init = path.name == "__init__.py"
    package = name if is_init else name.rpartition(".")[0]
    source = path.read_text()
    by_name = "import_module" in source
    tree = ast.parse(source)
    top = [n for n in tree.body if not (is_init and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    names = set()
    for node in (n for t in top for n in ast.walk(t)):
        if by_name and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != "__main__":
            names |= {m for m in (node.value, f"{package}.{node.value}") if m in mods}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names |= {module} | {f"{module}.{a.name}" for a in node.names}
    return names


def agent_third_party(starts=("netslo.agent", "netslo.agent.session")) -> dict[str, set[str]]:
    """Top-level third-party module -> the netslo modules reachable from ``starts`` that import it."""
    mods, seen, todo, found = _modules(), set(), list(starts), {}
    while todo:
        name = todo.pop()
        if name in seen or name not in mods:
            continue
        seen.add(name)
        for dotted in _imported_names(name, mods[name], mods):
            parts = dotted.split(".")
            if parts[0] == "netslo":
                todo += [".".join(parts[:k]) for k in range(2, len(parts) + 1)]
            elif parts[0] not in sys.stdlib_module_names:
                found.setdefault(parts[0], set()).add(name)
    return found


def test_packages_txt_is_exactly_what_the_agent_imports():
    dists = metadata.packages_distributions()
    needed = {}
    for module, importers in agent_third_party().items():
        for dist in dists.get(module, [f"(no installed distribution provides {module})"]):
            needed.setdefault(image.canonical(dist), set()).update(importers)
    listed = {image.canonical(n) for n in image.agent_packages()}
    missing = {d: sorted(m)[:3] for d, m in needed.items() if d not in listed}
    assert not missing, f"the agent imports these, packages.txt lacks them: {missing}"
    assert not listed - set(needed), f"packages.txt lists what the agent never imports: {listed - set(needed)}"


def test_the_walk_finds_an_import_inside_a_function_of_an_agent_module():
    # (so the check above can fail: scapy is imported only inside netslo.studies.qos's capture code, paho
    # only by the MQTT probe, which netslo.traffic.probes loads by name)
    found = agent_third_party()
    assert "scapy" in found and "netslo.traffic.probes.mqtt" in found.get("paho", ())
    assert "scipy" not in found    # the agent computes no confidence interval (soak progress: point estimates)
    assert "kubernetes" not in found and "matplotlib" not in found and "pytest" not in found


def test_every_listed_package_is_pinned_in_requirements_and_required_by_netslo():
    pinned = {image.canonical(line.split("==")[0]) for line in (ROOT / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert {image.canonical(n) for n in image.agent_packages()} <= pinned
    pins = image.runtime_pins(only=image.agent_packages())
    assert sorted(image.canonical(p.split("==")[0]) for p in pins) == \
        sorted(map(image.canonical, image.agent_packages()))


def test_a_listed_name_netslo_does_not_require_is_one_line():
    with pytest.raises(InfrastructureError) as e:
        image.runtime_pins(only=["numpy", "no-such-package"])
    assert "no-such-package" in str(e.value) and "packages.txt" in str(e.value) and "\n" not in str(e.value)


def test_the_build_context_pins_only_the_agent_packages(tmp_path):
    ctx = image.write_context(tmp_path / "ctx")
    lines = [line for line in (ctx / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert sorted(image.canonical(line.split("==")[0]) for line in lines) == \
        sorted(map(image.canonical, image.agent_packages()))
    assert (ctx / "netslo" / "agent" / "recipe" / "packages.txt").is_file()   # the Dockerfile reads it


PINS_SH = Path(image.PACKAGES).with_name("pins.sh")


def test_pins_sh_gives_requirements_pins_of_the_listed_packages():
    # the Dockerfile and scripts/kind-offline/agent-image.sh install what this prints
    run = subprocess.run(["sh", str(PINS_SH), str(image.PACKAGES), str(ROOT / "requirements.txt")],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    required = {line for line in (ROOT / "requirements.txt").read_text().splitlines()}
    assert set(run.stdout.split()) <= required
    assert sorted(image.canonical(p.split("==")[0]) for p in run.stdout.split()) == \
        sorted(map(image.canonical, image.agent_packages()))


def test_pins_sh_refuses_a_name_without_a_pin_in_one_line(tmp_path):
    (tmp_path / "packages.txt").write_text("# comment\nnumpy\nno-such-package\n")
    run = subprocess.run(["sh", str(PINS_SH), str(tmp_path / "packages.txt"), str(ROOT / "requirements.txt")],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and "no-such-package" in run.stderr, run.stderr


def test_the_base_image_is_pinned_by_tag_and_digest():
    """A tag alone moves when its publisher rebuilds it: the same netslo version would get another base."""
    froms = [ln.split()[1] for ln in image.RECIPE.read_text().splitlines() if ln.startswith("FROM ")]
    assert froms and all(re.fullmatch(r"[a-z0-9./-]+:[0-9][\w.-]*@sha256:[0-9a-f]{64}", f) for f in froms), froms
