"""WebSocket probe (aiohttp): open-loop request/response over ONE persistent connection.

``ws`` is plain, ``wss`` is TLS 1.3 (CA from ``tlsca``; SNI ``tlsca.SERVER_NAME``). The connection
and one warm-up exchange happen before the schedule starts. Each request is a binary message of
``req_bytes`` (header + random bytes) asking for ``resp_bytes`` back; requests are written on
schedule even when earlier answers are outstanding, so queueing shows as latency.
RTT = from just before the request is handed to the WebSocket writer to the full answer message.

While the run goes on, the probe reads TCP_INFO of its own socket after every answer (after every
``meta['tcp_info_stride']``-th one in runs longer than ``TCP_INFO_MAX_ROWS`` requests, so a soak's
series stays bounded); the series is in ``meta['tcp_info']`` (columns ``tcpinfo.ROW_FIELDS``) for
the three-layer comparison, and ``meta['nodelay']['client']`` records whether Nagle was off on the
client socket. Rows are streamed to the sink as they become final (``netslo.stats.stream``).
"""

from __future__ import annotations

import asyncio

import aiohttp

from netslo.core.errors import SpecError
from netslo.core.families import url_host
from netslo.stats import samples, stream
from netslo.traffic import payload, tcpinfo, tlsca, wire
from netslo.traffic.clock import now_ns, pin_cpu, sleep_until
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.probes.http import _socket_factory  # TOS + Nagle on the socket aiohttp opens
from netslo.traffic.sockopts import set_nodelay

WARMUP_SEQ = 2 ** 64 - 1
TCP_INFO_MAX_ROWS = 10_000   # TCP_INFO rows kept at most (every k-th answer beyond that)


async def _run(spec: ProbeSpec, rows, meta: dict) -> None:
    tls = spec.protocol == "wss"
    url = f"{'wss' if tls else 'ws'}://{url_host(spec.host)}:{spec.port}/ws"
    extra = {"ssl": tlsca.client_context(), "server_hostname": tlsca.SERVER_NAME} if tls else {}
    connector = aiohttp.TCPConnector(limit=0, socket_factory=_socket_factory(spec))
    timeout = aiohttp.ClientTimeout(total=None, connect=10.0)
    n = len(rows)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        ws = await session.ws_connect(url, compress=0, max_msg_size=wire.MAX_TCP_MESSAGE, autoping=True,
                                      **extra)
        sock = ws.get_extra_info("socket")
        set_nodelay(sock, spec.nodelay)  # aiohttp turns Nagle off itself; honour --no-nodelay
        meta["nodelay"] = {"client": tcpinfo.nodelay(sock)}
        ssl_obj = ws.get_extra_info("ssl_object")
        meta["tls_version"] = ssl_obj.version() if ssl_obj else None
        await ws.send_bytes(payload.ws_request(WARMUP_SEQ, spec.req_bytes, spec.resp_bytes))
        warm = await ws.receive(timeout=10.0)
        if warm.type != aiohttp.WSMsgType.BINARY:
            raise ConnectionError(f"ws warm-up: got {warm.type.name} — expected a binary answer")
        series = meta["tcp_info"] = []
        stride = meta["tcp_info_stride"] = max(1, -(-n // TCP_INFO_MAX_ROWS))
        state = {"arrivals": 0, "answered": 0}
        all_answered = asyncio.Event()

        async def receiver():
            while True:
                msg = await ws.receive()
                t = now_ns()
                if msg.type != aiohttp.WSMsgType.BINARY:
                    return
                try:
                    seq, rx, tx = payload.parse_ws_response(msg.data)
                except payload.PayloadError:
                    return
                if seq >= n:
                    continue
                row = rows[seq]
                if row is None:          # its block was written: late (streamed run)
                    continue
                if row["recv_ns"] >= 0:
                    row["dups"] += 1
                    continue
                row["recv_ns"], row["srv_rx_ns"], row["srv_tx_ns"] = t, rx, tx
                row["resp_bytes"], row["srv_seen"] = len(msg.data), 1
                row["arrival"] = state["arrivals"]
                state["arrivals"] += 1
                if state["answered"] % stride == 0:
                    try:
                        series.append([t, *tcpinfo.read(sock).row()])
                    except OSError:
                        pass
                state["answered"] += 1
                if state["answered"] == n:
                    all_answered.set()

        recv_task = asyncio.get_running_loop().create_task(receiver())
        interval_ns = spec.interval_ns
        start = now_ns() + 20_000_000
        try:
            for seq in range(n):
                sched = start + seq * interval_ns
                await sleep_until(sched)
                row = rows[seq]
                row["sched_ns"] = sched
                row["send_ns"] = now_ns()
                if seq % stream.RETIRE_EVERY == 0:
                    rows.retire(row["send_ns"])
                await ws.send_bytes(payload.ws_request(seq, spec.req_bytes, spec.resp_bytes))
            await asyncio.wait([recv_task, asyncio.ensure_future(all_answered.wait())],
                               timeout=spec.wait, return_when=asyncio.FIRST_COMPLETED)
        except (aiohttp.ClientError, ConnectionError, OSError):
            pass  # what was not answered stays lost
        finally:
            recv_task.cancel()
            try:
                info = tcpinfo.read(sock)
                meta["tcp_final"] = {"total_retrans": info.total_retrans, "snd_mss": info.snd_mss,
                                     "pmtu": info.pmtu, "min_rtt": info.min_rtt}
            except OSError:
                pass
            await ws.close()
    meta["tcp_info_fields"] = list(tcpinfo.ROW_FIELDS)


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run the WebSocket probe (``ws`` plain or ``wss`` TLS 1.3); rows go to ``sink`` in chunks as
    they become final; returns the set (metadata only for a file sink)."""
    if not payload.WS_REQ.size <= spec.req_bytes <= wire.MAX_TCP_MESSAGE:
        raise SpecError("--req-size", spec.req_bytes, f"{payload.WS_REQ.size}..{wire.MAX_TCP_MESSAGE} bytes for ws")
    if not payload.WS_RESP.size <= spec.resp_bytes <= wire.MAX_TCP_MESSAGE:
        raise SpecError("--resp-size", spec.resp_bytes, f"{payload.WS_RESP.size}..{wire.MAX_TCP_MESSAGE} bytes for ws")
    pin_cpu(spec.cpu)
    rows = stream.RowStream(spec.count, settle_ns=int(spec.wait * 1e9), sink=sink,
                            defaults={"req_bytes": spec.req_bytes, "tos_sent": spec.tos})
    meta = spec.meta()
    asyncio.run(_run(spec, rows, meta))
    return rows.finish(meta)
