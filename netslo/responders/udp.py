"""UDP echo responder (irtt-like): replies with its rx/tx timestamps (ns) and the TOS it saw.

Keeps, per flow, a bitmap of the sequence numbers that arrived so the probe can split loss into
upstream and downstream (FIN exchange). Memory is bounded: at most ``MAX_FLOWS`` flows (oldest
evicted, 16 MiB in all) and ``wire.MAX_FIN_SEQS`` tracked sequence numbers per flow; anything malformed is dropped.
"""

from __future__ import annotations

import socket
from collections import OrderedDict

from .. import wire
from ..sockopts import CMSG_SPACE, enable_recv_tos, set_tos, tos_from_ancillary
from ..timing import now_ns

MAX_FLOWS = 1024
MAX_BITMAP_BYTES = 16 * 1024 * 1024  # all flows together


class FlowTable:
    """Bounded map flow id -> bitmap of received seqs, least recently used flow evicted first.

    A flood of unknown flow ids or huge sequence numbers can neither grow memory past
    ``MAX_BITMAP_BYTES`` nor evict a flow that is still sending (it is always recently used)."""

    def __init__(self, max_flows: int = MAX_FLOWS, max_bytes: int = MAX_BITMAP_BYTES):
        self.max_flows, self.max_bytes = max_flows, max_bytes
        self.flows: OrderedDict[int, bytearray] = OrderedDict()
        self.bytes = 0

    def mark(self, flow: int, seq: int) -> None:
        if seq >= wire.MAX_FIN_SEQS:
            return
        bits = self.flows.get(flow)
        if bits is None:
            bits = self.flows[flow] = bytearray()
        else:
            self.flows.move_to_end(flow)
        i = seq >> 3
        if i >= len(bits):
            grow = i + 1 - len(bits)
            bits.extend(bytes(grow))
            self.bytes += grow
        bits[i] |= 1 << (seq & 7)
        while len(self.flows) > self.max_flows or (self.bytes > self.max_bytes and len(self.flows) > 1):
            _, old = self.flows.popitem(last=False)
            self.bytes -= len(old)

    def bitmap(self, flow: int) -> bytes:
        return bytes(self.flows.get(flow, b""))


def handle(data: bytes, tos_seen: int, rx_ns: int, table: FlowTable) -> bytes | None:
    """One datagram in -> the reply to send (or None to drop). Pure function of input and table."""
    try:
        kind, _tos, flow, seq, send_ns, _rx, _tx, resp = wire.unpack_udp(data)
    except wire.WireError:
        return None
    if kind == wire.UDP_REQ:
        table.mark(flow, seq)
        size = min(max(resp, wire.UDP_HDR.size), wire.MAX_UDP_PAYLOAD)
        tos = tos_seen if 0 <= tos_seen <= 255 else wire.TOS_UNKNOWN
        return wire.pack_udp(wire.UDP_REPLY, flow, seq, send_ns, rx_ns, 0, size, tos, size)
    if kind == wire.UDP_FIN:
        blob = wire.pack_bitmap(bytearray(table.bitmap(flow)))
        head = wire.pack_udp(wire.UDP_FIN_REPLY, flow, seq, send_ns, rx_ns, 0, len(blob))
        reply = head + blob
        return reply if len(reply) <= wire.MAX_UDP_PAYLOAD else None
    return None


def serve(port: int, bind: str = "0.0.0.0", ready=None, stop=None) -> None:
    """Blocking echo loop. Replies carry srv_tx_ns patched in just before sendto. ``stop()`` -> bool."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.bind((bind, port))
    enable_recv_tos(sock)
    if stop is not None:
        sock.settimeout(0.2)
    table = FlowTable()
    reply_tos = -1
    tx_offset = 4 + 4 + 8 + 8 + 8 + 8  # byte offset of srv_tx_ns in the header
    if ready:
        ready()
    while not (stop and stop()):
        try:
            data, anc, _flags, addr = sock.recvmsg(wire.MAX_UDP_PAYLOAD, CMSG_SPACE)
        except socket.timeout:
            continue
        except OSError:
            continue
        rx = now_ns()
        tos_seen = tos_from_ancillary(anc)
        reply = handle(data, tos_seen, rx, table)
        if reply is None:
            continue
        mark = tos_seen if tos_seen >= 0 else 0
        if mark != reply_tos:
            set_tos(sock, mark)
            reply_tos = mark
        buf = bytearray(reply)
        buf[tx_offset:tx_offset + 8] = now_ns().to_bytes(8, "big", signed=True)
        try:
            sock.sendto(buf, addr)
        except OSError:
            pass
