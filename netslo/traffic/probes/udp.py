"""Isochronous UDP probe (irtt-like), one thread, open loop.

Sends request ``seq`` at ``start + seq*interval`` whatever happened to earlier ones, records the
actual send time (timer error), receives replies in between with ``select`` (µs timeout resolution),
counts duplicates and arrival order, then asks the responder which seqs it saw (FIN) to split loss
into upstream and downstream.

Each request's send_ns/recv_ns are the kernel's software TX/RX stamps where the kernel gives them
(``netslo.traffic.kstamps``; asked for on the socket, then checked on the warm-up flow's packets), the
user-space times around send/recv otherwise; send_app_ns/recv_app_ns always hold the user-space
times. The metadata says which (``timestamps``, ``server_timestamps``, and the answered requests
that lacked a kernel stamp and kept their user-space time: ``kernel_tx_missing``, ``kernel_rx_missing``).
"""

from __future__ import annotations

import os
import select
import socket

import numpy as np

from netslo.core.families import socket_family
from netslo.stats import samples, stream
from netslo.traffic import kstamps, wire
from netslo.traffic.clock import now_ns, pin_cpu, set_timer_slack
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.sockopts import CMSG_SPACE, enable_recv_tos, set_tos, tos_from_ancillary

FIN_TRIES = 5
FIN_TIMEOUT_S = 0.3
WARMUP_REQUESTS = 8        # sent before the schedule on a flow of their own (see warm_up); half the
WARMUP_ANSWERS = 4         # responder's PROMOTE_AFTER: the flow stays on probation, never in its established table
WARMUP_INTERVAL_S = 0.002
WARMUP_WAIT_S = 0.5


class Stamps:
    """The socket's kernel timestamps: its source (``kstamps.SOURCES``), the clock mapping, and the
    rows waiting for their TX stamp by OPT_ID key (the socket's count of sent datagrams)."""

    def __init__(self, sock):
        self.sock = sock
        self.source = kstamps.enable(sock)
        self.clock = kstamps.clock()
        self.keys = 0
        self.waiting: dict = {}          # OPT_ID key -> row (a writable record)
        self.tx = self.rx = 0            # kernel stamps used (the warm-up's decide the source)

    def sent(self, row) -> None:
        """``row``'s request left through one successful send (the kernel counted one key)."""
        if self.source == kstamps.KERNEL:
            self.waiting[self.keys] = row
        self.keys += 1

    def read_tx(self) -> None:
        """Put every TX stamp waiting on the error queue into its row's send_ns."""
        if self.source != kstamps.KERNEL:
            return
        self.clock.refresh()
        for key, stamp in kstamps.read_tx(self.sock):
            row = self.waiting.pop(key, None)
            after = self.waiting.get(key + 1)   # the next request, if sent: its stamp comes after this one
            if row is not None:
                t = self.clock.to_mono(stamp)
                # a request's stamp is taken inside its send: after its own user-space send time, before
                # the next request's (known even when this one's answer is not read yet) and its answer
                if (row["send_app_ns"] <= t and (after is None or t < after["send_app_ns"])
                        and not 0 <= row["recv_ns"] <= t):
                    row["send_ns"] = t          # else not this row's packet: its user-space time stays
                    self.tx += 1
            while self.waiting and (oldest := next(iter(self.waiting))) < key:
                del self.waiting[oldest]        # stamps come in key order: an older one is not coming

    def downgrade(self, source: str) -> None:
        """Use ``source`` (``kernel-rx``) from now on: the warm-up flow got no TX stamp."""
        self.source, self.waiting = source, {}
        self.sock.setsockopt(socket.SOL_SOCKET, kstamps.SO_TIMESTAMPING, kstamps.RX_FLAGS)
        kstamps.read_tx(self.sock)


def _drain(sock, flow, rows, state) -> None:
    """Read every datagram waiting on the socket and fill the rows of the matching seqs (and every
    TX stamp waiting on its error queue)."""
    n = len(rows)
    stamps = state.get("stamps")
    if stamps is not None:
        stamps.read_tx()
    while True:
        try:
            data, anc, _f, _a = sock.recvmsg(wire.MAX_UDP_PAYLOAD, CMSG_SPACE + kstamps.CMSG_SPACE,
                                             socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # e.g. ICMP port unreachable surfaced as ECONNREFUSED
            continue
        t = now_ns()
        try:
            kind, tos, rflow, seq, _s, rx, tx, _r = wire.unpack_udp(data)
        except wire.WireError:
            continue
        if rflow != flow:
            continue
        if kind == wire.UDP_FIN_REPLY:
            state["fin"] = data[wire.UDP_HDR.size:]
            continue
        if kind != wire.UDP_REPLY or seq >= n:
            continue
        row = rows[seq]
        if row is None:             # its block is already written (streamed run): late
            continue
        if row["recv_ns"] >= 0:
            row["dups"] += 1
            continue
        row["recv_ns"] = row["recv_app_ns"] = t
        if stamps is not None and stamps.source != kstamps.USER:
            if (k := kstamps.rx_stamp(anc)) >= 0:
                stamps.clock.refresh()
                row["recv_ns"] = stamps.clock.to_mono(k)
                stamps.rx += 1
            else:
                state["rx_missing"] += 1
            if row["send_ns"] >= row["recv_ns"]:       # a TX stamp that cannot be this request's
                row["send_ns"] = row["send_app_ns"]
            state["tx_missing"] += bool(stamps.source == kstamps.KERNEL and row["send_ns"] == row["send_app_ns"])
        row["srv_rx_ns"] = rx
        row["srv_tx_ns"] = tx
        row["resp_bytes"] = len(data)
        row["tos_srv"] = tos if tos != wire.TOS_UNKNOWN else -1
        row["tos_cli"] = tos_from_ancillary(anc)
        row["arrival"] = state["arrivals"]
        state["arrivals"] += 1
        state["received"] += 1
        state["server_kernel"] += bool(data[wire.UDP_FLAGS_AT] & wire.UDP_KERNEL_RX)


def ask_fin(sock, flow: int, rows, state: dict) -> None:
    """Ask the responder which seqs of ``flow`` arrived (FIN); its answer lands in ``state["fin"]``."""
    fin = wire.pack_udp(wire.UDP_FIN, flow, len(rows))
    for _ in range(FIN_TRIES):
        if state["fin"] is not None:
            break
        try:
            sock.send(fin)
        except OSError:
            pass
        until = now_ns() + int(FIN_TIMEOUT_S * 1e9)
        while state["fin"] is None and (t := now_ns()) < until:
            ready, _, _ = select.select([sock], [], [], (until - t) / 1e9)
            if ready:
                _drain(sock, flow, rows, state)


def set_seen(rows, state: dict) -> None:
    """Fill ``srv_seen`` from the FIN answer (only while every row is still held: ``keep_all``)."""
    n = len(rows)
    if state["fin"] is not None and n <= wire.MAX_FIN_SEQS:
        bits = np.frombuffer(wire.unpack_bitmap(state["fin"]), dtype=np.uint8)
        seen = np.unpackbits(bits, bitorder="little")[:n] if len(bits) else np.zeros(0, np.uint8)
        full = np.zeros(n, dtype=np.int8)
        full[:len(seen)] = seen
        rows.set_column("srv_seen", full)


def _new_flow(spec: ProbeSpec, stamps: Stamps | None = None) -> tuple[int, bytearray, dict]:
    """A random flow id, its request template (``req_bytes``, at least the header) and its receive
    state (with the socket's ``stamps``)."""
    flow = int.from_bytes(os.urandom(8), "big")
    template = bytearray(wire.pack_udp(wire.UDP_REQ, flow, 0, 0, 0, 0, spec.resp_bytes,
                                       size=max(spec.req_bytes, wire.UDP_HDR.size)))
    return flow, template, {"arrivals": 0, "received": 0, "fin": None, "stamps": stamps, "server_kernel": 0,
                                "tx_missing": 0, "rx_missing": 0}


def _schedule(sock, flow: int, rows, state: dict, template: bytearray, start_ns: int, interval_ns: int) -> None:
    """Send request ``seq`` of ``flow`` at ``start_ns + seq * interval_ns`` for every row, answers
    drained in between."""
    seq_off, send_off = 4 + 4 + 8, 4 + 4 + 8 + 8
    stamps = state["stamps"]
    for seq in range(len(rows)):
        sched = start_ns + seq * interval_ns
        while True:
            t = now_ns()
            if t >= sched:
                break
            ready, _, _ = select.select([sock], [], [], (sched - t) / 1e9)
            if ready:
                _drain(sock, flow, rows, state)
        t = now_ns()
        template[seq_off:seq_off + 8] = seq.to_bytes(8, "big")
        template[send_off:send_off + 8] = t.to_bytes(8, "big", signed=True)
        try:
            sock.send(template)
            sent = True
        except OSError:
            sent = False  # counted as lost; the send error is visible as srv_seen == 0
        row = rows[seq]             # (after the send: the bookkeeping stays outside the RTT)
        row["sched_ns"] = sched
        row["send_ns"] = row["send_app_ns"] = t     # send_ns: until the kernel's TX stamp comes
        if sent and stamps is not None:
            stamps.sent(row)
        if seq % stream.RETIRE_EVERY == 0:
            rows.retire(t)


def _collect(sock, flow: int, rows, state: dict, want: int, deadline_ns: int) -> None:
    """Drain answers of ``flow`` until ``want`` have come or ``deadline_ns`` has passed."""
    while state["received"] < want and (t := now_ns()) < deadline_ns:
        ready, _, _ = select.select([sock], [], [], (deadline_ns - t) / 1e9)
        if ready:
            _drain(sock, flow, rows, state)


def warm_up(sock, spec: ProbeSpec, stamps: Stamps | None = None) -> dict:
    """Run the probe's own send and receive code on a flow of its own before the measured schedule:
    ``WARMUP_REQUESTS`` requests at the probe's interval (at most ``WARMUP_INTERVAL_S``), until
    ``WARMUP_ANSWERS`` came back or ``WARMUP_WAIT_S`` after the last; their answers are discarded
    (a late one is ignored like any other flow's). A freshly forked probe takes a page fault the
    first time it writes each page it shares with its parent: inside user-mode-linux, where the
    guest kernel traps every fault, that cost the first ~25 measured requests of a cold probe up to
    30 ms of RTT, and the first request on the host kernel 1.3-2.0 ms against ~0.2 ms (2026-11-26).

    It also checks ``stamps`` on real packets: answered requests without any kernel TX stamp (a
    driver that does not stamp) move the socket to ``kernel-rx``. A missing RX stamp is not a
    property of the path: the kernel turns RX stamping on for the whole host a moment after the
    first socket asks (a deferred static key), and packets received before that have none; such
    rows keep their user-space time and are counted (``kernel_rx_missing``). Returns what the
    metadata records: requests sent and answered."""
    flow, template, state = _new_flow(spec, stamps)
    rows = stream.RowStream(WARMUP_REQUESTS, settle_ns=0, keep_all=True)
    interval_ns = min(spec.interval_ns, int(WARMUP_INTERVAL_S * 1e9))
    _schedule(sock, flow, rows, state, template, now_ns(), interval_ns)
    _collect(sock, flow, rows, state, WARMUP_ANSWERS, now_ns() + int(WARMUP_WAIT_S * 1e9))
    if stamps is not None and state["received"] and stamps.source == kstamps.KERNEL and not stamps.tx:
        stamps.downgrade(kstamps.KERNEL_RX)
    if stamps is not None:
        stamps.tx = stamps.rx = 0
    return {"warmup_sent": WARMUP_REQUESTS, "warmup_answered": state["received"]}


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run the probe; one row per scheduled request (see ``samples``), streamed to ``sink`` in
    chunks as they become final (``netslo.stats.stream``) when the run is too long for the responder's
    FIN bitmap to split its loss anyway; returns the set (metadata only when ``sink`` writes a file)."""
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    sock = socket.socket(socket_family(spec.host), socket.SOCK_DGRAM)
    sock.connect((spec.host, spec.port))
    enable_recv_tos(sock)
    set_tos(sock, spec.tos)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    stamps = Stamps(sock)
    flow, template, state = _new_flow(spec, stamps)
    n = spec.count
    rows = stream.RowStream(n, settle_ns=int(spec.wait * 1e9), sink=sink, keep_all=n <= wire.MAX_FIN_SEQS,
                            defaults={"req_bytes": len(template), "tos_sent": spec.tos})

    warm = warm_up(sock, spec, stamps)
    _schedule(sock, flow, rows, state, template, now_ns() + 20_000_000, spec.interval_ns)
    _collect(sock, flow, rows, state, n, now_ns() + int(spec.wait * 1e9))
    ask_fin(sock, flow, rows, state)
    stamps.read_tx()
    sock.close()
    set_seen(rows, state)
    meta = spec.meta()
    meta.update(flow=flow, fin_answered=state["fin"] is not None, **warm, **stamp_meta(stamps, state))
    return rows.finish(meta)


def stamp_meta(stamps: Stamps, state: dict) -> dict:
    """What the metadata says of the timestamps: the client's source, the responder's RX source
    (kernel, user or mixed over the answers), and the answered requests that kept a user-space
    time for lack of a kernel stamp (counted when the answer came), and the bound on the error of
    mapping the kernel's stamps onto CLOCK_MONOTONIC in this process (``kstamps.Clock``)."""
    got, kernel = state["received"], state["server_kernel"]
    server = kstamps.KERNEL if got and kernel == got else (kstamps.USER if not kernel else "mixed")
    return {"timestamps": stamps.source, "server_timestamps": server,
            "kernel_tx_missing": state["tx_missing"], "kernel_rx_missing": state["rx_missing"],
            "kernel_clock_error_ns": stamps.clock.error if stamps.source != kstamps.USER else 0}
