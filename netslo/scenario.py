"""Scenarios: one measurement the gate judges = placement x protocol x message-size profile.

Profiles come from the source studies' workloads (request/response bytes, application payload):
command & control 1 kB/1 kB, telemetry 10 kB/1 kB, image 100 kB/1 kB, plus a 64 B probe.
UDP carries at most one datagram per request, so it has no 100k profile.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .errors import SpecError

PROFILES = {"64b": (64, 64), "1k": (1000, 1000), "10k": (10_000, 1000), "100k": (100_000, 1000)}
PLACEMENTS = ("same-node", "cross-node")
PROTOCOLS = ("udp", "tcp-rr", "tcp-crr", "http", "http-new",
             "ws", "wss", "https", "https-new", "mqtt-qos0", "mqtt-qos1", "mqtt-qos2")
RESPONDER_OF = {"udp": "udp", "tcp-rr": "tcp", "tcp-crr": "tcp", "http": "http", "http-new": "http",
                "ws": "ws", "wss": "tls", "https": "tls", "https-new": "tls",
                "mqtt-qos0": "mqtt", "mqtt-qos1": "mqtt", "mqtt-qos2": "mqtt", "dns": "dns"}
UDP_PROFILES = ("64b", "1k", "10k")


@dataclass(frozen=True)
class Scenario:
    """What to measure; ``interval`` (s) overrides the SLO file's default send period if set."""

    placement: str
    protocol: str
    profile: str
    interval: float | None = None
    tos: int = 0

    def __post_init__(self):
        for name, value, allowed in (("placement", self.placement, PLACEMENTS),
                                     ("protocol", self.protocol, PROTOCOLS),
                                     ("profile", self.profile, tuple(PROFILES))):
            if value not in allowed:
                raise SpecError(f"scenario.{name}", value, f"one of {', '.join(allowed)}")
        if self.protocol == "udp" and self.profile not in UDP_PROFILES:
            raise SpecError("scenario.profile", self.profile, f"one of {', '.join(UDP_PROFILES)} for udp")

    @property
    def id(self) -> str:
        """Readable test id, e.g. 'cross-node-udp-1k'."""
        return f"{self.placement}-{self.protocol}-{self.profile}"

    @property
    def sizes(self) -> tuple[int, int]:
        return PROFILES[self.profile]

    def labels(self) -> dict:
        """What SLO selectors match on."""
        return {"placement": self.placement, "protocol": self.protocol, "profile": self.profile}

    def probe_fields(self) -> dict:
        """ProbeSpec fields this scenario sets beyond the runner's (``netslo.dns_scenario`` sets some)."""
        return {}

    def __str__(self) -> str:
        return self.id


def matrix(placements=PLACEMENTS, protocols=PROTOCOLS, profiles=("1k",)) -> list[Scenario]:
    """Cartesian product, skipping combinations that cannot exist (udp-100k)."""
    out = []
    for pl, pr, pf in itertools.product(placements, protocols, profiles):
        if pr == "udp" and pf not in UDP_PROFILES:
            continue
        out.append(Scenario(pl, pr, pf))
    return out
