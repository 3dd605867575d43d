"""The few DNS wire-format pieces the DNS probe and responder need (RFC 1035 §4, RFC 3596 for AAAA).

Messages are a 12-byte header (ID, flags with QR/opcode/AA/TC/RD/RA/rcode, four section counts),
the question (name as length-prefixed labels, QTYPE, QCLASS) and resource records (name, which may
be a compression pointer, TYPE, CLASS, TTL s, RDLENGTH, RDATA: 4 bytes for A, 16 for AAAA).
Only class IN, standard queries, and the A/AAAA answers are interpreted; anything else is skipped
or, when malformed, raises ``DnsWireError``.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

HEADER = struct.Struct("!HHHHHH")      # id, flags, qdcount, ancount, nscount, arcount
RR_FIXED = struct.Struct("!HHIH")      # type, class, ttl (s), rdlength
QTYPE_A, QTYPE_AAAA, CLASS_IN = 1, 28, 1
QTYPES = {"A": QTYPE_A, "AAAA": QTYPE_AAAA}
QR, AA, TC, RD, RA = 0x8000, 0x0400, 0x0200, 0x0100, 0x0080
NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 2, 3, 4, 5
MAX_NAME = 255          # bytes of an encoded name (RFC 1035 §2.3.4)
MAX_LABEL = 63
MAX_UDP = 512           # a plain (non-EDNS) DNS message over UDP
MAX_POINTERS = 32       # compression pointers followed in one name at most (a loop is malformed)


class DnsWireError(ValueError):
    """A message that is not DNS, or not well formed."""


def normalize(name: str) -> str:
    """A name lower-cased without its trailing dot ('' is the root)."""
    return name.strip().rstrip(".").lower()


def encode_name(name: str) -> bytes:
    """'a.b.' -> b'\\x01a\\x01b\\x00'; DnsWireError naming the problem for an empty or long label."""
    name = normalize(name)
    out = bytearray()
    for label in name.split(".") if name else []:
        raw = label.encode("idna") if not label.isascii() else label.encode()
        if not 1 <= len(raw) <= MAX_LABEL:
            raise DnsWireError(f"name: value {name!r} — expected labels of 1..{MAX_LABEL} bytes")
        out += bytes([len(raw)]) + raw
    out += b"\x00"
    if len(out) > MAX_NAME:
        raise DnsWireError(f"name: value {name!r} — expected at most {MAX_NAME} bytes encoded")
    return bytes(out)


def decode_name(msg: bytes, at: int) -> tuple[str, int]:
    """The name at offset ``at`` (following compression pointers) and the offset after it in place."""
    labels, end, jumps, pos = [], None, 0, at
    while True:
        if pos >= len(msg):
            raise DnsWireError("name runs past the end of the message")
        n = msg[pos]
        if n & 0xC0 == 0xC0:
            if pos + 1 >= len(msg):
                raise DnsWireError("truncated compression pointer")
            jumps += 1
            if jumps > MAX_POINTERS:
                raise DnsWireError("compression pointer loop")
            if end is None:
                end = pos + 2
            pos = ((n & 0x3F) << 8) | msg[pos + 1]
            continue
        if n & 0xC0:
            raise DnsWireError(f"label type 0x{n & 0xC0:02x} not supported")
        if n == 0:
            return ".".join(labels), (end if end is not None else pos + 1)
        if pos + 1 + n > len(msg):
            raise DnsWireError("label runs past the end of the message")
        labels.append(msg[pos + 1:pos + 1 + n].decode("ascii", "replace").lower())
        pos += 1 + n


def query(qid: int, name: str, qtype: int, rd: bool = True) -> bytes:
    """A standard query for (``name``, ``qtype``, IN) with message ID ``qid``."""
    return HEADER.pack(qid & 0xFFFF, RD if rd else 0, 1, 0, 0, 0) + encode_name(name) + struct.pack("!HH", qtype, CLASS_IN)


@dataclass
class Message:
    """A decoded message: header fields, its first question and its A/AAAA answers (addresses as text)."""

    id: int
    flags: int
    rcode: int
    qname: str
    qtype: int
    answers: list          # (type, address text, ttl s) of the A/AAAA records in the answer section
    ancount: int           # answer records of any type
    size: int              # bytes

    @property
    def is_response(self) -> bool:
        return bool(self.flags & QR)

    def addresses(self, qtype: int) -> list[str]:
        return [a for t, a, _ in self.answers if t == qtype]


def parse(msg: bytes) -> Message:
    """Decode a query or response (one question expected); DnsWireError when malformed."""
    if len(msg) < HEADER.size:
        raise DnsWireError(f"message of {len(msg)} bytes is shorter than the {HEADER.size}-byte header")
    qid, flags, qd, an, _ns, _ar = HEADER.unpack_from(msg)
    if qd != 1:
        raise DnsWireError(f"qdcount: value {qd} — expected 1")
    qname, pos = decode_name(msg, HEADER.size)
    if pos + 4 > len(msg):
        raise DnsWireError("question runs past the end of the message")
    qtype, _qclass = struct.unpack_from("!HH", msg, pos)
    pos += 4
    answers = []
    for _ in range(an):
        _name, pos = decode_name(msg, pos)
        if pos + RR_FIXED.size > len(msg):
            raise DnsWireError("resource record runs past the end of the message")
        rtype, rclass, ttl, rdlen = RR_FIXED.unpack_from(msg, pos)
        pos += RR_FIXED.size
        rdata = msg[pos:pos + rdlen]
        if len(rdata) != rdlen:
            raise DnsWireError("rdata runs past the end of the message")
        pos += rdlen
        if rclass == CLASS_IN and (rtype, rdlen) in ((QTYPE_A, 4), (QTYPE_AAAA, 16)):
            answers.append((rtype, str(ipaddress.ip_address(rdata)), ttl))
    return Message(qid, flags, flags & 0xF, qname, qtype, answers, an, len(msg))


def response(request: bytes, rcode: int, addresses=(), ttl: int = 30) -> bytes:
    """The authoritative answer to ``request`` (its header and question echoed): ``rcode`` and one
    A/AAAA record per address in ``addresses`` (of the question's type), named by a pointer to the question."""
    q = parse(request)
    qend = HEADER.size + len(encode_name(q.qname)) + 4
    rtype = q.qtype
    records = b""
    for a in addresses:
        raw = ipaddress.ip_address(a).packed
        records += struct.pack("!H", 0xC000 | HEADER.size) + RR_FIXED.pack(rtype, CLASS_IN, ttl, len(raw)) + raw
    flags = QR | AA | (q.flags & RD) | (rcode & 0xF)
    return HEADER.pack(q.id, flags, 1, len(addresses), 0, 0) + request[HEADER.size:qend] + records


def qtype_offset(name: str) -> int:
    """Byte offset of QTYPE from the start of the DNS message for a question about ``name``
    (for packet filters that match the query type, e.g. an iptables u32 rule)."""
    return HEADER.size + len(encode_name(name))


def candidates(name: str, search: tuple = (), ndots: int = 1) -> list[str]:
    """The names a stub resolver tries for ``name``, in order (resolv.conf(5)): a name ending in '.'
    is absolute (itself only); one with at least ``ndots`` dots is tried as is first, then with each
    search suffix; one with fewer dots gets each search suffix first and itself last."""
    if name.endswith("."):
        return [normalize(name)]
    base = normalize(name)
    expanded = [f"{base}.{normalize(s)}" for s in search if normalize(s)]
    return [base, *expanded] if base.count(".") >= ndots else [*expanded, base]
