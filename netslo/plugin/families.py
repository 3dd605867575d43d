"""IP families in a session: scenarios of a family the run did not ask for are deselected, not skipped.

A run asks for ``--netslo-ip-family ipv4|ipv6|dual`` (default dual on the embedded provider, ipv4
on the Kubernetes ones). A parametrized ``scenario`` of another family is deselected at collection
and the terminal summary names it, so an IPv4-only run stays green without pretending it measured
IPv6; a scenario of a family the run asked for but the cluster lacks errors when measured
(``runner.target``: InfrastructureError naming the missing address), it never passes or skips.
"""

from __future__ import annotations

import pytest

from netslo.plugin.hooks import OPTIONS

OTHER_FAMILY = pytest.StashKey[list]()


def scenario_family(item) -> str | None:
    """The IP family of the test's parametrized ``scenario``, None for a test without one."""
    spec = getattr(item, "callspec", None)
    scenario = spec.params.get("scenario") if spec is not None else None
    return getattr(scenario, "family", None)


def pytest_collection_modifyitems(session, config, items):
    if OPTIONS not in config.stash:
        return
    wanted = config.stash[OPTIONS].families
    dropped = [i for i in items if scenario_family(i) not in (None, *wanted)]
    if dropped:
        gone = set(map(id, dropped))
        items[:] = [i for i in items if id(i) not in gone]
        config.hook.pytest_deselected(items=dropped)
        config.stash[OTHER_FAMILY] = [i.name for i in dropped]


def pytest_terminal_summary(terminalreporter, config):
    dropped = config.stash.get(OTHER_FAMILY, [])
    if dropped:
        o = config.stash[OPTIONS]
        terminalreporter.write_line(
            f"netslo: {len(dropped)} scenarios of another IP family deselected (the run asked for "
            f"--netslo-ip-family {o.ip_family}): {', '.join(dropped)}")
