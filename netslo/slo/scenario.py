"""Scenarios: one measurement the gate judges = placement x protocol x message-size profile x IP family.

Profiles come from the source studies' workloads (request/response bytes, application payload):
command & control 1 kB/1 kB, telemetry 10 kB/1 kB, image 100 kB/1 kB, plus a 64 B probe and
``1460b``: 1460 B each way, the largest payload one 1500-byte IPv4 frame carries (TCP's MSS there; a
UDP datagram of it is 1488 B), which takes two frames at VXLAN's usual pod MTU of 1450: what a change of MTU
moves.
UDP carries at most one datagram per request, so it has no 100k profile. The family (``ipv4``, the
default, or ``ipv6``) picks which of the server pod's addresses the probe targets; an IPv4 scenario's
id carries no family (ids and baselines from before IPv6 stay valid), an IPv6 one ends in ``-ipv6``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from netslo.core.errors import SpecError
from netslo.core.families import FAMILIES, IPV4
from netslo.providers.exposure import check_name

PROFILES = {"64b": (64, 64), "1k": (1000, 1000), "1460b": (1460, 1460), "10k": (10_000, 1000),
            "100k": (100_000, 1000)}
PLACEMENTS = ("same-node", "cross-node")
PROTOCOLS = ("udp", "tcp-rr", "tcp-crr", "http", "http-new",
             "ws", "wss", "https", "https-new", "mqtt-qos0", "mqtt-qos1", "mqtt-qos2")
RESPONDER_OF = {"udp": "udp", "tcp-rr": "tcp", "tcp-crr": "tcp", "http": "http", "http-new": "http",
                "ws": "ws", "wss": "tls", "https": "tls", "https-new": "tls",
                "mqtt-qos0": "mqtt", "mqtt-qos1": "mqtt", "mqtt-qos2": "mqtt", "dns": "dns"}
UDP_PROFILES = ("64b", "1k", "1460b", "10k")


@dataclass(frozen=True)
class Scenario:
    """What to measure; ``interval`` (s) overrides the SLO file's default send period if set."""

    placement: str
    protocol: str
    profile: str
    interval: float | None = None
    tos: int = 0
    family: str = IPV4

    def __post_init__(self):
        for name, value, allowed in (("placement", self.placement, PLACEMENTS),
                                     ("protocol", self.protocol, PROTOCOLS),
                                     ("profile", self.profile, tuple(PROFILES)),
                                     ("family", self.family, FAMILIES)):
            if value not in allowed:
                raise SpecError(f"scenario.{name}", value, f"one of {', '.join(allowed)}")
        if self.protocol == "udp" and self.profile not in UDP_PROFILES:
            raise SpecError("scenario.profile", self.profile, f"one of {', '.join(UDP_PROFILES)} for udp")

    @property
    def id(self) -> str:
        """Readable test id, e.g. 'cross-node-udp-1k' (IPv4), 'cross-node-udp-1k-ipv6'."""
        base = f"{self.placement}-{self.protocol}-{self.profile}"
        return base if self.family == IPV4 else f"{base}-{self.family}"

    @property
    def sizes(self) -> tuple[int, int]:
        return PROFILES[self.profile]

    def labels(self) -> dict:
        """What SLO selectors match on."""
        return {"placement": self.placement, "protocol": self.protocol, "profile": self.profile,
                "family": self.family}

    def probe_fields(self) -> dict:
        """ProbeSpec fields this scenario sets beyond the runner's (``netslo.studies.dns`` sets some)."""
        return {}

    def __str__(self) -> str:
        return self.id


def matrix(placements=PLACEMENTS, protocols=PROTOCOLS, profiles=("1k",), families=(IPV4,)) -> list[Scenario]:
    """Cartesian product, skipping combinations that cannot exist (udp-100k)."""
    out = []
    for fam, pl, pr, pf in itertools.product(families, placements, protocols, profiles):
        if pr == "udp" and pf not in UDP_PROFILES:
            continue
        out.append(Scenario(pl, pr, pf, family=fam))
    return out


@dataclass(frozen=True)
class ExposedScenario(Scenario):
    """A scenario reached over an exposure path; SLO selectors still match protocol/placement/profile."""

    exposure: str = "pod-ip"

    def __post_init__(self):
        super().__post_init__()
        check_name(self.exposure)

    @property
    def id(self) -> str:
        return f"{super().id}-via-{self.exposure}"

    def labels(self) -> dict:
        return {**super().labels(), "exposure": self.exposure}
