"""HOST:PORT endpoints as command lines give them (a probe's ``--target``, the proxy's ``--upstream``)."""

from __future__ import annotations

from .errors import SpecError


def parse_target(text: str, field: str = "--target") -> tuple[str, int]:
    """'10.244.1.5:7001' -> ('10.244.1.5', 7001); SpecError naming ``field`` otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(field, text, "HOST:PORT with a port 1..65535")
    return host, int(port)
