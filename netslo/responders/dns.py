"""A small authoritative DNS responder over UDP: the emulated cluster DNS of the embedded provider.

It answers A and AAAA questions (``netslo.dnswire``) from a fixed table: a name in the table gets
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

from .. import dnswire
from ..errors import SpecError

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


def serve(port: int, bind: str = "0.0.0.0", records: dict | None = None, ready=None, stop=None) -> None:
    """Blocking answer loop on UDP ``bind:port``. ``stop()`` -> bool ends it (checked every 0.2 s)."""
    records = parse_records(()) if records is None else records
    sock = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024 * 1024)
    sock.bind((bind, port))
    v4 = sock.family == socket.AF_INET
    if v4:
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    if stop is not None:
        sock.settimeout(0.2)
    if ready:
        ready()
    while not (stop and stop()):
        try:
            data, anc, _flags, addr = sock.recvmsg(dnswire.MAX_UDP, socket.CMSG_SPACE(PKTINFO.size))
        except (socket.timeout, OSError):
            continue
        local = bind if bind not in ("0.0.0.0", "::") else None
        for level, kind, blob in anc:
            if v4 and level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(blob) >= PKTINFO.size:
                local = socket.inet_ntoa(PKTINFO.unpack_from(blob)[2])
        reply = answer(data, records, local)
        if reply is not None:
            try:
                sock.sendto(reply, addr)
            except OSError:
                pass
