"""ICMP echo probe (raw socket; needs CAP_NET_RAW): the network-layer RTT. Diagnostic only.

Open loop like the UDP probe: echo requests with identifier = a random 16-bit value and sequence
= seq, ``req_bytes`` of ICMP payload (at least 8), on schedule; replies are matched by identifier
and sequence. RTT = from ``sendto`` to the reply read. ICMP is often filtered or deprioritized
(gateways answer slower than servers), so netslo reports it beside application and transport RTT
and never gates on it. The port of ``--target`` is ignored.
"""

from __future__ import annotations

import os
import select
import socket
import struct

from .. import samples
from ..errors import SpecError, Unsupported
from ..sockopts import set_tos
from ..timing import now_ns, pin_cpu, set_timer_slack
from . import ProbeSpec

ECHO_REQUEST, ECHO_REPLY = 8, 0
HDR = struct.Struct("!BBHHH")   # type, code, checksum, identifier, sequence
MAX_COUNT = 65536               # the sequence field is 16 bits


def checksum(data: bytes) -> int:
    """RFC 1071 Internet checksum."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int, payload_bytes: int) -> bytes:
    body = os.urandom(max(payload_bytes, 8))
    head = HDR.pack(ECHO_REQUEST, 0, 0, ident, seq & 0xFFFF)
    return HDR.pack(ECHO_REQUEST, 0, checksum(head + body), ident, seq & 0xFFFF) + body


def parse_reply(packet: bytes) -> tuple[int, int, int] | None:
    """IPv4 packet from a raw ICMP socket -> (identifier, sequence, ICMP bytes) of an echo reply, else None."""
    if len(packet) < 20:
        return None
    ihl = (packet[0] & 0x0F) * 4
    if len(packet) < ihl + HDR.size:
        return None
    kind, _code, _ck, ident, seq = HDR.unpack_from(packet, ihl)
    if kind != ECHO_REPLY:
        return None
    return ident, seq, len(packet) - ihl


def run(spec: ProbeSpec) -> samples.SampleSet:
    """Ping ``spec.host`` ``spec.count`` times every ``spec.interval`` seconds."""
    if spec.count > MAX_COUNT:
        raise SpecError("--count", spec.count, f"at most {MAX_COUNT} for icmp (16-bit sequence)")
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    except PermissionError as e:
        raise Unsupported("icmp probe needs a raw socket (CAP_NET_RAW)") from e
    set_tos(sock, spec.tos)
    sock.setblocking(False)
    ident = struct.unpack("!H", os.urandom(2))[0]
    n = spec.count
    rows = samples.empty(n)
    rows["req_bytes"] = max(spec.req_bytes, 8) + HDR.size
    rows["tos_sent"] = spec.tos
    packets = [echo_request(ident, s, spec.req_bytes) for s in range(n)]
    interval_ns = int(spec.interval * 1e9)
    start = now_ns() + 20_000_000
    seq, arrivals, answered, deadline = 0, 0, 0, None
    try:
        while True:
            t = now_ns()
            if seq < n and t >= start + seq * interval_ns:
                rows[seq]["sched_ns"] = start + seq * interval_ns
                rows[seq]["send_ns"] = now_ns()
                try:
                    sock.sendto(packets[seq], (spec.host, 0))
                except OSError:
                    pass  # stays lost (e.g. no route)
                seq += 1
                continue
            if seq >= n:
                if deadline is None:
                    deadline = t + int(spec.wait * 1e9)
                if t >= deadline or answered >= n:
                    break
                timeout = (deadline - t) / 1e9
            else:
                timeout = (start + seq * interval_ns - t) / 1e9
            r, _, _ = select.select([sock], [], [], max(timeout, 0))
            while r:
                try:
                    packet = sock.recv(65535)
                except (BlockingIOError, InterruptedError):
                    break
                t2 = now_ns()
                got = parse_reply(packet)
                if got is None or got[0] != ident:
                    continue
                s = got[1]
                if s >= seq or rows[s]["send_ns"] < 0:
                    continue
                row = rows[s]
                if row["recv_ns"] >= 0:
                    row["dups"] += 1
                    continue
                row["recv_ns"], row["resp_bytes"], row["arrival"] = t2, got[2], arrivals
                row["tos_cli"] = packet[1]
                arrivals += 1
                answered += 1
    finally:
        sock.close()
    meta = spec.meta()
    meta["diagnostic_only"] = True
    return samples.SampleSet(rows, meta)
