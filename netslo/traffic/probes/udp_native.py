"""The ``udp`` probe with its send loop compiled (``--sender native``): for high rates.

Same wire format, rows (one per scheduled request, ``samples.SAMPLE_DTYPE``), kernel timestamps
(``netslo.traffic.kstamps``, in C; the metadata's ``timestamps`` etc. as the Python sender's), streaming and FIN
exchange as ``netslo.traffic.probes.udp``; the schedule, the sends and the reads of replies run in
``udp_sender.c``, built on first use with the system's C compiler and cached. Python's loop keeps
its schedule to ~20 000 requests/s (timer error P99 of a few hundred µs there); the compiled loop
spins for the last 200 µs before each send and reads every reply with its own receive time
(``benchmarks/bench_probe_floor.py`` prints both). A reply later than ``--wait`` counts as late
(meta ``late_responses``), as in a streamed run of the Python probe.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import numpy as np

from netslo.core import native
from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.families import socket_family
from netslo.stats import samples, stream
from netslo.traffic import wire
from netslo.traffic.clock import now_ns
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.probes.udp import ask_fin, set_seen

SOURCE = Path(__file__).with_name("udp_sender.c")
CACHE = Path("/var/cache/netslo/native")
START_AFTER_NS = 50_000_000     # the first send, after the sender process has started (~2 ms here)
READ_BYTES = 1 << 20


def sender() -> tuple[Path | None, str]:
    """(path of the compiled sender, "") or (None, why not)."""
    return native.build(CACHE, "udp-sender", "", SOURCE.read_text(), ["-O2"], [], "the native UDP sender")


def _fill(rows: stream.RowStream, got: np.ndarray, first: int) -> None:
    """Copy rows of seqs first.. (in order) into the stream, block by block."""
    done = 0
    while done < len(got):
        lo = first + done
        hi = min(first + len(got), (lo // rows.block + 1) * rows.block)
        rows.rows_between(lo, hi)[:] = got[done:done + hi - lo]
        done += hi - lo


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run the probe through the compiled sender; see the module doc."""
    exe, why = sender()
    if exe is None:
        raise Unsupported(f"sender native: {why}", "tool")
    n = spec.count
    size = max(spec.req_bytes, wire.UDP_HDR.size)
    host = spec.host if ":" in spec.host else socket.gethostbyname(spec.host)   # an IPv6 address as it is
    wait_ns = int(spec.wait * 1e9)
    rows = stream.RowStream(n, settle_ns=wait_ns, sink=sink, keep_all=n <= wire.MAX_FIN_SEQS)
    flow = int.from_bytes(os.urandom(8), "big")
    argv = [str(exe), host, str(spec.port), str(n), str(spec.interval_ns), str(size), str(spec.resp_bytes),
            str(spec.tos), str(flow), str(now_ns() + START_AFTER_NS), str(wait_ns),
            str(-1 if spec.cpu is None else spec.cpu)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    width, pending, first = samples.SAMPLE_DTYPE.itemsize, b"", 0
    try:
        while data := proc.stdout.read1(READ_BYTES):
            pending += data
            whole = len(pending) - len(pending) % width
            got = np.frombuffer(pending[:whole], dtype=samples.SAMPLE_DTYPE)
            pending = pending[whole:]
            if len(got):
                if got["seq"][0] != first or got["seq"][-1] != first + len(got) - 1:
                    raise InfrastructureError(f"native UDP sender: rows out of order at seq {first}")
                _fill(rows, got, first)
                first += len(got)
                rows.retire(now_ns())
    except BaseException:
        proc.kill()
        raise
    finally:
        err = proc.stderr.read().decode(errors="replace").strip()
        code = proc.wait()
    if code != 0 or first != n:
        raise InfrastructureError(f"native UDP sender exited with {code} after {first} of {n} rows: {err[-300:]}")
    tail = dict(kv.split("=") for kv in err.splitlines()[-1].split()[1:])
    state = {"arrivals": 0, "received": 0, "fin": None}
    sock = socket.socket(socket_family(host), socket.SOCK_DGRAM)
    sock.connect((host, spec.port))
    try:
        ask_fin(sock, flow, rows, state)
    finally:
        sock.close()
    set_seen(rows, state)
    rows.late += int(tail["late"])
    meta = spec.meta()
    got, server = int(tail["received"]), int(tail["server_kernel"])
    meta.update(flow=flow, fin_answered=state["fin"] is not None, late_responses=rows.late,
                send_errors=int(tail["send_errors"]), timestamps=tail["timestamps"],
                server_timestamps="kernel" if got and server >= got else ("user" if not server else "mixed"),
                kernel_tx_missing=int(tail["tx_missing"]), kernel_rx_missing=int(tail["rx_missing"]),
                kernel_clock_error_ns=int(tail["clock_error_ns"]))
    return rows.finish(meta)
