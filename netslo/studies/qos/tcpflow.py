"""TCP flows for QoS tests: a bulk sender and a message sender that sample TCP_INFO over time.

    python -m netslo.studies.qos.tcpflow send --target HOST:PORT [--duration 5s] [--cc cubic|bbr|reno]
                                      [--tos EF] [--sample 100ms] [--sndbuf 4MiB]
    python -m netslo.studies.qos.tcpflow messages --target HOST:PORT [--size 100kB] [--resp-size 1k]
                                          [--count 6] [--interval 1s] [--cc cubic]
                                          [--arm CC[:SSAI] --arm CC[:SSAI] ...]

Both talk to netslo's TCP responder (framed requests, see ``netslo.traffic.wire``): ``send`` streams 1 MiB
frames whose 32-byte answers it reads and ignores; ``messages`` sends one request every
``--interval`` on one persistent connection and times each until its response has arrived.

``send`` samples at every multiple of ``--sample`` after the start (row = one sample):
  t_s          seconds since the connection was established
  written      bytes the application had handed to the socket (what iperf3's sender counts)
  acked        bytes the receiver acknowledged (tcpi_bytes_acked: delivered)
  rtt_us rttvar_us min_rtt_us   smoothed RTT, its mean deviation, minimum (µs, kernel's view)
  cwnd ssthresh                 congestion window and slow-start threshold (segments)
  retrans total_retrans         segments retransmitted and unacknowledged now / over the life
  delivery_bps                  the kernel's most recent delivery-rate estimate (bits/s)
  data_segs_out                 data segments sent so far (retransmissions included)
``messages`` reports per message: t_s, fct_s (first byte sent -> full response received), cwnd_start
(the window right after the request was queued under TCP_CORK: after the kernel's restart-after-idle
check, before any segment left), ssthresh, rtt_us, total_retrans.

``--arm`` (repeatable) interleaves arms in time instead of running them one after the other: one
connection per arm, each sending every ``--interval``, arm k of K offset by k/K of the interval,
and never two messages at once (an arm waits until the previous message's response is in). An arm
``CC:SSAI`` writes ``SSAI`` to net.ipv4.tcp_slow_start_after_idle of this process's network
namespace just before each of its messages: Linux reads that sysctl when a connection queues data
after idle (``tcp_slow_start_after_idle_check`` from ``tcp_skb_entail``, net/ipv4/tcp.c), per
connection, so the arms of one namespace see different values. The value found at start is
written back at exit. The output is then
``{"mode": "messages", "arms": [<one messages result per arm, with "ssai">, ...]}``.

SIGTERM stops early and still prints the JSON (one object on stdout). Bad options: one line, exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass

from netslo.core import units
from netslo.core.errors import InfrastructureError, SpecError
from netslo.core.families import socket_family
from netslo.traffic import wire
from netslo.traffic.sockopts import set_tos

FRAME_BYTES = 1024 * 1024
SEND_FIELDS = ("t_s", "written", "acked", "rtt_us", "rttvar_us", "min_rtt_us", "cwnd", "ssthresh",
               "retrans", "total_retrans", "delivery_bps", "data_segs_out")
MESSAGE_FIELDS = ("t_s", "fct_s", "cwnd_start", "ssthresh", "rtt_us", "total_retrans")
INFINITE_SSTHRESH = 0x7FFFFFFF
SSAI_PATH = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"   # per network namespace (the caller's)


@dataclass(frozen=True)
class Arm:
    """One connection of a message run: its congestion control (None: the namespace default) and
    the tcp_slow_start_after_idle value written just before each of its messages (None: untouched)."""
    cc: str | None = None
    ssai: str | None = None


def parse_arm(text: str) -> Arm:
    """'cubic:1' -> Arm('cubic', '1'); 'bbr' -> Arm('bbr'); SpecError naming --arm otherwise."""
    cc, sep, ssai = text.partition(":")
    if not cc or (sep and ssai not in ("0", "1")):
        raise SpecError("--arm", text, "CC or CC:SSAI with SSAI 0 or 1, e.g. cubic:1")
    return Arm(cc, ssai or None)


def tcp_info(sock) -> dict:
    from netslo.traffic.probes.bulk import tcp_info as read  # issue 3's TCP_INFO reader (offsets of linux/tcp.h)
    return read(sock)


def _connect(host: str, port: int, cc: str | None, tos: int, sndbuf: int | None) -> socket.socket:
    sock = socket.socket(socket_family(host), socket.SOCK_STREAM)
    if cc:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        except OSError as e:
            sock.close()
            raise SpecError("--cc", cc, f"a congestion control this kernel allows ({e.strerror})") from None
    if tos:
        set_tos(sock, tos)
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.settimeout(10.0)
    sock.connect((host, port))
    return sock


def _cc_of(sock) -> str:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode()


def _row(t: float, written: int, info: dict) -> list:
    ss = info.get("snd_ssthresh", 0)
    return [round(t, 4), written, info.get("bytes_acked", 0), info.get("rtt", 0), info.get("rttvar", 0),
            info.get("min_rtt", 0), info.get("snd_cwnd", 0), -1 if ss >= INFINITE_SSTHRESH else ss,
            info.get("retrans", 0), info.get("total_retrans", 0), info.get("delivery_rate", 0) * 8,
            info.get("data_segs_out", 0)]


class _Stop:
    """Set by SIGTERM: the flow ends at the next sample and still reports."""

    def __init__(self):
        self.now = False
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, *_):
        self.now = True


def send(host: str, port: int, duration: float, cc: str | None = None, tos: int = 0,
         sample: float = 0.1, sndbuf: int | None = None) -> dict:
    """Stream for ``duration`` s (or until SIGTERM); TCP_INFO time series as described above."""
    stop = _Stop()
    sock = _connect(host, port, cc, tos, sndbuf)
    sock.setblocking(False)
    used = _cc_of(sock)
    chunk = memoryview(bytes(256 * 1024))
    frame_left, seq, written = 0, 0, 0
    t0 = time.monotonic()
    k, rows = 0, []
    while True:
        now = time.monotonic()
        if now >= t0 + k * sample:
            rows.append(_row(now - t0, written, tcp_info(sock)))
            k = int((now - t0) / sample) + 1
            if now - t0 >= duration or stop.now:
                break
        r, w, _ = select.select([sock], [sock], [], max(0.0, t0 + k * sample - now))
        if r:
            try:
                if not sock.recv(65536):
                    break
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                break
        if not w:
            continue
        try:
            if frame_left == 0:
                seq += 1
                head = wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, seq, FRAME_BYTES, wire.TCP_RESP.size, tos & 0xFF)
                sent = sock.send(head)
                if sent != len(head):  # keep framing simple: headers go out whole or the flow ends
                    break
                frame_left = FRAME_BYTES - len(head)
                written += sent
                continue
            sent = sock.send(chunk[:min(len(chunk), frame_left)])
            frame_left -= sent
            written += sent
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            break
    sock.close()
    return {"mode": "send", "cc": used, "tos": tos, "sample_s": sample, "duration_s": duration,
            "fields": list(SEND_FIELDS), "rows": rows}


def messages(host: str, port: int, size: int, resp_size: int, count: int, interval: float,
             cc: str | None = None, tos: int = 0) -> dict:
    """One ``size``-byte request every ``interval`` s on one connection; per-message FCT and cwnd."""
    return interleaved_messages(host, port, size, resp_size, count, interval, [Arm(cc)], tos)[0]


def interleaved_messages(host: str, port: int, size: int, resp_size: int, count: int, interval: float,
                         arms: list[Arm], tos: int = 0) -> list[dict]:
    """``count`` messages per arm, every ``interval`` s on the arm's own connection, arm k offset by
    k/len(arms) of the interval, one message at a time; one ``messages`` result per arm."""
    stop = _Stop()
    socks = []
    with contextlib.ExitStack() as cleanup:
        if any(a.ssai is not None for a in arms):
            before = _read_ssai()
            cleanup.callback(_write_ssai, before)
        for a in arms:
            socks.append(_connect(host, port, a.cc, tos, None))
            cleanup.callback(socks[-1].close)
            socks[-1].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = bytes(max(0, size - wire.TCP_REQ.size))
        out = [{"mode": "messages", "cc": _cc_of(sk), "ssai": a.ssai, "size": size, "resp_size": resp_size,
                "interval_s": interval, "offset_s": k * interval / len(arms), "fields": list(MESSAGE_FIELDS),
                "rows": []} for k, (a, sk) in enumerate(zip(arms, socks))]
        t0 = time.monotonic()
        for i in range(count):
            for k, (a, sk) in enumerate(zip(arms, socks)):
                while (left := t0 + i * interval + out[k]["offset_s"] - time.monotonic()) > 0 and not stop.now:
                    time.sleep(min(left, 0.05))
                if stop.now:
                    return out
                if a.ssai is not None:
                    _write_ssai(a.ssai)
                out[k]["rows"].append(_message(sk, i, size, resp_size, tos, body, t0))
    return out


def _message(sock, seq: int, size: int, resp_size: int, tos: int, body: bytes, t0: float) -> list:
    """Send one request, wait for its whole response: one MESSAGE_FIELDS row."""
    start = time.monotonic()
    # corked: the header is queued, not sent, so TCP_INFO shows the window right after the
    # kernel's restart-after-idle check and before any ACK; the message leaves as one write would
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    sock.sendall(wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, seq, max(size, wire.TCP_REQ.size), resp_size, tos & 0xFF))
    info = tcp_info(sock)
    sock.sendall(body)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
    need = resp_size
    while need > 0:
        got = sock.recv(min(need, 65536))
        if not got:
            raise ConnectionError("responder closed the connection")
        need -= len(got)
    end = time.monotonic()
    after = tcp_info(sock)
    ss = info.get("snd_ssthresh", 0)
    return [round(start - t0, 4), end - start, info.get("snd_cwnd", 0),
            -1 if ss >= INFINITE_SSTHRESH else ss, after.get("rtt", 0), after.get("total_retrans", 0)]


class SysctlError(Exception):
    """tcp_slow_start_after_idle could not be read or written in this namespace."""


def _read_ssai() -> str:
    try:
        with open(SSAI_PATH) as f:
            return f.read().strip()
    except OSError as e:
        raise SysctlError(f"cannot read {SSAI_PATH}: {e.strerror}") from None


def _write_ssai(value: str) -> None:
    try:
        with open(SSAI_PATH, "w") as f:
            f.write(value)
    except OSError as e:
        raise SysctlError(f"cannot write {value} to {SSAI_PATH}: {e.strerror}") from None


# ---- analysis helpers (run where the JSON is read) ------------------------------------------------

def column(result: dict, name: str) -> list:
    i = result["fields"].index(name)
    return [r[i] for r in result["rows"]]


def rates(result: dict, which: str = "acked", start: float = 0.0) -> tuple[list, list]:
    """(interval end times s, rates bits/s) of ``written`` or ``acked`` between consecutive samples."""
    t, b = column(result, "t_s"), column(result, which)
    ts, rs = [], []
    for i in range(1, len(t)):
        dt = t[i] - t[i - 1]
        if t[i - 1] >= start and dt > 0:
            ts.append(t[i])
            rs.append((b[i] - b[i - 1]) * 8 / dt)
    return ts, rs


def throughput(result: dict, omit: float = 0.5, which: str = "acked") -> float:
    """Mean rate (bits/s) of ``which`` over [omit, end] (like iperf3 --omit)."""
    t, b = column(result, "t_s"), column(result, which)
    i = next((k for k, x in enumerate(t) if x >= omit), None)
    if i is None or t[-1] - t[i] <= 0:
        return math.nan
    return (b[-1] - b[i]) * 8 / (t[-1] - t[i])


def summary(result: dict, omit: float = 0.5) -> dict:
    """Throughput and medians of TCP_INFO fields after ``omit`` s (for reports)."""
    t = column(result, "t_s")
    keep = [k for k, x in enumerate(t) if x >= omit] or list(range(len(t)))

    def med(name):
        v = sorted(column(result, name)[k] for k in keep)
        return v[len(v) // 2] if v else math.nan

    segs = column(result, "data_segs_out")
    return {"cc": result["cc"], "throughput_bps": throughput(result, omit),
            "rtt_p50_us": med("rtt_us"), "rttvar_p50_us": med("rttvar_us"), "cwnd_p50": med("cwnd"),
            "ssthresh_p50": med("ssthresh"), "delivery_p50_bps": med("delivery_bps"),
            "total_retrans": column(result, "total_retrans")[-1] if t else 0,
            "data_segs_out": segs[-1] if segs else 0}


def loss_met(flow_summary: dict) -> float:
    """The loss rate a flow met: its retransmitted share of the data segments it sent (``summary``'s
    total_retrans / data_segs_out; nan before any segment)."""
    segs = flow_summary.get("data_segs_out") or 0
    return flow_summary.get("total_retrans", 0) / segs if segs else math.nan


def mathis_bps(rtt_s: float, loss: float, mss: int = 1448) -> float:
    """The Mathis et al. bound of a loss-limited Reno-like flow, (MSS/RTT)·1.22/√p in bits/s (Mathis,
    Semke, Mahdavi, Ott, ACM SIGCOMM CCR 27(3), 1997); p the loss rate the flow met."""
    return mss * 8 / rtt_s * 1.22 / math.sqrt(loss)


def mathis_at_loss_met(flow_summary: dict, rtt_s: float, configured: str) -> tuple[float, float]:
    """(the Mathis bound in bits/s at the loss the flow met, that loss), with the flow's MSS (1448 when
    it has none); ``InfrastructureError`` naming the ``configured`` loss when the flow retransmitted
    nothing: the impairment was not realized."""
    p = loss_met(flow_summary)
    if not p > 0:
        raise InfrastructureError(f"impairment not realized: configured loss {configured}, "
                                  f"{flow_summary.get('cc', 'the')} flow retransmitted none of its "
                                  f"{flow_summary.get('data_segs_out', 0)} segments")
    return mathis_bps(rtt_s, p, flow_summary.get("snd_mss") or 1448), p


def main(argv=None) -> int:
    from netslo.traffic.dscp import tos_byte
    from netslo.traffic.endpoint import parse_target
    p = argparse.ArgumentParser(prog="python -m netslo.studies.qos.tcpflow", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("--duration", default="5s")
    s.add_argument("--sample", default="100ms")
    s.add_argument("--sndbuf", default=None)
    m = sub.add_parser("messages")
    m.add_argument("--size", default="100kB")
    m.add_argument("--resp-size", default="1k")
    m.add_argument("--count", type=int, default=6)
    m.add_argument("--interval", default="1s")
    m.add_argument("--arm", action="append", default=[], metavar="CC[:SSAI]",
                   help="interleave one connection per --arm (see above); replaces --cc")
    for q in (s, m):
        q.add_argument("--target", required=True)
        q.add_argument("--cc", default=None)
        q.add_argument("--tos", default="0")
    args = p.parse_args(argv)
    try:
        host, port = parse_target(args.target)
        tos = tos_byte(args.tos, "--tos")
        if args.mode == "send":
            duration = units.duration(args.duration, "--duration")
            sample = units.duration(args.sample, "--sample")
            if duration <= 0 or sample <= 0:
                raise SpecError("--duration/--sample", f"{args.duration}/{args.sample}", "durations > 0")
            sndbuf = units.size(args.sndbuf, "--sndbuf") if args.sndbuf else None
            out = send(host, port, duration, args.cc, tos, sample, sndbuf)
        else:
            if args.count < 1:
                raise SpecError("--count", args.count, "a whole number >= 1")
            size = units.size(args.size, "--size")
            resp = units.size(args.resp_size, "--resp-size")
            if not wire.TCP_REQ.size <= size <= wire.MAX_TCP_MESSAGE or not wire.TCP_RESP.size <= resp <= wire.MAX_TCP_MESSAGE:
                raise SpecError("--size/--resp-size", f"{args.size}/{args.resp_size}",
                                f"sizes from {wire.TCP_RESP.size} B to {wire.MAX_TCP_MESSAGE} B")
            interval = units.duration(args.interval, "--interval")
            if args.arm:
                if args.cc:
                    raise SpecError("--cc", args.cc, "no --cc with --arm (each arm names its own)")
                arms = [parse_arm(a) for a in args.arm]
                out = {"mode": "messages",
                       "arms": interleaved_messages(host, port, size, resp, args.count, interval, arms, tos)}
            else:
                out = messages(host, port, size, resp, args.count, interval, args.cc, tos)
    except SpecError as e:
        print(f"netslo.studies.qos.tcpflow: {e}", file=sys.stderr)
        return 2
    except SysctlError as e:
        print(f"netslo.studies.qos.tcpflow: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
