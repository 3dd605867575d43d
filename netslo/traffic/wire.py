"""Wire formats shared by probes and responders (big-endian, fixed headers, then padding).

UDP datagram (request and reply share one header, 52 bytes):
  magic 'NSL1' | type u8 | flags u8 | tos u8 | reserved u8 | flow u64 | seq u64 |
  client_send_ns i64 | srv_rx_ns i64 | srv_tx_ns i64 | resp_bytes u32
  type: 1 request, 2 reply, 3 fin (asks which seqs arrived), 4 fin-reply (payload: zlib bitmap)
  tos: on a reply, the TOS byte the responder saw on the request (255 = unknown).
  flags: on a reply, bit 0 (UDP_KERNEL_RX) = srv_rx_ns is the responder's kernel RX stamp
  (``netslo.traffic.kstamps``), else its user-space time after recv.

TCP message (request: 24-byte header; response: 32-byte header), then payload:
  request  'NSLq' | seq u64 | req_bytes u32 | resp_bytes u32 | tos u8 | 3 reserved
  response 'NSLr' | seq u64 | srv_rx_ns i64 | srv_tx_ns i64 | resp_bytes u32 | tos u8 | flags u8 |
           2 reserved (flags: bit 0 as a UDP reply's, srv_rx_ns is the responder's kernel RX stamp)
  req_bytes/resp_bytes count the whole message including the header.
"""

from __future__ import annotations

import struct
import zlib

UDP_MAGIC = b"NSL1"
UDP_HDR = struct.Struct("!4sBBBBQQqqqI")
UDP_REQ, UDP_REPLY, UDP_FIN, UDP_FIN_REPLY = 1, 2, 3, 4
TOS_UNKNOWN = 255
UDP_KERNEL_RX = 1
UDP_FLAGS_AT = 5            # byte offset of flags

TCP_REQ = struct.Struct("!4sQIIB3x")
TCP_RESP = struct.Struct("!4sQqqIB3x")
TCP_FLAGS_AT = 33           # byte offset of a response's flags (the first reserved byte): UDP_KERNEL_RX
TCP_REQ_MAGIC, TCP_RESP_MAGIC = b"NSLq", b"NSLr"

MAX_UDP_PAYLOAD = 65507
MAX_TCP_MESSAGE = 64 * 1024 * 1024
MAX_FIN_SEQS = 8 * 60000  # bitmap must fit one datagram after compression in the worst case


class WireError(ValueError):
    """A packet or message that is not ours or is malformed; responders drop it and go on."""


def pack_udp(kind: int, flow: int, seq: int, send_ns: int = 0, rx_ns: int = 0, tx_ns: int = 0,
             resp_bytes: int = 0, tos: int = TOS_UNKNOWN, size: int = 0, flags: int = 0) -> bytes:
    head = UDP_HDR.pack(UDP_MAGIC, kind, flags, tos, 0, flow, seq, send_ns, rx_ns, tx_ns, resp_bytes)
    return head + bytes(max(0, size - len(head)))


def unpack_udp(data: bytes) -> tuple:
    """-> (kind, tos, flow, seq, send_ns, rx_ns, tx_ns, resp_bytes); WireError if not ours."""
    if len(data) < UDP_HDR.size:
        raise WireError(f"datagram of {len(data)} bytes is shorter than the {UDP_HDR.size}-byte header")
    magic, kind, _flags, tos, _r, flow, seq, send_ns, rx_ns, tx_ns, resp = UDP_HDR.unpack_from(data)
    if magic != UDP_MAGIC or kind not in (UDP_REQ, UDP_REPLY, UDP_FIN, UDP_FIN_REPLY):
        raise WireError("not a netslo datagram")
    return kind, tos, flow, seq, send_ns, rx_ns, tx_ns, resp


def pack_bitmap(bits: bytearray) -> bytes:
    return zlib.compress(bytes(bits), 6)


def unpack_bitmap(blob: bytes, limit: int = MAX_FIN_SEQS // 8) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(blob, limit)
    if d.unconsumed_tail:
        raise WireError("fin bitmap larger than allowed")
    return out


def bit_is_set(bits: bytes, seq: int) -> bool:
    i = seq >> 3
    return i < len(bits) and bool(bits[i] & (1 << (seq & 7)))
