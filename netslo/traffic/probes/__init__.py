"""Clients that send on an open-loop schedule and return raw ``SampleSet`` rows."""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass


@dataclass
class ProbeSpec:
    """What one probe run does. Times in seconds, sizes in bytes (application payload)."""

    protocol: str                 # one of MODULES below: udp | tcp-rr | tcp-crr | http | ... | icmp | dns
    host: str
    port: int
    count: int = 1000
    interval: float = 0.002       # open-loop send period, s
    req_bytes: int = 1000
    resp_bytes: int = 1000
    tos: int = 0                  # IP TOS byte to mark requests with
    nodelay: bool = True          # TCP_NODELAY on the client socket(s)
    wait: float = 1.0             # how long to wait for answers after the last send, s
    cpu: int | None = None        # pin the probe to this CPU (None = not pinned)
    sender: str = "python"        # udp only: "native" sends from a compiled loop (probes.udp_native)
    dns: object = None            # dns only: what each lookup asks (probes.dns.DnsOptions; None = its defaults)
    give_up: float | None = None  # tcp-crr only: abort a connection unanswered after this many s (its request
                                  # is lost) and end every connection with RST (no TIME_WAIT); < GIVE_UP_MAX_S
    source_ports: str = "kernel"  # tcp-crr only: "kernel" (connect() picks) or "in-turn" (probes.tcp.SourcePorts)

    @property
    def interval_ns(self) -> int:
        """The send period in whole ns, rounded (2e-4 s is 199999.99... ns as a float)."""
        return round(self.interval * 1e9)

    def meta(self) -> dict:
        d = asdict(self)
        d["clock"] = "CLOCK_MONOTONIC"
        return d


def run(spec: ProbeSpec, sink=None):
    """Dispatch to the protocol's probe. Returns a SampleSet.

    ``sink`` (e.g. ``netslo.stats.sample_file.ChunkWriter``) receives the rows as compact chunks; every
    probe but icmp streams them while it runs (``netslo.stats.stream``); icmp hands over its rows at the
    end (its 16-bit sequence caps a run at 65 535 requests). With a sink the returned set holds
    what the sink keeps in memory (all chunks for ``stream.ChunkList``, none for a file writer:
    then the metadata only)."""
    check_sender(spec.protocol, spec.sender)
    if spec.sender == "native":
        return _module("udp_native").run(spec, sink)
    if spec.protocol not in MODULES:
        raise ValueError(f"protocol: value {spec.protocol!r} — expected one of {sorted(MODULES)}")
    probe = _module(MODULES[spec.protocol])
    if spec.protocol != "icmp":
        return probe.run(spec, sink)
    result = probe.run(spec)
    if sink is None:
        return result
    for chunk in result.chunks():
        sink.write(chunk)
    return type(result)(meta=result.meta, chunks=getattr(sink, "chunks", []))


SENDERS = ("python", "native")
# a tcp-crr give-up must end a connection before its SYN is sent again (initial RTO 1 s, RFC 6298 2.1),
# so a SYN a policy dropped never gets through later, into the next change's window
GIVE_UP_MAX_S = 1.0


SOURCE_PORTS = ("kernel", "in-turn")   # how tcp-crr's connections get their source ports (probes.tcp)
IN_TURN = SOURCE_PORTS[1]


def check_source_ports(protocol: str, mode: str, field: str = "source_ports") -> None:
    """SpecError unless ``mode`` is one of SOURCE_PORTS, and "kernel" for any protocol but tcp-crr."""
    from netslo.core.errors import SpecError
    if mode not in SOURCE_PORTS:
        raise SpecError(field, mode, f"one of {', '.join(SOURCE_PORTS)}")
    if mode != "kernel" and protocol != "tcp-crr":
        raise SpecError(field, mode, f"'kernel' for {protocol}: only tcp-crr (a connection per request) "
                        "takes its source ports in turn")


def check_give_up(protocol: str, give_up: float | None, field: str = "give_up") -> None:
    """SpecError unless ``give_up`` is None, or a tcp-crr one in (0, GIVE_UP_MAX_S) s."""
    from netslo.core.errors import SpecError
    if give_up is None:
        return
    if protocol != "tcp-crr":
        raise SpecError(field, f"{give_up:g}s", f"no value for {protocol}: only tcp-crr (a connection per "
                        "request) can give up on one request")
    if not 0 < give_up < GIVE_UP_MAX_S:
        raise SpecError(field, f"{give_up:g}s", f"a duration in (0, {GIVE_UP_MAX_S:g}s): below the SYN "
                        "retransmission timeout, so a dropped SYN is never sent again")

# protocol -> the module (netslo.traffic.probes.<name>) that probes it: every protocol a probe speaks (the
# agent's choices, in this order; ws .. icmp are the protocol breadth of issue 7). Only the probed
# protocol's module is imported, because a probe's start-up is paid on every measurement (aiohttp
# alone takes ~0.17 s to import: a UDP probe of 0.24 s start-up spent most of it importing the HTTP
# and WebSocket probes it did not use)
MODULES = {"udp": "udp", "tcp-rr": "tcp", "tcp-crr": "tcp", "http": "http", "http-new": "http",
           "ws": "websocket", "wss": "websocket", "https": "http", "https-new": "http", "mqtt-qos0": "mqtt",
           "mqtt-qos1": "mqtt", "mqtt-qos2": "mqtt", "icmp": "icmp", "dns": "dns"}

def _module(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def check_sender(protocol: str, sender: str, field: str = "sender") -> None:
    """SpecError (a ValueError) unless ``sender`` is one of SENDERS and fits ``protocol`` (native: udp only)."""
    from netslo.core.errors import SpecError
    if sender not in SENDERS:
        raise SpecError(field, sender, f"one of {list(SENDERS)}")
    if sender == "native" and protocol != "udp":
        raise SpecError(field, sender, f"'python' (the compiled sender is for protocol udp only, not {protocol})")
