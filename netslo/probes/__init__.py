"""Clients that send on an open-loop schedule and return raw ``SampleSet`` rows."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ProbeSpec:
    """What one probe run does. Times in seconds, sizes in bytes (application payload)."""

    protocol: str                 # udp | tcp-rr | tcp-crr | http | http-new (+ PROTOCOL_PROBES below)
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

    ``sink`` (e.g. ``netslo.sample_file.ChunkWriter``) receives the rows as compact chunks; every
    probe but icmp streams them while it runs (``netslo.stream``); icmp hands over its rows at the
    end (its 16-bit sequence caps a run at 65 535 requests). With a sink the returned set holds
    what the sink keeps in memory (all chunks for ``stream.ChunkList``, none for a file writer:
    then the metadata only)."""
    from . import http, icmp, mqtt, tcp, udp, udp_native, websocket
    if spec.sender not in SENDERS:
        raise ValueError(f"sender: value {spec.sender!r} — expected one of {list(SENDERS)}")
    if spec.sender == "native":
        if spec.protocol != "udp":
            raise ValueError(f"sender: value 'native' is for protocol udp only, not {spec.protocol!r}")
        return udp_native.run(spec, sink)
    streaming = {"udp": udp.run, "tcp-rr": tcp.run, "tcp-crr": tcp.run, "http": http.run, "http-new": http.run,
                 "https": http.run, "https-new": http.run, "ws": websocket.run, "wss": websocket.run,
                 "mqtt-qos0": mqtt.run, "mqtt-qos1": mqtt.run, "mqtt-qos2": mqtt.run}
    if spec.protocol in streaming:
        return streaming[spec.protocol](spec, sink)
    if spec.protocol != "icmp":
        raise ValueError(f"protocol: value {spec.protocol!r} — expected one of {sorted([*streaming, 'icmp'])}")
    result = icmp.run(spec)
    if sink is None:
        return result
    for chunk in result.chunks():
        sink.write(chunk)
    return type(result)(meta=result.meta, chunks=getattr(sink, "chunks", []))


SENDERS = ("python", "native")

# Protocol breadth (issue 7): WebSocket, HTTPS, MQTT, ICMP. Names are also the agent's choices.
PROTOCOL_PROBES = ("ws", "wss", "https", "https-new", "mqtt-qos0", "mqtt-qos1", "mqtt-qos2", "icmp")
