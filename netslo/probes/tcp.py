"""TCP request/response probe, open loop, one thread with ``select``.

- ``tcp-rr``: one persistent connection (set up before the schedule starts); requests are written
  on schedule even if earlier answers are outstanding (pipelined), so queueing shows as latency.
- ``tcp-crr``: a new connection per request; the RTT includes the handshake (send_ns is taken just
  before ``connect``), the connection is closed after the answer.
RTT = from the start of the request (connect or first write) to the last byte of the answer.
"""

from __future__ import annotations

import errno
import select
import socket
from collections import deque

from .. import samples, stream, wire
from ..sockopts import set_nodelay, set_tos
from ..timing import now_ns, pin_cpu, set_timer_slack
from . import ProbeSpec

RECV_CHUNK = 1 << 20


class _Conn:
    """One client connection: bytes to write, answers expected in order, header parser state."""

    def __init__(self, sock: socket.socket, connected: bool):
        self.sock = sock
        self.connected = connected
        self.out = bytearray()
        self.pending: deque[int] = deque()
        self.head = bytearray()
        self.current: tuple | None = None  # (seq, rx, tx, tos, body bytes left, total bytes)
        self.dead = False

    def fileno(self) -> int:
        return self.sock.fileno()


def _request(seq: int, spec: ProbeSpec) -> bytes:
    size = max(spec.req_bytes, wire.TCP_REQ.size)
    resp = max(spec.resp_bytes, wire.TCP_RESP.size)
    head = wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, seq, size, resp, spec.tos & 0xFF)
    return head + bytes(size - len(head))


def _open(spec: ProbeSpec, blocking: bool) -> _Conn:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    set_nodelay(sock, spec.nodelay)
    set_tos(sock, spec.tos)
    if blocking:
        sock.settimeout(5.0)
        sock.connect((spec.host, spec.port))
        sock.setblocking(False)
        return _Conn(sock, True)
    sock.setblocking(False)
    rc = sock.connect_ex((spec.host, spec.port))
    if rc not in (0, errno.EINPROGRESS):
        raise OSError(rc, errno.errorcode.get(rc, "connect failed"))
    return _Conn(sock, rc == 0)


def _feed(conn: _Conn, data: bytes, t: int, rows) -> list[tuple]:
    """Parse answer bytes; fill rows of completed seqs; return (seq, row or None) of each."""
    done, i, n = [], 0, len(data)
    while i < n:
        if conn.current is None:
            take = min(wire.TCP_RESP.size - len(conn.head), n - i)
            conn.head += data[i:i + take]
            i += take
            if len(conn.head) < wire.TCP_RESP.size:
                break
            magic, seq, rx, tx, total, tos = wire.TCP_RESP.unpack(bytes(conn.head))
            conn.head.clear()
            if magic != wire.TCP_RESP_MAGIC or total < wire.TCP_RESP.size or seq >= len(rows):
                conn.dead = True
                return done
            conn.current = (seq, rx, tx, tos, total - wire.TCP_RESP.size, total)
        seq, rx, tx, tos, left, total = conn.current
        take = min(left, n - i)
        i += take
        left -= take
        conn.current = (seq, rx, tx, tos, left, total)
        if left == 0:
            row = rows[seq]
            if row is not None:         # None: its block is already written (streamed run), late
                row["recv_ns"], row["srv_rx_ns"], row["srv_tx_ns"] = t, rx, tx
                row["resp_bytes"], row["tos_srv"], row["srv_seen"] = total, tos, 1
            conn.current = None
            done.append((seq, row))
    return done


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run tcp-rr or tcp-crr according to ``spec.protocol``; rows are streamed to ``sink`` in
    chunks as they become final (``netslo.stream``); returns the set (metadata only when ``sink``
    writes a file)."""
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    per_request = spec.protocol == "tcp-crr"
    n = spec.count
    rows = stream.RowStream(n, settle_ns=int(spec.wait * 1e9), sink=sink,
                            defaults={"req_bytes": max(spec.req_bytes, wire.TCP_REQ.size), "tos_sent": spec.tos})
    conns: list[_Conn] = []
    persistent = None if per_request else _open(spec, blocking=True)
    if persistent:
        conns.append(persistent)
    arrivals = 0
    interval_ns = spec.interval_ns
    start = now_ns() + 20_000_000
    seq = 0
    deadline = None
    while True:
        t = now_ns()
        if seq < n and t >= start + seq * interval_ns:
            row = rows[seq]
            row["sched_ns"] = start + seq * interval_ns
            row["send_ns"] = t
            if seq % stream.RETIRE_EVERY == 0:
                rows.retire(t)
            try:
                if per_request:
                    c = _open(spec, blocking=False)
                    conns.append(c)
                else:
                    if persistent is None or persistent.dead:
                        persistent = _open(spec, blocking=True)
                        conns.append(persistent)
                    c = persistent
                c.out += _request(seq, spec)
                c.pending.append(seq)
            except OSError:
                pass  # request failed: stays lost
            seq += 1
            continue
        if seq >= n:
            if deadline is None:
                deadline = t + int(spec.wait * 1e9)
            if t >= deadline or not any(c.pending for c in conns):
                break
            timeout = (deadline - t) / 1e9
        else:
            timeout = (start + seq * interval_ns - t) / 1e9
        live = [c for c in conns if not c.dead]
        rl = [c for c in live if c.pending]
        wl = [c for c in live if c.out or not c.connected]
        r, w, _ = select.select(rl, wl, [], max(timeout, 0))
        for c in w:
            if not c.connected:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    c.dead = True
                    continue
                c.connected = True
            try:
                sent = c.sock.send(c.out)
                del c.out[:sent]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                c.dead = True
        for c in r:
            try:
                data = c.sock.recv(RECV_CHUNK)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            t2 = now_ns()
            if not data:
                c.dead = True
                continue
            for s, row in _feed(c, data, t2, rows):
                if row is not None:
                    row["arrival"] = arrivals
                    arrivals += 1
                if c.pending and c.pending[0] == s:
                    c.pending.popleft()
            if per_request and not c.pending:
                c.dead = True
        for c in [c for c in conns if c.dead]:
            c.sock.close()
            conns.remove(c)
            if c is persistent:
                persistent = None
    for c in conns:
        c.sock.close()
    return rows.finish(spec.meta())
