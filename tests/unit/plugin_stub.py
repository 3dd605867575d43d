"""A plugin module's collection and terminal-summary hooks run against a stub config (no pytest session)."""

from types import SimpleNamespace

import pytest

from netslo.gate.plugin import deselection
from netslo.gate.plugin.hooks import OPTIONS


def collect(plugin, options, items: list, cli: dict | None = None) -> tuple[list, list]:
    """Run ``plugin``'s pytest_collection_modifyitems on ``items`` (changed in place) with ``options``
    in the stash and command-line options ``cli`` (name -> value; others False); (deselected items,
    the lines the deselection summary prints)."""
    stash = pytest.Stash()
    stash[OPTIONS] = options
    seen = []
    config = SimpleNamespace(stash=stash, hook=SimpleNamespace(pytest_deselected=lambda items: seen.extend(items)),
                             getoption=lambda name: (cli or {}).get(name, False))
    plugin.pytest_collection_modifyitems(None, config, items)
    lines = []
    deselection.pytest_terminal_summary(SimpleNamespace(write_line=lines.append), config)
    return seen, lines
