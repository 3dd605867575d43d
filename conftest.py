"""Root conftest. When netslo is pip-installed its ``pytest11`` entry point loads the plugin early
(so ``--slo-file /abs/path`` parses before pytest picks its rootdir); otherwise load it from the tree.

``pytest -m cni`` (the gate) with the default test paths does not import netslo's own tests: no test
under tests/unit or tests/integration carries the ``cni`` mark (tests/unit/test_gate_collection.py
checks it), and importing their ~70 modules only to deselect them cost every gate ~4 s of collection."""

from importlib.metadata import entry_points
from pathlib import Path

import pytest

_installed = any(ep.name == "netslo" for ep in entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["netslo.gate.plugin.hooks"]

OWN_TESTS = {Path(__file__).parent / "tests" / d for d in ("unit", "integration")}


def pytest_ignore_collect(collection_path, config):
    if (collection_path in OWN_TESTS and config.getoption("markexpr") == "cni"
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS):
        return True
    return None
