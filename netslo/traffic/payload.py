"""Application messages of the WebSocket and MQTT probes: a small header, then random bytes.

Random fill (from ``os.urandom``) means no layer can compress its way to a better number.
Big-endian headers; sizes count the whole message including the header:

  WebSocket request   'NSLw' | seq u64 | resp_bytes u32                      (16 bytes)
  WebSocket response  'NSLW' | seq u64 | srv_rx_ns i64 | srv_tx_ns i64       (28 bytes)
  MQTT message        'NSLm' | run u32 | seq u64 | send_ns i64               (24 bytes)
"""

from __future__ import annotations

import os
import struct

WS_REQ = struct.Struct("!4sQI")
WS_RESP = struct.Struct("!4sQqq")
MQTT_MSG = struct.Struct("!4sIQq")
WS_REQ_MAGIC, WS_RESP_MAGIC, MQTT_MAGIC = b"NSLw", b"NSLW", b"NSLm"
POOL_BYTES = 1 << 20
_pool = b""


class PayloadError(ValueError):
    """A message that is not ours or is malformed."""


def random_fill(n: int, salt: int = 0) -> bytes:
    """n random bytes; successive salts give different slices of one per-process random pool."""
    global _pool
    if not _pool:
        _pool = os.urandom(POOL_BYTES)
    if n <= 0:
        return b""
    if n > POOL_BYTES // 2:
        reps = n // POOL_BYTES + 1
        return (_pool * reps)[(salt * 7919) % 4096:][:n]
    start = (salt * 7919) % (POOL_BYTES - n)
    return _pool[start:start + n]


def ws_request(seq: int, req_bytes: int, resp_bytes: int) -> bytes:
    head = WS_REQ.pack(WS_REQ_MAGIC, seq, resp_bytes)
    return head + random_fill(req_bytes - len(head), seq)


def _unpack(what: str, layout: struct.Struct, magic: bytes, data: bytes) -> tuple:
    """Header fields after the magic; PayloadError naming the message kind when not ours."""
    if len(data) < layout.size:
        raise PayloadError(f"{what}: {len(data)} bytes — expected at least {layout.size}")
    fields = layout.unpack_from(data)
    if fields[0] != magic:
        raise PayloadError(f"{what}: magic {fields[0]!r} — expected {magic!r}")
    return fields[1:]


def parse_ws_request(data: bytes) -> tuple[int, int]:
    """-> (seq, resp_bytes)."""
    return _unpack("ws request", WS_REQ, WS_REQ_MAGIC, data)


def ws_response(seq: int, rx_ns: int, tx_ns: int, resp_bytes: int) -> bytes:
    head = WS_RESP.pack(WS_RESP_MAGIC, seq, rx_ns, tx_ns)
    return head + random_fill(resp_bytes - len(head), seq + 1)


def parse_ws_response(data: bytes) -> tuple[int, int, int]:
    """-> (seq, srv_rx_ns, srv_tx_ns)."""
    return _unpack("ws response", WS_RESP, WS_RESP_MAGIC, data)


def mqtt_message(run: int, seq: int, send_ns: int, size: int) -> bytes:
    head = MQTT_MSG.pack(MQTT_MAGIC, run, seq, send_ns)
    return head + random_fill(size - len(head), seq)


def parse_mqtt_message(data: bytes) -> tuple[int, int, int]:
    """-> (run, seq, send_ns)."""
    return _unpack("mqtt message", MQTT_MSG, MQTT_MAGIC, data)
