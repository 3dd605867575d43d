"""The package's layout holds: at most 12 entries in netslo/, no import circle between its subpackages
(module- and function-level imports, read from the source with ``ast``), each subpackage importing only
the ones below it in ``LAYERS`` (docs/architecture.md), and every module named in a string (the warm
agent's module lists, ``python -m netslo...`` command lines in code, manifests, docs and scripts) exists."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from netslo.agent.forkserver import WARM
from netslo.agent.session import COMMAND_MODULES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "netslo"
# low to high: a subpackage may import those before it, never one after it
LAYERS = ("core", "stats", "traffic", "impair", "agent", "providers", "slo", "studies", "report", "gate",
          "__main__")
MAX_ENTRIES = 12


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """Absolute names an import statement in ``module`` imports (submodules of a from-import included)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [base] + [f"{base}.{a.name}" for a in node.names]


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """{top-level entry of the package: the other entries it imports}, every import in every module
    counted wherever it stands (a function-level import is a dependency too)."""
    name = package_dir.name
    entries = {p.stem for p in package_dir.iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    graph: dict[str, set[str]] = {e: set() for e in entries}
    for path in package_dir.rglob("*.py"):
        rel = path.relative_to(package_dir.parent).with_suffix("")
        is_package = rel.name == "__init__"
        module = ".".join(rel.parts[:-1] if is_package else rel.parts)
        src = module.split(".")[1] if "." in module else None
        if src is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, module, is_package):
                parts = target.split(".")
                if parts[0] == name and len(parts) > 1 and parts[1] in entries and parts[1] != src:
                    graph[src].add(parts[1])
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one entry (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_netslo_has_at_most_twelve_entries():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_ENTRIES, entries
    assert set(LAYERS) | {"__init__"} == {Path(e).stem for e in entries}, "LAYERS names every entry (docs/architecture.md)"


def test_no_import_circle_between_subpackages():
    assert circles(import_graph(PACKAGE)) == []


def test_each_subpackage_imports_only_the_ones_below_it():
    graph = import_graph(PACKAGE)
    upward = sorted(f"{a} -> {b}" for a, deps in graph.items() if a in LAYERS
                    for b in deps if b in LAYERS and LAYERS.index(b) > LAYERS.index(a))
    assert upward == [], f"imports against the layer order {' < '.join(LAYERS)}: {upward}"


def test_the_scan_finds_a_circle_made_by_a_function_level_import(tmp_path):
    """The check can fail: a package whose lower stage imports a higher one inside a function."""
    pkg = tmp_path / "pkg"
    for sub, body in (("low", "def f():\n    from pkg.high import g\n    return g\n"),
                      ("high", "from ..low import f\n\ndef g():\n    return f\n"),
                      ("apart", "import os\n")):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
        (pkg / sub / "mod.py").write_text(body)
    (pkg / "__init__.py").write_text("")
    graph = import_graph(pkg)
    assert graph == {"low": {"high"}, "high": {"low"}, "apart": set()}
    assert circles(graph) == [["high", "low"]]


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _resolves(dotted: str) -> bool:
    """A module, or an attribute of one (``netslo.slo.runner.REMEASURE_AFTER_STALL``)."""
    if _module_exists(dotted):
        return True
    module, _, attr = dotted.rpartition(".")
    return bool(module) and _module_exists(module) and hasattr(importlib.import_module(module), attr)


def test_the_warm_module_lists_name_modules_that_exist():
    names = set(WARM) | {m for mods in COMMAND_MODULES.values() for m in mods}
    missing = sorted(n for n in names if not _module_exists(n))
    assert missing == []


RUN_MODULE = re.compile(r"""-m["',\s]+(netslo(?:\.[A-Za-z_]\w*)*)""")


def _tracked(*suffixes: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not out:
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    return [ROOT / f for f in out if f.endswith(suffixes) or Path(f).name == "Dockerfile"]


def test_every_python_dash_m_command_names_a_module_that_exists():
    """Each module that a ``python -m`` command line (or an argv ``"-m"`` item) in tracked code, manifests,
    workflows, docs and scripts runs exists."""
    named = {}
    for path in _tracked(".py", ".md", ".sh", ".yml", ".yaml", ".toml", ".ini"):
        for m in RUN_MODULE.finditer(path.read_text(encoding="utf-8", errors="replace")):
            named.setdefault(m.group(1), path.relative_to(ROOT))
    assert "netslo.agent" in named and "netslo.report.regression" in named
    missing = {n: str(p) for n, p in named.items() if not _module_exists(n)}
    assert missing == {}


def test_every_netslo_name_in_a_string_of_the_package_resolves():
    """String constants such as ``"netslo.stats.sample_file"`` (module lists, lazy imports, messages)
    name a module or a module's attribute that exists (a string naming one of netslo's subpackages
    first; ``netslo.svc.cluster.local`` is a DNS name)."""
    entries = "|".join(p.stem for p in PACKAGE.iterdir() if p.stem != "__init__" and p.name != "__pycache__")
    dotted = re.compile(rf"^netslo\.(?:{entries})(?:\.[A-Za-z_]\w*)*$")
    bad = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and dotted.match(node.value):
                if not _resolves(node.value):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert bad == []


def test_the_lazy_exports_of_report_regression_name_its_modules():
    from netslo.report import regression
    missing = sorted(m for m in {regression._WHERE[n] for n in regression.__all__}
                     if not _module_exists(f"netslo.report.regression.{m}"))
    assert missing == []
