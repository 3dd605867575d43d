"""TCP request/response responder: one thread per connection, framed messages (see ``wire``).

Serves both persistent (RR) and connection-per-request (CRR) clients. TCP_NODELAY is on unless
``nodelay=False``. A message larger than ``wire.MAX_TCP_MESSAGE`` or with a bad header closes only
that connection; at most ``MAX_CONNECTIONS`` connections are served at once and an idle one is
closed after ``IDLE_TIMEOUT_S``. The TOS field of a response echoes the value from the request header (user space
cannot read the TOS of TCP segments the way IP_RECVTOS does for UDP).
"""

from __future__ import annotations

import socket
import threading

from .. import wire
from ..sockopts import set_nodelay
from ..timing import now_ns

CHUNK = 256 * 1024
MAX_CONNECTIONS = 512        # concurrent connections; more are closed at once
IDLE_TIMEOUT_S = 30.0        # a connection silent this long mid-message (or between messages) is closed


def _recv_exact(conn: socket.socket, n: int, buf: bytearray | None = None) -> bytes | None:
    """Read exactly n bytes (or discard them into a scratch buffer when buf is given)."""
    if buf is not None:
        view = memoryview(buf)
        left = n
        while left:
            got = conn.recv_into(view, min(left, len(buf)))
            if not got:
                return None
            left -= got
        return b""
    parts, left = [], n
    while left:
        chunk = conn.recv(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def serve_connection(conn: socket.socket, nodelay: bool = True, slots: threading.Semaphore | None = None) -> None:
    """Answer framed requests on one connection until the peer closes, idles or misbehaves."""
    scratch = bytearray(CHUNK)
    zeros = bytes(CHUNK)
    conn.settimeout(IDLE_TIMEOUT_S)
    try:
        set_nodelay(conn, nodelay)
        while True:
            head = _recv_exact(conn, wire.TCP_REQ.size)
            if head is None:
                return
            magic, seq, req_bytes, resp_bytes, tos = wire.TCP_REQ.unpack(head)
            if (magic != wire.TCP_REQ_MAGIC or not wire.TCP_REQ.size <= req_bytes <= wire.MAX_TCP_MESSAGE
                    or not wire.TCP_RESP.size <= resp_bytes <= wire.MAX_TCP_MESSAGE):
                return
            if _recv_exact(conn, req_bytes - wire.TCP_REQ.size, scratch) is None:
                return
            rx = now_ns()
            body = resp_bytes - wire.TCP_RESP.size
            tx = now_ns()
            conn.sendall(wire.TCP_RESP.pack(wire.TCP_RESP_MAGIC, seq, rx, tx, resp_bytes, tos)
                         + zeros[:min(body, CHUNK)])
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


def serve(port: int, bind: str = "0.0.0.0", nodelay: bool = True, ready=None, stop=None) -> None:
    """Accept loop; each connection gets a daemon thread."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((bind, port))
    lsock.listen(1024)
    if stop is not None:
        lsock.settimeout(0.2)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    if ready:
        ready()
    while not (stop and stop()):
        try:
            conn, _ = lsock.accept()
        except (socket.timeout, OSError):
            continue
        if not slots.acquire(blocking=False):
            conn.close()  # over the connection cap: refuse rather than grow threads without bound
            continue
        threading.Thread(target=serve_connection, args=(conn, nodelay, slots), daemon=True).start()
