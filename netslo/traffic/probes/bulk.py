"""Bulk TCP probe: one flow as fast as TCP allows, measured with TCP_INFO (no capture needed).

    python -m netslo.agent bulk --target HOST:PORT [--duration 6s] [--omit 1s] [--cc cubic|bbr|reno]
                                [--sndbuf 512KiB] [--sample 100ms]

The data goes to the TCP responder (``netslo.traffic.responders.tcp``) as framed requests of 4 MiB that it
discards (32-byte answers are read and ignored), so no extra server is needed. Every ``--sample``
the sender reads TCP_INFO; throughput = bytes acknowledged by the receiver (tcpi_bytes_acked) over
[omit, duration], in bit/s, like iperf3's ``--omit``. Output: one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time

from netslo.core import phase_times, units
from netslo.core.families import host_port, socket_family
from netslo.traffic import wire

FRAME_BYTES = 4 * 1024 * 1024
TCP_INFO_LEN = 232
# offsets in struct tcp_info (linux/tcp.h)
_FIELDS = {"rto": (8, "I"), "snd_mss": (16, "I"), "lost": (32, "I"), "retrans": (36, "I"),
           "rtt": (68, "I"), "rttvar": (72, "I"), "snd_ssthresh": (76, "I"), "snd_cwnd": (80, "I"),
           "total_retrans": (100, "I"), "pacing_rate": (104, "Q"), "bytes_acked": (120, "Q"),
           "segs_out": (136, "I"), "min_rtt": (148, "I"), "data_segs_out": (156, "I"),
           "delivery_rate": (160, "Q"), "bytes_sent": (200, "Q"), "bytes_retrans": (208, "Q")}


def tcp_info(sock: socket.socket) -> dict:
    """The TCP_INFO fields netslo uses (times in µs as the kernel gives them, bytes, segments)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    out = {}
    for name, (off, fmt) in _FIELDS.items():
        size = struct.calcsize(fmt)
        if off + size <= len(raw):
            out[name] = struct.unpack_from("=" + fmt, raw, off)[0]
    return out


def run(host: str, port: int, duration: float, omit: float, cc: str | None, sndbuf: int | None,
        sample: float) -> dict:
    """Send for ``duration`` seconds; return throughput and TCP_INFO statistics."""
    sock = socket.socket(socket_family(host), socket.SOCK_STREAM)
    if cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.settimeout(10.0)
    sock.connect((host, port))
    sock.setblocking(False)
    used_cc = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode()
    head = wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, 0, FRAME_BYTES, wire.TCP_RESP.size, 0)
    chunk = memoryview(bytes(256 * 1024))
    frame_left, seq = 0, 0
    t0 = time.monotonic()
    next_sample = t0
    series = []
    while True:
        now = time.monotonic()
        if now >= next_sample:
            info = tcp_info(sock)
            series.append((round(now - t0, 4), info.get("bytes_acked", 0), info.get("snd_cwnd", 0),
                           info.get("rtt", 0), info.get("total_retrans", 0)))
            next_sample += sample
        if now - t0 >= duration:
            break
        r, w, _ = select.select([sock], [sock], [], min(sample, max(0.0, next_sample - now)))
        if r:
            try:
                sock.recv(65536)  # 32-byte answers, ignored
            except (BlockingIOError, InterruptedError):
                pass
        if w:
            try:
                if frame_left == 0:
                    seq += 1
                    sock.send(wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, seq, FRAME_BYTES, wire.TCP_RESP.size, 0))
                    frame_left = FRAME_BYTES - len(head)
                    continue
                sent = sock.send(chunk[:min(len(chunk), frame_left)])
                frame_left -= sent
            except (BlockingIOError, InterruptedError):
                pass
    final = tcp_info(sock)
    sock.close()
    a = [s for s in series if s[0] >= omit]
    acked = (a[-1][1] - a[0][1]) if len(a) > 1 else 0
    span = (a[-1][0] - a[0][0]) if len(a) > 1 else 0.0
    cwnds = sorted(s[2] for s in a) or [0]
    rtts = sorted(s[3] for s in a) or [0]
    return {"cc": used_cc, "duration_s": duration, "omit_s": omit,
            "throughput_bps": acked * 8 / span if span else 0.0,
            "bytes_acked": final.get("bytes_acked", 0), "data_segs_out": final.get("data_segs_out", 0),
            "total_retrans": final.get("total_retrans", 0), "bytes_retrans": final.get("bytes_retrans", 0),
            "snd_mss": final.get("snd_mss", 0), "min_rtt_us": final.get("min_rtt", 0),
            "cwnd_p50": cwnds[len(cwnds) // 2], "rtt_p50_us": rtts[len(rtts) // 2],
            "series": series}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m netslo.agent bulk", description=__doc__.split("\n")[0])
    p.add_argument("--target", required=True)
    p.add_argument("--duration", default="6s")
    p.add_argument("--omit", default="1s")
    p.add_argument("--cc", default=None)
    p.add_argument("--sndbuf", default=None)
    p.add_argument("--sample", default="100ms")
    args = p.parse_args(argv)
    from netslo.core.errors import SpecError
    from netslo.traffic.endpoint import parse_target
    try:
        host, port = parse_target(args.target)
        duration = units.duration(args.duration, "--duration")
        omit = units.duration(args.omit, "--omit")
        sample = units.duration(args.sample, "--sample")
        if not 0 <= omit < duration:
            raise SpecError("--omit", args.omit, f"a duration below --duration ({args.duration})")
        if sample <= 0:
            raise SpecError("--sample", args.sample, "a duration > 0")
        sndbuf = units.size(args.sndbuf, "--sndbuf") if args.sndbuf else None
    except SpecError as e:
        print(f"netslo.agent bulk: {e}", file=sys.stderr)
        return 2
    print(json.dumps(run(host, port, duration, omit, args.cc, sndbuf, sample)))
    return 0


def bulk(cluster, client, server, ports, duration: float = 6.0, omit: float = 1.0, cc: str | None = None,
         sndbuf: str | None = None) -> dict:
    """Run one bulk flow from ``client`` to ``server``'s TCP responder where the pods run."""
    args = ["bulk", "--target", host_port(server.ip, ports['tcp']), "--duration", f"{duration}s",
            "--omit", f"{omit}s"]
    if cc:
        args += ["--cc", cc]
    if sndbuf:
        args += ["--sndbuf", sndbuf]
    phase_times.scheduled(duration, "bulk flows and pod commands")
    out = cluster.exec_agent(client, args, timeout=duration + 60.0)
    return json.loads(out.decode().strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
