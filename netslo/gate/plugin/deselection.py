"""Tests deselected with a reason: dropped at collection, not skipped (nothing was measured, and a
skip would have to be declared), and each reason named with its tests in the terminal summary."""

from __future__ import annotations

import pytest

DESELECTED = pytest.StashKey[list]()     # [(reason, [test names]), ...] in the order they were dropped


def param_of(item, name: str):
    """The test's parametrized ``name``, or None for a test without one."""
    spec = getattr(item, "callspec", None)
    return spec.params.get(name) if spec is not None else None


def scenario_of(item):
    """The test's parametrized ``scenario``, or None for a test without one."""
    return param_of(item, "scenario")


def deselect(config, items: list, dropped: list, reason: str) -> None:
    """Remove ``dropped`` from ``items`` (in place), tell pytest, and keep ``reason`` for the summary:
    "netslo: <n> <reason>: <names>"."""
    if not dropped:
        return
    gone = set(map(id, dropped))
    items[:] = [i for i in items if id(i) not in gone]
    config.hook.pytest_deselected(items=dropped)
    config.stash.setdefault(DESELECTED, []).append((reason, [i.name for i in dropped]))


def pytest_terminal_summary(terminalreporter, config):
    for reason, names in config.stash.get(DESELECTED, []):
        terminalreporter.write_line(f"netslo: {len(names)} {reason}: {', '.join(names)}")
