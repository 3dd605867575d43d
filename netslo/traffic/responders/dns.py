"""A small authoritative DNS responder over UDP: the emulated cluster DNS of the embedded provider.

It answers A and AAAA questions (``netslo.traffic.dnswire``) from a fixed table: a name in the table gets
NOERROR with its addresses of the asked type (none: NODATA, NOERROR without records, as CoreDNS
answers AAAA for an IPv4-only Service); any other name gets NXDOMAIN; other query types NOERROR
without records; a message that is not a standard query gets FORMERR or NOTIMP; anything
unparseable is dropped. Every answer is authoritative (AA) and never truncated (the table's
answers stay far below 512 bytes). It is not CoreDNS: no caching, no forwarding, no TCP, no
EDNS; reports say "emulated" as they do of the embedded provider itself.

By default (``DEFAULT_NAMES``) the names a pod would look up in a cluster resolve to the address the
query was sent to (the responder pod's own IP, read per datagram with IP_PKTINFO).
"""

from __future__ import annotations

import ipaddress
import socket
import struct

from netslo.core.errors import SpecError
from netslo.core.families import ANY, bound_socket
from netslo.traffic import dnswire

IP_PKTINFO = 8                      # linux/in.h; not exported by Python's socket module
PKTINFO = struct.Struct("@i4s4s")   # struct in_pktinfo: ifindex, spec_dst, addr (header destination)
SELF = "self"                       # a record value: the address the query arrived at
DEFAULT_NAMES = ("server.netslo.svc.cluster.local", "kubernetes.default.svc.cluster.local")


def parse_records(items) -> dict:
    """['NAME=IP', ...] -> {name: [address, ...]} (IP may be ``self``); SpecError naming a bad item;
    no items: every ``DEFAULT_NAMES`` name -> self."""
    if not items:
        return {n: [SELF] for n in DEFAULT_NAMES}
    out: dict = {}
    for item in items:
        name, sep, ip = item.partition("=")
        try:
            dnswire.encode_name(name)
            if ip != SELF:
                ipaddress.ip_address(ip)
        except ValueError:
            raise SpecError("--record", item, "NAME=IP with a DNS name and an IPv4/IPv6 address (or 'self')") from None
        if not sep or not dnswire.normalize(name):
            raise SpecError("--record", item, "NAME=IP with a DNS name and an IPv4/IPv6 address (or 'self')")
        out.setdefault(dnswire.normalize(name), []).append(ip)
    return out


def answer(request: bytes, records: dict, local: str | None = None) -> bytes | None:
    """The response to one datagram (None: drop it). ``local``: the address it was sent to (``self``)."""
    try:
        q = dnswire.parse(request)
    except dnswire.DnsWireError:
        if len(request) >= dnswire.HEADER.size and not request[2] & 0x80:    # a query we cannot read
            qid, flags = struct.unpack_from("!HH", request)
            return dnswire.HEADER.pack(qid, dnswire.QR | (flags & dnswire.RD) | dnswire.FORMERR, 0, 0, 0, 0)
        return None
    if q.is_response:
        return None
    if (q.flags >> 11) & 0xF:                       # opcode other than QUERY
        return dnswire.response(request, dnswire.NOTIMP)
    addrs = records.get(q.qname)
    if addrs is None:
        return dnswire.response(request, dnswire.NXDOMAIN)
    version = {dnswire.QTYPE_A: 4, dnswire.QTYPE_AAAA: 6}.get(q.qtype)
    resolved = [local if a == SELF else a for a in addrs]
    return dnswire.response(request, dnswire.NOERROR,
                            [a for a in resolved if a and ipaddress.ip_address(a).version == version])


def _arrived_at(anc) -> str | None:
    """The destination address of a datagram from its ancillary data: IP_PKTINFO (IPv4, also on a
    dual-stack socket) or IPV6_PKTINFO (IPv6; a v4-mapped address is given as IPv4)."""
    for level, kind, blob in anc:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(blob) >= PKTINFO.size:
            return socket.inet_ntoa(PKTINFO.unpack_from(blob)[2])
        if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO and len(blob) >= 16:
            addr = ipaddress.IPv6Address(blob[:16])
            return str(addr.ipv4_mapped or addr)
    return None


def serve(port: int, bind: str = "0.0.0.0", records: dict | None = None, ready=None, stop=None) -> None:
    """Blocking answer loop on UDP ``bind:port`` (``::``: both families on one socket). ``stop()`` ->
    bool ends it (checked every 0.2 s)."""
    records = parse_records(()) if records is None else records
    sock = bound_socket(socket.SOCK_DGRAM, bind, port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024 * 1024)
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
    if sock.family == socket.AF_INET or bind in (ANY, ""):   # IPv4 datagrams, also v4-mapped ones
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    if stop is not None:
        sock.settimeout(0.2)
    if ready:
        ready()
    while not (stop and stop()):
        try:
            data, anc, _flags, addr = sock.recvmsg(dnswire.MAX_UDP, socket.CMSG_SPACE(64))
        except (socket.timeout, OSError):
            continue
        local = _arrived_at(anc) or (bind if bind not in ("0.0.0.0", ANY, "") else None)
        reply = answer(data, records, local)
        if reply is not None:
            try:
                sock.sendto(reply, addr)
            except OSError:
                pass
