"""HOST:PORT endpoints as command lines give them (a probe's ``--target``, the proxy's ``--upstream``)."""

from __future__ import annotations

from netslo.core.families import parse_host_port


def parse_target(text: str, field: str = "--target") -> tuple[str, int]:
    """'10.244.1.5:7001' -> ('10.244.1.5', 7001), '[fd00::5]:7001' -> ('fd00::5', 7001); SpecError
    naming ``field`` otherwise (``families.parse_host_port``)."""
    return parse_host_port(text, field)
