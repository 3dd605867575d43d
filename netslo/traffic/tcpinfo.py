"""Transport-layer state of a TCP socket: ``TCP_INFO`` (RTT as the kernel sees it) and Nagle.

``read(sock)`` parses the Linux ``struct tcp_info`` (include/uapi/linux/tcp.h). Times the kernel
reports in µs are converted to seconds here:

  rtt        smoothed RTT (``tcpi_rtt``), s: segment sent -> its ACK, EWMA with gain 1/8
  rttvar     mean deviation of the RTT (``tcpi_rttvar``), s; starts at 250 ms on a new connection
  min_rtt    lowest RTT seen on the connection (``tcpi_min_rtt``), s
  retrans    segments retransmitted and not yet acknowledged (``tcpi_retrans``)
  total_retrans  retransmissions over the connection's life (``tcpi_total_retrans``)
  snd_cwnd   congestion window, segments;  snd_mss  sender MSS, bytes;  pmtu  path MTU, bytes

``nodelay_of_process(pid)`` duplicates another process's TCP sockets (``pidfd_getfd``, Linux >= 5.6,
needs ptrace rights over it: root, or the same user in the same container) to read their
``TCP_NODELAY``: how a test checks that a broker really disabled Nagle on the connections it accepted.
``python -m netslo.agent sockets --comm NAME`` prints that for the processes called NAME in the
agent's own network namespace (``sockets_of``), so every provider reads a pod's broker the same way.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
from dataclasses import dataclass

TCP_INFO = getattr(socket, "TCP_INFO", 11)
# u8 x8 (state .. flags), u32 x24 (rto .. total_retrans), u64 x4 (pacing .. bytes_received),
# u32 x6 (segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out): 160 bytes.
_LAYOUT = struct.Struct("=8B24I4Q6I")
_U32 = {name: 8 + i for i, name in enumerate((
    "rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost", "retrans", "fackets",
    "last_data_sent", "last_ack_sent", "last_data_recv", "last_ack_recv", "pmtu", "rcv_ssthresh",
    "rtt", "rttvar", "snd_ssthresh", "snd_cwnd", "advmss", "reordering", "rcv_rtt", "rcv_space",
    "total_retrans"))}
TCP_ESTABLISHED = 1
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438  # same numbers on x86_64 and arm64


@dataclass(frozen=True)
class TcpInfo:
    """One TCP_INFO snapshot; times in seconds."""

    state: int
    rtt: float
    rttvar: float
    min_rtt: float
    retrans: int
    total_retrans: int
    snd_cwnd: int
    snd_mss: int
    pmtu: int
    segs_out: int

    def row(self) -> list:
        """Compact JSON-ready form: [rtt_us, rttvar_us, min_rtt_us, retrans, total_retrans, cwnd]."""
        return [round(self.rtt * 1e6), round(self.rttvar * 1e6), round(self.min_rtt * 1e6),
                self.retrans, self.total_retrans, self.snd_cwnd]


ROW_FIELDS = ("t_ns", "rtt_us", "rttvar_us", "min_rtt_us", "retrans", "total_retrans", "snd_cwnd")


def parse(blob: bytes) -> TcpInfo:
    """``struct tcp_info`` bytes -> TcpInfo; ValueError when the kernel returned too little."""
    if len(blob) < _LAYOUT.size:
        raise ValueError(f"tcp_info: {len(blob)} bytes — expected at least {_LAYOUT.size} (Linux >= 4.10)")
    v = _LAYOUT.unpack_from(blob)
    u = lambda name: v[_U32[name]]  # noqa: E731
    segs_out, min_rtt = v[36], v[39]  # v[37] segs_in, v[38] notsent_bytes
    return TcpInfo(state=v[0], rtt=u("rtt") * 1e-6, rttvar=u("rttvar") * 1e-6, min_rtt=min_rtt * 1e-6,
                   retrans=u("retrans"), total_retrans=u("total_retrans"), snd_cwnd=u("snd_cwnd"),
                   snd_mss=u("snd_mss"), pmtu=u("pmtu"), segs_out=segs_out)


def read(sock) -> TcpInfo:
    """TCP_INFO of a connected TCP socket (a socket.socket or asyncio's TransportSocket)."""
    return parse(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 256))


def nodelay(sock) -> bool:
    """True when Nagle is disabled (TCP_NODELAY set) on this socket."""
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def _syscall(nr: int, *args) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return rc


def nodelay_of_process(pid: int) -> dict[tuple, bool]:
    """{(local addr, peer addr): TCP_NODELAY} for every connected TCP/IPv4-6 socket of process ``pid``.

    Reads the sockets themselves (pidfd_getfd), so it answers what the kernel applies, not what a
    config file says. OSError when the kernel or the caller's rights do not allow it."""
    pidfd = _syscall(SYS_PIDFD_OPEN, pid, 0)
    out = {}
    try:
        for entry in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{entry}").startswith("socket:"):
                    continue
                fd = _syscall(SYS_PIDFD_GETFD, pidfd, int(entry), 0)
            except OSError:
                continue
            s = socket.socket(fileno=fd)
            try:
                if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                try:
                    peer = s.getpeername()
                except OSError:
                    continue  # a listening socket
                out[(s.getsockname(), peer)] = nodelay(s)
            finally:
                s.close()  # closes our duplicate only
    finally:
        os.close(pidfd)
    return out


def sockets_of(comm: str) -> dict:
    """{'pids': [...], 'nodelay': [[local, peer, TCP_NODELAY], ...]} of the processes named ``comm``
    (/proc/PID/comm) in this process's network namespace (others' are skipped: a host runs many)."""
    own = os.stat("/proc/self/ns/net").st_ino
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino == own and open(f"/proc/{entry}/comm").read().strip() == comm:
                pids.append(int(entry))
        except OSError:
            continue   # gone, or not ours to look at
    rows = [[list(local), list(peer), on] for pid in sorted(pids) for (local, peer), on in nodelay_of_process(pid).items()]
    return {"pids": sorted(pids), "nodelay": rows}
