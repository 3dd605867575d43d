"""ICMP echo probe: the network-layer RTT. Diagnostic only.

It uses a raw ICMP socket when the process may open one (CAP_NET_RAW), else an unprivileged ICMP
datagram socket (a "ping socket": Linux allows it when the process's group lies within
``net.ipv4.ping_group_range``, a per-network-namespace sysctl Kubernetes counts as safe; netslo's
agent pods set it to their own group). On a ping socket the kernel sets the identifier, fills the
checksum and delivers only this socket's replies, without their IP header (the reply's TOS then
comes from ``IP_RECVTOS``).

Open loop like the UDP probe: echo requests with identifier = a random 16-bit value and sequence
= seq, ``req_bytes`` of ICMP payload (at least 8), on schedule; replies are matched by identifier
and sequence. RTT = from ``sendto`` to the reply read. ICMP is often filtered or deprioritized
(gateways answer slower than servers), so netslo reports it beside application and transport RTT
and never gates on it. The port of ``--target`` is ignored.

IPv6 targets use ICMPv6 (RFC 4443: echo request 128, reply 129) on the same two kinds of socket; the
kernel fills the ICMPv6 checksum (it covers a pseudo-header the sender cannot see on a ping socket),
a raw ICMPv6 socket delivers no IPv6 header, and the traffic class comes from ``IPV6_RECVTCLASS``.
"""

from __future__ import annotations

import os
import select
import socket
import struct

from netslo.core.errors import SpecError, Unsupported
from netslo.core.families import IPV6, family_of
from netslo.stats import samples
from netslo.traffic.clock import now_ns, pin_cpu, set_timer_slack
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.sockopts import CMSG_SPACE, enable_recv_tos, set_tos, tos_from_ancillary

ECHO_REQUEST, ECHO_REPLY = 8, 0
ECHO_REQUEST6, ECHO_REPLY6 = 128, 129
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


def echo_request(ident: int, seq: int, payload_bytes: int, v6: bool = False) -> bytes:
    """An echo request; ICMPv6 (``v6``) with checksum 0: the kernel computes it."""
    body = os.urandom(max(payload_bytes, 8))
    if v6:
        return HDR.pack(ECHO_REQUEST6, 0, 0, ident, seq & 0xFFFF) + body
    head = HDR.pack(ECHO_REQUEST, 0, 0, ident, seq & 0xFFFF)
    return HDR.pack(ECHO_REQUEST, 0, checksum(head + body), ident, seq & 0xFFFF) + body


def open_socket(v6: bool = False) -> tuple[socket.socket, bool]:
    """(socket, raw?): a raw ICMP (ICMPv6 with ``v6``) socket, else a ping socket;
    Unsupported('capability') naming both ways when neither may be opened here."""
    family, proto = (socket.AF_INET6, socket.IPPROTO_ICMPV6) if v6 else (socket.AF_INET, socket.IPPROTO_ICMP)
    try:
        sock = socket.socket(family, socket.SOCK_RAW, proto)
        if v6:
            enable_recv_tos(sock)   # no IPv6 header on a raw ICMPv6 socket: the class comes as ancillary data
        return sock, True
    except PermissionError:
        pass
    try:
        sock = socket.socket(family, socket.SOCK_DGRAM, proto)
    except OSError as e:
        try:
            with open("/proc/sys/net/ipv4/ping_group_range") as f:
                allowed = " ".join(f.read().split())
        except OSError:
            allowed = "?"
        raise Unsupported(f"icmp probe needs a raw socket (CAP_NET_RAW) or a ping socket (group {os.getgid()} "
                          f"within net.ipv4.ping_group_range, here '{allowed}'): {e.strerror or e}",
                          "capability") from None
    enable_recv_tos(sock)
    return sock, False


def parse_reply(packet: bytes, raw: bool = True) -> tuple[int, int, int] | None:
    """ICMP reply -> (identifier, sequence, ICMP bytes) of an echo reply, else None. ``raw``: the
    packet starts with its IPv4 header (raw IPv4 socket), else with the ICMP header (ping socket,
    and every ICMPv6 socket: pass ``raw=False``)."""
    if not raw:
        if len(packet) < HDR.size or packet[0] not in (ECHO_REPLY, ECHO_REPLY6):
            return None
        _kind, _code, _ck, ident, seq = HDR.unpack_from(packet)
        return ident, seq, len(packet)
    if len(packet) < 20:
        return None
    ihl = (packet[0] & 0x0F) * 4
    if len(packet) < ihl + HDR.size:
        return None
    kind, _code, _ck, ident, seq = HDR.unpack_from(packet, ihl)
    if kind != ECHO_REPLY:
        return None
    return ident, seq, len(packet) - ihl


def _receive(sock: socket.socket, raw: bool) -> tuple[bytes, int]:
    """One reply and the TOS byte / traffic class it arrived with (-1 when the kernel did not say);
    ``raw``: a raw IPv4 socket (the IPv4 header leads the packet)."""
    if raw:
        packet = sock.recv(65535)
        return packet, packet[1] if len(packet) > 1 else -1
    packet, ancillary, _flags, _addr = sock.recvmsg(65535, CMSG_SPACE)
    return packet, tos_from_ancillary(ancillary)


def run(spec: ProbeSpec) -> samples.SampleSet:
    """Ping ``spec.host`` ``spec.count`` times every ``spec.interval`` seconds."""
    if spec.count > MAX_COUNT:
        raise SpecError("--count", spec.count, f"at most {MAX_COUNT} for icmp (16-bit sequence)")
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    v6 = family_of(spec.host) == IPV6
    sock, raw = open_socket(v6)
    raw_v4 = raw and not v6      # only a raw IPv4 socket hands over the IP header
    set_tos(sock, spec.tos)
    sock.setblocking(False)
    ident = struct.unpack("!H", os.urandom(2))[0]
    n = spec.count
    rows = samples.empty(n)
    rows["req_bytes"] = max(spec.req_bytes, 8) + HDR.size
    rows["tos_sent"] = spec.tos
    packets = [echo_request(ident, s, spec.req_bytes, v6) for s in range(n)]
    interval_ns = spec.interval_ns
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
                    packet, tos = _receive(sock, raw_v4)
                except (BlockingIOError, InterruptedError):
                    break
                t2 = now_ns()
                got = parse_reply(packet, raw_v4)
                if got is None or (raw and got[0] != ident):   # a ping socket gets only its own replies
                    continue
                s = got[1]
                if s >= seq or rows[s]["send_ns"] < 0:
                    continue
                row = rows[s]
                if row["recv_ns"] >= 0:
                    row["dups"] += 1
                    continue
                row["recv_ns"], row["resp_bytes"], row["arrival"] = t2, got[2], arrivals
                row["tos_cli"] = tos
                arrivals += 1
                answered += 1
    finally:
        sock.close()
    meta = spec.meta()
    meta["diagnostic_only"] = True
    return samples.SampleSet(rows, meta)
