"""Skip categories of the gate, and which skips a run declared expected.

A gate is green only when every selected SLO test was measured and met. A test that cannot run here
is skipped with a *category*; the session fails on any skip whose category the run did not declare
expected (``--netslo-allow-skip CATEGORY`` or ``allow_skips: [CATEGORY]`` in the SLO file). Known CNI
limitations (``netslo.studies.qos.limits``) are declared by the table itself.

A skip reason reads ``netslo[<category>]: <why>``; a skip without that prefix (raised by anything
other than netslo) is never expected.
"""

from __future__ import annotations

import re

from netslo.core.errors import SpecError

CATEGORIES = {
    "needs_netem": "no kernel with sch_netem for impairment tests (neither the host nor user-mode-linux)",
    "provider": "the provider cannot do what the test needs (e.g. qdiscs on node links need the embedded provider)",
    "nodes": "the test needs more nodes than --netslo-nodes gives",
    "tool": "a program the test needs is not installed (iperf3, mosquitto, iptables, ...)",
    "capability": "the protocol or provider cannot measure a metric the test needs (e.g. one-way delay without a shared clock)",
    "limitation": "a known CNI limitation from netslo.studies.qos.limits (always declared)",
    "ip_family": "the cluster has no address of the IP family a scenario needs (e.g. IPv6 on an IPv4-only cluster)",
    "not_gated": "no objective of the SLO file selects the scenario, and the file says gate: selected-only "
                 "(declared by that file)",
}
ALWAYS_DECLARED = frozenset({"limitation"})
_PREFIX = re.compile(r"^(?:Skipped: )?netslo\[([a-z_]+)\]: ")


def reason(category: str, why: str) -> str:
    """The skip message of ``category``: ``netslo[<category>]: <why>``."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown skip category {category!r}")
    return f"netslo[{category}]: {why}"


def category_of(message: str) -> str | None:
    """The category a skip message carries, or None for a skip netslo did not raise."""
    m = _PREFIX.match(message or "")
    return m.group(1) if m else None


def parse_allowed(values, field: str) -> frozenset:
    """Validated categories from a list of (comma-separated) strings; SpecError names the bad one."""
    out = set()
    for value in values or ():
        for name in filter(None, (v.strip() for v in str(value).split(","))):
            if name not in CATEGORIES:
                raise SpecError(field, name, f"one of {', '.join(sorted(CATEGORIES))}")
            out.add(name)
    return frozenset(out)
