"""TCP request/response responder: one thread per connection, framed messages (see ``wire``).

Serves both persistent (RR) and connection-per-request (CRR) clients. TCP_NODELAY is on unless
``nodelay=False``. A message larger than ``wire.MAX_TCP_MESSAGE`` or with a bad header closes only
that connection; at most ``MAX_CONNECTIONS`` connections are served at once and an idle one is
closed after ``IDLE_TIMEOUT_S``. The TOS field of a response echoes the value from the request header (user space
cannot read the TOS of TCP segments the way IP_RECVTOS does for UDP). srv_rx_ns is the kernel's RX stamp
the read that completed the request came with (``netslo.traffic.kstamps``; flag ``wire.UDP_KERNEL_RX`` at
``wire.TCP_FLAGS_AT``) where the kernel gives one, else the user-space time after it.
"""

from __future__ import annotations

import errno
import socket
import threading

from netslo.core.families import ANY, bound_socket
from netslo.traffic import kstamps, wire
from netslo.traffic.clock import now_ns
from netslo.traffic.sockopts import set_nodelay

CHUNK = 256 * 1024
MAX_CONNECTIONS = 512        # concurrent connections; more are closed at once
IDLE_TIMEOUT_S = 30.0        # a connection silent this long mid-message (or between messages) is closed


def _recv_exact(conn: socket.socket, n: int, buf: bytearray | None = None, stamp: list | None = None) -> bytes | None:
    """Read exactly n bytes (or discard them into a scratch buffer when buf is given); ``stamp[0]``
    becomes the kernel RX stamp (CLOCK_REALTIME ns) of the last read that had one."""
    if buf is not None:
        view = memoryview(buf)
        left = n
        while left:
            got, anc, _f, _a = conn.recvmsg_into([view[:min(left, len(buf))]], kstamps.CMSG_SPACE)
            if not got:
                return None
            _note(stamp, anc)
            left -= got
        return b""
    parts, left = [], n
    while left:
        chunk, anc, _f, _a = conn.recvmsg(left, kstamps.CMSG_SPACE)
        if not chunk:
            return None
        _note(stamp, anc)
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _note(stamp: list | None, anc) -> None:
    if stamp is not None and (k := kstamps.rx_stamp(anc)) >= 0:
        stamp[0] = k


def serve_connection(conn: socket.socket, nodelay: bool = True, slots: threading.Semaphore | None = None) -> None:
    """Answer framed requests on one connection until the peer closes, idles or misbehaves."""
    scratch = bytearray(CHUNK)
    zeros = bytes(CHUNK)
    conn.settimeout(IDLE_TIMEOUT_S)
    stamp, clock = [-1], kstamps.clock()
    try:
        set_nodelay(conn, nodelay)
        kstamps.enable(conn, tx=False)
        while True:
            stamp[0] = -1
            head = _recv_exact(conn, wire.TCP_REQ.size, stamp=stamp)
            if head is None:
                return
            magic, seq, req_bytes, resp_bytes, tos = wire.TCP_REQ.unpack(head)
            if (magic != wire.TCP_REQ_MAGIC or not wire.TCP_REQ.size <= req_bytes <= wire.MAX_TCP_MESSAGE
                    or not wire.TCP_RESP.size <= resp_bytes <= wire.MAX_TCP_MESSAGE):
                return
            if _recv_exact(conn, req_bytes - wire.TCP_REQ.size, scratch, stamp) is None:
                return
            rx = now_ns()
            if stamp[0] >= 0:
                clock.refresh()
                rx = clock.to_mono(stamp[0])
            body = resp_bytes - wire.TCP_RESP.size
            tx = now_ns()
            head = bytearray(wire.TCP_RESP.pack(wire.TCP_RESP_MAGIC, seq, rx, tx, resp_bytes, tos))
            head[wire.TCP_FLAGS_AT] = wire.UDP_KERNEL_RX if stamp[0] >= 0 else 0
            conn.sendall(bytes(head) + zeros[:min(body, CHUNK)])
            body -= min(body, CHUNK)
            while body > 0:
                conn.sendall(zeros[:min(body, CHUNK)])
                body -= CHUNK
    except OSError:  # includes the idle timeout
        return
    finally:
        conn.close()
        if slots is not None:
            slots.release()


def serve(port: int, bind: str = ANY, nodelay: bool = True, ready=None, stop=None) -> None:
    """Accept loop (both families on ``ANY``: ``families.bound_socket``); each connection gets a daemon
    thread. SystemExit naming the port when the listening socket stops listening (the process ends,
    so its supervisor sees a responder that cannot answer instead of one that spins)."""
    lsock = bound_socket(socket.SOCK_STREAM, bind, port)
    lsock.listen(1024)
    if stop is not None:
        lsock.settimeout(0.2)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    if ready:
        ready()
    while not (stop and stop()):
        try:
            conn, _ = lsock.accept()
        except socket.timeout:
            continue
        except OSError as e:
            if e.errno == errno.EINVAL:     # the listener is no longer listening (e.g. aborted by ss -K)
                raise SystemExit(f"tcp responder: port {port} stopped listening ({e.strerror})") from None
            continue                        # ECONNABORTED, EMFILE, ENOBUFS ...: this connection only
        if not slots.acquire(blocking=False):
            conn.close()  # over the connection cap: refuse rather than grow threads without bound
            continue
        threading.Thread(target=serve_connection, args=(conn, nodelay, slots), daemon=True).start()
