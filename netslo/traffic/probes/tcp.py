"""TCP request/response probe, open loop, one thread with ``poll`` (no FD_SETSIZE limit: a study's
connections per request can be hundreds at once while a policy drops their SYNs).

- ``tcp-rr``: one persistent connection (set up before the schedule starts); requests are written
  on schedule even if earlier answers are outstanding (pipelined), so queueing shows as latency.
- ``tcp-crr``: a new connection per request; the RTT includes the handshake (send_ns is taken just
  before ``connect``), the connection is closed after the answer. With ``give_up`` (the change studies,
  ``netslo.studies.enforcement``) a connection whose answer had not reached the client's kernel
  ``give_up`` s after its connect is aborted and its request counts as lost, before the kernel would
  send its SYN again. The arrival is the answer's kernel RX stamp, and sockets are read before any
  is given up, so a probe starved of CPU (a CNI agent starting on two cores) that looks late still
  counts the answers that came in time. The metadata's ``given_up`` says where the given-up
  connections were (``GIVEN_UP``); every connection ends with RST, so
  thousands per second leave no TIME_WAIT holding the ephemeral ports. With ``source_ports``
  "in-turn" (the change studies) the source ports are taken in turn through the ephemeral range
  (``SourcePorts``), so a tuple comes back only after the whole range; "kernel" leaves them to
  ``connect()``. Each request is then a new flow that a
  stateful datapath (conntrack, a CNI's policy or load balancer) judges afresh; what a tuple's
  return can still meet is said in ``netslo.studies.enforcement``.
RTT = from the start of the request (connect or first write) to the last byte of the answer.

Kernel timestamps (``netslo.traffic.kstamps``, docs/metrics.md), detected per connection: tcp-rr's
send_ns is the kernel's TX stamp of the request's last byte (``SOF_TIMESTAMPING_TX_SCHED`` with
``OPT_ID``, whose key on a stream socket counts bytes: one stamp per send call, at its last byte),
recv_ns the RX stamp the kernel reports with the read that completed the answer (that of the
newest segment in the read: an earlier answer completed in the same read gets a stamp no earlier
than its own). tcp-crr keeps send_ns before ``connect`` (a handshake has no data to stamp) and
takes RX stamps (``kernel-rx``). send_app_ns / recv_app_ns hold the user-space times.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
from collections import deque

from netslo.core.families import socket_family
from netslo.stats import samples, stream
from netslo.traffic import kstamps, wire
from netslo.traffic.clock import now_ns, pin_cpu, set_timer_slack
from netslo.traffic.probes import IN_TURN, ProbeSpec
from netslo.traffic.sockopts import set_nodelay, set_tos

RECV_CHUNK = 1 << 20
MAX_UNSTAMPED = 4096        # requests of one connection awaiting their TX stamp, at most
ABORT = struct.pack("ii", 1, 0)   # SO_LINGER on, 0 s: close() sends RST, no TIME_WAIT
GIVEN_UP = ("connecting", "unsent", "unanswered")   # where a given-up connection was (_phase)


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
        self.source = kstamps.USER
        self.server_kernel = 0             # responses whose srv_rx_ns is the responder's kernel stamp
        self.queued = 0                    # request bytes handed to this connection so far
        self.unstamped: deque = deque()    # (offset of a request's last byte, row) awaiting a TX stamp
        self.give_up_at = 0                # ns (CLOCK_MONOTONIC): an answer arriving later is lost; 0: never

    def stamp(self, tx: bool) -> None:
        """Ask for kernel stamps (TX too when ``tx``: only once the connection exists, OPT_ID
        counts from the next byte written)."""
        self.source = kstamps.enable(self.sock, tx)

    def add(self, data: bytes, row) -> None:
        """Queue one request; its row waits for the TX stamp of its last byte."""
        self.out += data
        self.queued += len(data)
        if self.source == kstamps.KERNEL and row is not None:
            self.unstamped.append((self.queued - 1, row))
            if len(self.unstamped) > MAX_UNSTAMPED:   # a path whose driver does not stamp: keep no rows alive
                self.unstamped.popleft()

    def read_tx(self, clock) -> None:
        """Give every request whose last byte a waiting TX stamp covers that stamp."""
        for key, stamp in kstamps.read_tx(self.sock):
            t = clock.to_mono(stamp)
            while self.unstamped and self.unstamped[0][0] <= key:
                row = self.unstamped.popleft()[1]
                if t >= row["send_app_ns"]:
                    row["send_ns"] = t

    def fileno(self) -> int:
        return self.sock.fileno()


def _request(seq: int, spec: ProbeSpec) -> bytes:
    size = max(spec.req_bytes, wire.TCP_REQ.size)
    resp = max(spec.resp_bytes, wire.TCP_RESP.size)
    head = wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, seq, size, resp, spec.tos & 0xFF)
    return head + bytes(size - len(head))


PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"   # (it holds for IPv6 too)
PORT_TRIES = 64            # ports a bind may skip (in use by another socket) before it gives up


class SourcePorts:
    """Source ports for the change studies' connections (``source_ports`` "in-turn"), taken in turn
    through this network namespace's ephemeral range: a tuple comes back only after (range size)
    connections, ~28 s at 1 kHz. Left to the kernel, connect() may reuse a tuple within seconds; conntrack keeps a closed
    flow's entry for 10 s (``nf_conntrack_tcp_timeout_close``), and a SYN that meets such an entry
    need not be judged as a new flow: a stateful policy can admit it as an established one."""

    def __init__(self, path: str = PORT_RANGE, start: int | None = None):
        with open(path) as f:
            self.lo, self.hi = (int(x) for x in f.read().split())
        size = self.hi - self.lo + 1
        self.next = self.lo + ((start if start is not None else int.from_bytes(os.urandom(2), "big")) % size)

    def bind(self, sock: socket.socket, family: int) -> None:
        """Bind ``sock`` to the next free port (one in use is skipped, PORT_TRIES at most)."""
        addr = "::" if family == socket.AF_INET6 else "0.0.0.0"
        for _ in range(PORT_TRIES):
            port = self.next
            self.next = self.lo if port >= self.hi else port + 1
            try:
                sock.bind((addr, port))
                return
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
        raise OSError(errno.EADDRINUSE, f"no free source port in {PORT_TRIES} tries")


def _open(spec: ProbeSpec, blocking: bool, ports: SourcePorts | None = None) -> _Conn:
    """A connection with kernel stamps asked for: TX and RX once connected (``blocking``), RX only
    for a connection per request (OPT_ID needs a connected socket; its handshake has no data);
    from the next of ``ports`` when given."""
    family = socket_family(spec.host)
    sock = socket.socket(family, socket.SOCK_STREAM)
    if ports is not None:
        try:
            ports.bind(sock, family)
        except OSError:
            sock.close()
            raise
    set_nodelay(sock, spec.nodelay)
    set_tos(sock, spec.tos)
    if blocking:
        sock.settimeout(5.0)
        sock.connect((spec.host, spec.port))
        sock.setblocking(False)
        conn = _Conn(sock, True)
        conn.stamp(tx=True)
        return conn
    sock.setblocking(False)
    conn = _Conn(sock, False)
    conn.stamp(tx=False)
    rc = sock.connect_ex((spec.host, spec.port))
    if rc not in (0, errno.EINPROGRESS):
        raise OSError(rc, errno.errorcode.get(rc, "connect failed"))
    conn.connected = rc == 0
    return conn


def _feed(conn: _Conn, data: bytes, t: int, rows, kt: int = -1) -> list[tuple]:
    """Parse answer bytes; fill rows of completed seqs (recv_app_ns ``t``, recv_ns the kernel's RX
    stamp ``kt`` when >= 0, else ``t``); return (seq, row or None) of each."""
    done, i, n = [], 0, len(data)
    while i < n:
        if conn.current is None:
            take = min(wire.TCP_RESP.size - len(conn.head), n - i)
            conn.head += data[i:i + take]
            i += take
            if len(conn.head) < wire.TCP_RESP.size:
                break
            magic, seq, rx, tx, total, tos = wire.TCP_RESP.unpack(bytes(conn.head))
            conn.server_kernel += bool(conn.head[wire.TCP_FLAGS_AT] & wire.UDP_KERNEL_RX)
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
                row["recv_ns"], row["recv_app_ns"], row["srv_rx_ns"], row["srv_tx_ns"] = kt if kt >= 0 else t, t, rx, tx
                row["resp_bytes"], row["tos_srv"], row["srv_seen"] = total, tos, 1
            conn.current = None
            done.append((seq, row))
    return done


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run tcp-rr or tcp-crr according to ``spec.protocol``; rows are streamed to ``sink`` in
    chunks as they become final (``netslo.stats.stream``); returns the set (metadata only when ``sink``
    writes a file)."""
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    per_request = spec.protocol == "tcp-crr"
    n = spec.count
    rows = stream.RowStream(n, settle_ns=int(spec.wait * 1e9), sink=sink,
                            defaults={"req_bytes": max(spec.req_bytes, wire.TCP_REQ.size), "tos_sent": spec.tos})
    conns: list[_Conn] = []
    holder = kstamps.hold_rx() if per_request else None
    persistent = None if per_request else _open(spec, blocking=True)
    if persistent:
        conns.append(persistent)
    give_up_ns = int(spec.give_up * 1e9) if per_request and spec.give_up else 0
    ports = SourcePorts() if per_request and spec.source_ports == IN_TURN else None
    opened: deque = deque()     # connections in the order opened (give_up only): their give_up_at in order
    arrivals = 0
    clock = kstamps.clock()
    counts = {"got": 0, "tx_missing": 0, "rx_missing": 0, "server_kernel": 0, "sources": set(), "connections_lost": 0}
    given_up = dict.fromkeys(GIVEN_UP, 0)
    interval_ns = spec.interval_ns
    start = now_ns() + 20_000_000
    seq = 0
    deadline = None
    while True:
        t = now_ns()
        if seq < n and t >= start + seq * interval_ns:
            row = rows[seq]
            row["sched_ns"] = start + seq * interval_ns
            row["send_ns"] = row["send_app_ns"] = t     # send_ns: until the kernel's TX stamp comes
            if seq % stream.RETIRE_EVERY == 0:
                rows.retire(t)
            try:
                if per_request:
                    c = _open(spec, blocking=False, ports=ports)
                    conns.append(c)
                    if give_up_ns:
                        c.give_up_at = t + give_up_ns
                        opened.append(c)
                else:
                    if persistent is None or persistent.dead:
                        persistent = _open(spec, blocking=True)
                        conns.append(persistent)
                    c = persistent
                c.add(_request(seq, spec), row)
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
        while opened and (opened[0].dead or not opened[0].pending):
            opened.popleft()
        if opened:
            timeout = max(0.0, min(timeout, (opened[0].give_up_at - t) / 1e9))
        live = [c for c in conns if not c.dead]
        rl = [c for c in live if c.pending]
        wl = [c for c in live if c.out or not c.connected]
        r, w = _wait(rl, wl, timeout)
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
            if c.source == kstamps.KERNEL:
                c.read_tx(clock)
        for c in r:
            if c.source == kstamps.KERNEL:   # (a waiting TX stamp also makes the socket readable)
                c.read_tx(clock)
            try:
                data, anc, _f, _a = c.sock.recvmsg(RECV_CHUNK, kstamps.CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data, anc = b"", []
            t2 = now_ns()
            if not data:
                c.dead = True
                continue
            kt = clock.to_mono(kstamps.rx_stamp(anc)) if c.source != kstamps.USER else -1
            if c.give_up_at and (kt if kt >= 0 else t2) > c.give_up_at:
                c.dead = True   # its answer came after the give-up: lost, however late it was read
                given_up["unanswered"] += 1
                continue
            for s, row in _feed(c, data, t2, rows, kt):
                if row is not None:
                    row["arrival"] = arrivals
                    arrivals += 1
                    counts["got"] += 1
                    counts["rx_missing"] += bool(c.source != kstamps.USER and kt < 0)
                    counts["tx_missing"] += bool(c.source == kstamps.KERNEL and row["send_ns"] == row["send_app_ns"])
                    counts["sources"].add(c.source)
                if c.pending and c.pending[0] == s:
                    c.pending.popleft()
            if per_request and not c.pending:
                c.dead = True
        t = now_ns()            # give up only after reading: an answer waiting in the socket came in time
        while opened and (opened[0].dead or not opened[0].pending or opened[0].give_up_at <= t):
            c = opened.popleft()
            if not c.dead and c.pending:   # given up: its request stays lost (answered ones close below anyway)
                given_up[_phase(c)] += 1
            c.dead = True
        for c in [c for c in conns if c.dead]:
            _close(c.sock, give_up_ns)
            counts["server_kernel"] += c.server_kernel
            conns.remove(c)
            if c is persistent:
                persistent = None
                counts["connections_lost"] += 1   # reset or closed under the run (tcp-rr opens another)
    for c in conns:
        _close(c.sock, give_up_ns)
        counts["server_kernel"] += c.server_kernel
    if holder is not None:
        holder.close()
    meta = spec.meta()
    meta.update(_stamp_meta(counts))
    if not per_request:
        meta["connections_lost"] = counts["connections_lost"]
    if ports is not None:
        meta["source_port_range"] = [ports.lo, ports.hi]
    if give_up_ns:
        meta["given_up"] = given_up
    return rows.finish(meta)


def _phase(c: _Conn) -> str:
    """Where a given-up connection was (``GIVEN_UP``): its handshake not seen complete, its request
    not all written (the probe itself late), or its request written and not answered."""
    return "connecting" if not c.connected else ("unsent" if c.out else "unanswered")


def _wait(rl: list, wl: list, timeout: float) -> tuple[list, list]:
    """(readable of ``rl``, writable of ``wl``), waiting at most ``timeout`` s; an error condition
    counts as both, as select() has it (a TX stamp waiting on the error queue is one)."""
    want: dict = {}
    for c in rl:
        want[c.fileno()] = [c, select.POLLIN]
    for c in wl:
        want.setdefault(c.fileno(), [c, 0])[1] |= select.POLLOUT
    poller = select.poll()
    for fd, (_, events) in want.items():
        poller.register(fd, events)
    bad = select.POLLERR | select.POLLHUP
    r, w = [], []
    for fd, ev in poller.poll(max(timeout, 0.0) * 1000.0):
        c, events = want[fd]
        if events & select.POLLIN and ev & (select.POLLIN | bad):
            r.append(c)
        if events & select.POLLOUT and ev & (select.POLLOUT | bad):
            w.append(c)
    return r, w


def _close(sock: socket.socket, abort: bool) -> None:
    """Close; with ``abort`` by RST (SO_LINGER 0), leaving no TIME_WAIT."""
    if abort:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, ABORT)
        except OSError:
            pass
    sock.close()


def _stamp_meta(counts: dict) -> dict:
    """The metadata's timestamps (docs/metrics.md): the connections' source (the weakest of them),
    the responder's RX source over its responses (kernel, user or mixed), the answers that kept a
    user-space time for lack of a stamp."""
    order = (kstamps.USER, kstamps.KERNEL_RX, kstamps.KERNEL)
    source = min(counts["sources"], key=order.index) if counts["sources"] else kstamps.USER
    got, kernel = counts["got"], counts["server_kernel"]
    server = kstamps.KERNEL if got and kernel >= got else (kstamps.USER if not kernel else "mixed")
    return {"timestamps": source, "server_timestamps": server,
            "kernel_tx_missing": counts["tx_missing"], "kernel_rx_missing": counts["rx_missing"],
            "kernel_clock_error_ns": kstamps.clock().error if source != kstamps.USER else 0}
