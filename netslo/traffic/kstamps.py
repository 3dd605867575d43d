"""Kernel software timestamps of a socket's datagrams, on the samples' clock (CLOCK_MONOTONIC, ns).

The kernel's Documentation/networking/timestamping.rst defines the clock points used here:

  TX  ``SOF_TIMESTAMPING_TX_SCHED``: taken when the packet enters the device's queueing layer
      (``__dev_queue_xmit``), before the packet scheduler: the sender's egress qdisc (netem,
      shaping, a CNI's bandwidth limit) is inside the round trip, which the driver's stamp
      (``TX_SOFTWARE``, after the qdisc) would leave out. Reported on the socket's error queue with
      ``SOF_TIMESTAMPING_OPT_ID`` (a per-socket counter of sent datagrams, 0 for the first send
      after the option is set) and ``SOF_TIMESTAMPING_OPT_TSONLY`` (no payload).
  RX  ``SOF_TIMESTAMPING_RX_SOFTWARE``: taken when the packet enters the kernel's receive path
      (``netif_receive_skb``), before any protocol or socket work, reported as a control message
      with the datagram. ``SO_TIMESTAMPNS`` gives the same receive point where ``SO_TIMESTAMPING``
      is refused.

Both are CLOCK_REALTIME; ``Clock.to_mono`` maps them onto CLOCK_MONOTONIC (see there: a constant
offset, read to within a few tens of ns; a step of the wall clock moves the stamps of up to one
second after it).

Sources, what a probe records in its metadata as ``timestamps``:
  kernel     TX and RX kernel stamps (the network's round trip)
  kernel-rx  RX kernel stamps, TX the user-space time just before ``send`` (SO_TIMESTAMPING refused,
             or no TX stamp came back on this path)
  user       user-space times only (no kernel stamp at all)
"""

from __future__ import annotations

import errno
import socket
import struct
import time

SO_TIMESTAMPNS = 35             # SO_TIMESTAMPNS_OLD (asm-generic/socket.h); SCM_TIMESTAMPNS is the same
SO_TIMESTAMPING = 37            # SO_TIMESTAMPING_OLD; SCM_TIMESTAMPING is the same
IP_RECVERR = 11
SO_EE_ORIGIN_TIMESTAMPING = 4
SCM_TSTAMP_SCHED = 1            # ee_info of a TX stamp taken before the qdisc (the others: SND 0, ACK 2)

RX_SOFTWARE, SOFTWARE = 1 << 3, 1 << 4
OPT_ID, TX_SCHED, OPT_TSONLY = 1 << 7, 1 << 8, 1 << 11
FLAGS = TX_SCHED | RX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY
RX_FLAGS = RX_SOFTWARE | SOFTWARE

KERNEL, KERNEL_RX, USER = "kernel", "kernel-rx", "user"
SOURCES = (KERNEL, KERNEL_RX, USER)

TIMESPEC = struct.Struct("@qq")             # struct timespec on 64-bit Linux
EXTENDED_ERR = struct.Struct("@IBBBBII")    # struct sock_extended_err
CMSG_SPACE = socket.CMSG_SPACE(3 * TIMESPEC.size)           # scm_timestamping: ts[3]
ERR_CMSG_SPACE = CMSG_SPACE + socket.CMSG_SPACE(EXTENDED_ERR.size + 16)


def enable(sock: socket.socket, tx: bool = True) -> str:
    """Ask for kernel stamps on ``sock``: TX and RX with ``SO_TIMESTAMPING`` (``tx``), else RX
    only with ``SO_TIMESTAMPING`` or ``SO_TIMESTAMPNS``. Returns what the kernel accepted (a source
    of ``SOURCES``); whether stamps really come is known only from packets (see ``Stamps``)."""
    if tx:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, FLAGS)
            return KERNEL
        except OSError:
            pass
    for opt, value in ((SO_TIMESTAMPING, RX_FLAGS), (SO_TIMESTAMPNS, 1)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, value)
            return KERNEL_RX
        except OSError:
            pass
    return USER


def hold_rx() -> socket.socket | None:
    """A socket that only asks for RX stamps, to be closed after a run. The kernel stamps received
    packets only while some socket asks (a host-wide switch, turned on a moment after the first
    asks and off when the last closes), so a run whose own sockets come and go (a connection per
    request) holds one open to keep the switch on; None if the kernel refuses."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if enable(sock, tx=False) == USER:
        sock.close()
        return None
    return sock


def rx_stamp(ancdata) -> int:
    """The kernel receive stamp (CLOCK_REALTIME ns) among recvmsg's control messages, -1 if none."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind in (SO_TIMESTAMPING, SO_TIMESTAMPNS) and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            if sec or nsec:
                return sec * 1_000_000_000 + nsec
    return -1


def read_tx(sock: socket.socket) -> list[tuple[int, int]]:
    """Every TX stamp waiting on ``sock``'s error queue as (OPT_ID key, CLOCK_REALTIME ns), stamps
    before the qdisc (``SCM_TSTAMP_SCHED``) only; other error-queue messages are read and dropped."""
    out = []
    while True:
        try:
            _d, anc, _f, _a = sock.recvmsg(0, ERR_CMSG_SPACE, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return out
        except OSError as e:
            if e.errno == errno.EAGAIN:
                return out
            continue
        stamp, key = -1, None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(data)
                stamp = sec * 1_000_000_000 + nsec
            elif level in (socket.IPPROTO_IP, socket.IPPROTO_IPV6) and len(data) >= EXTENDED_ERR.size:
                e_no, origin, _t, _c, _p, info, key_ = EXTENDED_ERR.unpack_from(data)
                if e_no == errno.ENOMSG and origin == SO_EE_ORIGIN_TIMESTAMPING and info == SCM_TSTAMP_SCHED:
                    key = key_
        if key is not None and stamp > 0:
            out.append((key, stamp))


class Clock:
    """CLOCK_REALTIME stamps -> CLOCK_MONOTONIC ns. The kernel keeps the two clocks a constant
    offset apart (NTP's frequency corrections apply to both) that changes only when the wall clock
    is stepped; the offset is read as the tightest of ``READS`` bracketings (monotonic, realtime,
    monotonic: error at most half the bracket, ~20-40 ns here) and read again on ``refresh`` at most
    every ``REFRESH_NS``, so a step is followed within that time. One instance per process
    (``clock()``): every converter in it agrees exactly."""

    READS = 16
    REFRESH_NS = 1_000_000_000

    def __init__(self):
        self.offset, self.error, self.read_at = self._read()

    def _read(self) -> tuple[int, int, int]:
        """(offset, error bound, when) of the tightest bracketing, ns."""
        best = None
        for _ in range(self.READS):
            a = time.monotonic_ns()
            r = time.clock_gettime_ns(time.CLOCK_REALTIME)
            b = time.monotonic_ns()
            if best is None or b - a < best[1]:
                best = (r - (a + b) // 2, b - a, b)
        offset, gap, when = best
        return offset, gap // 2 + 1, when

    def refresh(self) -> None:
        """Read the offset again when the last reading is older than ``REFRESH_NS``; the new one
        replaces it only when it moved by more than both error bounds (a step of the wall clock)."""
        now = time.monotonic_ns()
        if now - self.read_at < self.REFRESH_NS:
            return
        offset, error, when = self._read()
        if abs(offset - self.offset) > error + self.error:
            self.offset, self.error = offset, error
        self.read_at = when

    def to_mono(self, real_ns: int) -> int:
        return real_ns - self.offset if real_ns >= 0 else -1


_clock: Clock | None = None


def clock() -> Clock:
    """This process's ``Clock``."""
    global _clock
    if _clock is None:
        _clock = Clock()
    return _clock
