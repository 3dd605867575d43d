"""Socket options shared by probes and responders: TOS/DSCP marking and reading, Nagle."""

from __future__ import annotations

import socket

IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
CMSG_SPACE = socket.CMSG_SPACE(4)


def enable_recv_tos(sock: socket.socket) -> None:
    """Ask the kernel to report the TOS byte of each received datagram (IP_RECVTOS)."""
    sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)


def tos_from_ancillary(ancdata) -> int:
    """TOS byte from recvmsg ancillary data, -1 when absent."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind in (socket.IP_TOS, IP_RECVTOS) and data:
            return data[0]
    return -1


def set_tos(sock: socket.socket, tos: int) -> None:
    """Mark outgoing packets with this TOS byte (DSCP << 2 | ECN)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, int(tos) & 0xFF)


def set_nodelay(sock: socket.socket, on: bool) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if on else 0)
