"""Address families: what a pod network carries (``ipv4``, ``ipv6`` or both, ``dual``)."""

from __future__ import annotations

from .errors import SpecError

FAMILIES = ("ipv4", "ipv6")
CLUSTER_FAMILIES = ("ipv4", "ipv6", "dual")


def cluster_family(value: str, field: str) -> str:
    """A cluster's address family setting, validated: ipv4, ipv6 or dual."""
    if value not in CLUSTER_FAMILIES:
        raise SpecError(field, value, f"one of {', '.join(CLUSTER_FAMILIES)}")
    return value


def of_address(address: str) -> str:
    """``ipv6`` for an address with a colon, else ``ipv4``."""
    return "ipv6" if ":" in address else "ipv4"
