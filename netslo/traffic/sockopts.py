"""Socket options shared by probes and responders: TOS/DSCP marking and reading, Nagle.

IPv4 carries the DSCP in the TOS byte (``IP_TOS``, read with ``IP_RECVTOS``), IPv6 in the Traffic
Class (``IPV6_TCLASS``, read with ``IPV6_RECVTCLASS``): the same 8 bits, DSCP << 2 | ECN. An IPv6
socket gets both where the kernel takes them, because a dual-stack one also talks to IPv4 peers
(as ::ffff:a.b.c.d), whose packets the kernel marks and reports through the IPv4 options (a raw
IPv6 socket refuses IPv4 options: it never carries IPv4).
"""

from __future__ import annotations

import socket
import sys

IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
IPV6_RECVTCLASS = getattr(socket, "IPV6_RECVTCLASS", 66)
IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)
CMSG_SPACE = 2 * socket.CMSG_SPACE(4)          # one TOS or TCLASS message (room for either)


def _both(sock: socket.socket, v4: tuple[int, int], v6: tuple[int, int], value: int) -> None:
    """Set option ``v4`` (level, name) on an IPv4 socket; ``v6`` on an IPv6 one, and ``v4`` too where taken."""
    if sock.family != socket.AF_INET6:
        sock.setsockopt(*v4, value)
        return
    sock.setsockopt(*v6, value)
    try:
        sock.setsockopt(*v4, value)
    except OSError:
        pass


def enable_recv_tos(sock: socket.socket) -> None:
    """Ask the kernel to report the TOS byte / traffic class of each received datagram."""
    _both(sock, (socket.IPPROTO_IP, IP_RECVTOS), (socket.IPPROTO_IPV6, IPV6_RECVTCLASS), 1)


def tos_from_ancillary(ancdata) -> int:
    """TOS byte (IPv4) or traffic class (IPv6) from recvmsg ancillary data, -1 when absent."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind in (socket.IP_TOS, IP_RECVTOS) and data:
            return data[0]
        if level == socket.IPPROTO_IPV6 and kind == IPV6_TCLASS and len(data) >= 4:
            return int.from_bytes(data[:4], sys.byteorder, signed=True) & 0xFF
    return -1


def set_tos(sock: socket.socket, tos: int) -> None:
    """Mark outgoing packets with this TOS byte / traffic class (DSCP << 2 | ECN)."""
    _both(sock, (socket.IPPROTO_IP, socket.IP_TOS), (socket.IPPROTO_IPV6, IPV6_TCLASS), int(tos) & 0xFF)


def set_nodelay(sock: socket.socket, on: bool) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if on else 0)
