"""IP families in a session: scenarios of a family the run did not ask for are deselected, not skipped.

A run asks for ``--netslo-ip-family ipv4|ipv6|dual`` (default dual on the embedded provider, ipv4
on the Kubernetes ones). A parametrized ``scenario`` of another family is deselected at collection
and the terminal summary names it, so an IPv4-only run stays green without pretending it measured
IPv6; a scenario of a family the run asked for but the cluster lacks errors when measured
(``runner.target``: InfrastructureError naming the missing address), it never passes or skips.
"""

from __future__ import annotations

from netslo.gate.plugin.deselection import deselect, scenario_of
from netslo.gate.plugin.hooks import OPTIONS


def scenario_family(item) -> str | None:
    """The IP family of the test's parametrized ``scenario``, None for a test without one."""
    return getattr(scenario_of(item), "family", None)


def pytest_collection_modifyitems(session, config, items):
    if OPTIONS not in config.stash:
        return
    o = config.stash[OPTIONS]
    deselect(config, items, [i for i in items if scenario_family(i) not in (None, *o.families)],
             f"scenarios of another IP family deselected (the run asked for --netslo-ip-family {o.ip_family})")
