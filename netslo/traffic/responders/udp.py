"""UDP echo responder (irtt-like): replies with its rx/tx timestamps (ns) and the TOS it saw.

rx is the kernel's RX stamp of the request where the kernel gives one (``netslo.traffic.kstamps``; the
reply's flag ``wire.UDP_KERNEL_RX`` says so), else the user-space time after recv; tx is the
user-space time just before send (a reply cannot carry its own kernel TX stamp).

Keeps, per flow, a bitmap of the sequence numbers that arrived so the probe can split loss into
upstream and downstream (FIN exchange). Memory is bounded: at most ``MAX_FLOWS`` flows (oldest
evicted; a segmented LRU protects established flows) and ``wire.MAX_FIN_SEQS`` tracked sequence numbers per
flow; anything malformed is dropped.
"""

from __future__ import annotations

import socket
from collections import OrderedDict

from netslo.core.families import ANY, bound_socket
from netslo.traffic import kstamps, wire
from netslo.traffic.clock import now_ns
from netslo.traffic.sockopts import CMSG_SPACE, enable_recv_tos, set_tos, tos_from_ancillary

MAX_NEW_FLOWS = 1024        # flows on probation (few packets so far)
MAX_ESTABLISHED = 256       # flows that proved themselves; a flood of new ids cannot evict these
PROMOTE_AFTER = 16          # packets that move a flow from probation to established
MAX_FIRST_SEQ = 8 * 8192    # a new flow may start at most this far from 0 (no 60 kB bitmap for one packet)


class FlowTable:
    """Bounded map flow id -> bitmap of received seqs, as a segmented LRU.

    New flows go on probation (LRU, ``MAX_NEW_FLOWS``); after ``PROMOTE_AFTER`` packets a flow moves
    to the established table (LRU, ``MAX_ESTABLISHED``). A flood of unknown flow ids or huge sequence
    numbers churns only probation, so it can neither evict a real probe's flow (even while that flow
    is silent, waiting for its last answers before the FIN) nor grow memory without bound
    (worst case about 1024 x 8 kB + 256 x 60 kB, 23 MB)."""

    def __init__(self, max_new: int = MAX_NEW_FLOWS, max_established: int = MAX_ESTABLISHED):
        self.max_new, self.max_established = max_new, max_established
        self.new: OrderedDict[int, list] = OrderedDict()          # flow -> [bitmap, packets]
        self.established: OrderedDict[int, list] = OrderedDict()

    @property
    def flows(self) -> dict:
        """flow -> bitmap over both segments (for inspection)."""
        return {f: e[0] for table in (self.new, self.established) for f, e in table.items()}

    def mark(self, flow: int, seq: int) -> None:
        if seq >= wire.MAX_FIN_SEQS:
            return
        entry = self.established.get(flow)
        if entry is not None:
            self.established.move_to_end(flow)
        else:
            entry = self.new.get(flow)
            if entry is None:
                if seq >= MAX_FIRST_SEQ:
                    return
                entry = self.new[flow] = [bytearray(), 0]
                if len(self.new) > self.max_new:
                    self.new.popitem(last=False)
            else:
                self.new.move_to_end(flow)
        bits = entry[0]
        i = seq >> 3
        if i >= len(bits):
            bits.extend(bytes(i + 1 - len(bits)))
        bits[i] |= 1 << (seq & 7)
        entry[1] += 1
        if entry[1] == PROMOTE_AFTER and flow in self.new:
            del self.new[flow]
            self.established[flow] = entry
            if len(self.established) > self.max_established:
                self.established.popitem(last=False)

    def bitmap(self, flow: int) -> bytes:
        entry = self.established.get(flow) or self.new.get(flow)
        return bytes(entry[0]) if entry else b""


def handle(data: bytes, tos_seen: int, rx_ns: int, table: FlowTable, kernel_rx: bool = False) -> bytes | None:
    """One datagram in -> the reply to send (or None to drop). Pure function of input and table;
    ``kernel_rx``: ``rx_ns`` is a kernel RX stamp."""
    try:
        kind, _tos, flow, seq, send_ns, _rx, _tx, resp = wire.unpack_udp(data)
    except wire.WireError:
        return None
    if kind == wire.UDP_REQ:
        table.mark(flow, seq)
        size = min(max(resp, wire.UDP_HDR.size), wire.MAX_UDP_PAYLOAD)
        tos = tos_seen if 0 <= tos_seen <= 255 else wire.TOS_UNKNOWN
        return wire.pack_udp(wire.UDP_REPLY, flow, seq, send_ns, rx_ns, 0, size, tos, size,
                             flags=wire.UDP_KERNEL_RX if kernel_rx else 0)
    if kind == wire.UDP_FIN:
        blob = wire.pack_bitmap(bytearray(table.bitmap(flow)))
        head = wire.pack_udp(wire.UDP_FIN_REPLY, flow, seq, send_ns, rx_ns, 0, len(blob))
        reply = head + blob
        return reply if len(reply) <= wire.MAX_UDP_PAYLOAD else None
    return None


def serve(port: int, bind: str = ANY, ready=None, stop=None) -> None:
    """Blocking echo loop (both families on ``ANY``: ``families.bound_socket``). Replies carry
    srv_tx_ns patched in just before sendto. ``stop()`` -> bool."""
    sock = bound_socket(socket.SOCK_DGRAM, bind, port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    enable_recv_tos(sock)
    stamps = kstamps.enable(sock, tx=False) != kstamps.USER
    clock = kstamps.clock()
    if stop is not None:
        sock.settimeout(0.2)
    table = FlowTable()
    reply_tos = -1
    tx_offset = 4 + 4 + 8 + 8 + 8 + 8  # byte offset of srv_tx_ns in the header
    if ready:
        ready()
    while not (stop and stop()):
        try:
            data, anc, _flags, addr = sock.recvmsg(wire.MAX_UDP_PAYLOAD, CMSG_SPACE + kstamps.CMSG_SPACE)
        except socket.timeout:
            continue
        except OSError:
            continue
        rx = now_ns()
        stamp = kstamps.rx_stamp(anc) if stamps else -1
        if stamp >= 0:
            clock.refresh()
            rx = clock.to_mono(stamp)
        tos_seen = tos_from_ancillary(anc)
        reply = handle(data, tos_seen, rx, table, kernel_rx=stamp >= 0)
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
