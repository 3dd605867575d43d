"""HTTP probe (aiohttp client), open loop: ``http`` keeps connections alive, ``http-new`` opens a
new TCP connection per request (``force_close``); ``https``/``https-new`` are the same over TLS 1.3.
Each request is a task started at its scheduled time; RTT = from the task issuing the request to
the full response body read. Rows are streamed to the sink as they become final (``netslo.stats.stream``)
and finished tasks are dropped, so a soak's memory stays bounded.

asyncio wakes timers with millisecond resolution: the timer error is recorded and reported.
"""

from __future__ import annotations

import asyncio
import socket

import aiohttp

from netslo.core.families import url_host
from netslo.stats import samples, stream
from netslo.traffic import tlsca
from netslo.traffic.clock import now_ns, pin_cpu, sleep_until
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.sockopts import set_nodelay, set_tos


def _socket_factory(spec: ProbeSpec):
    def factory(addr_info):
        family, type_, proto, _canon, _addr = addr_info
        sock = socket.socket(family, type_, proto)
        sock.setblocking(False)
        set_tos(sock, spec.tos)
        set_nodelay(sock, spec.nodelay)  # aiohttp sets TCP_NODELAY again on connect; Nagle cannot stay on
        return sock
    return factory


async def _run(spec: ProbeSpec, rows) -> None:
    per_request = spec.protocol in ("http-new", "https-new")
    connector = aiohttp.TCPConnector(force_close=per_request, limit=0,
                                     socket_factory=_socket_factory(spec))
    tls = spec.protocol.startswith("https")
    url = f"{'https' if tls else 'http'}://{url_host(spec.host)}:{spec.port}/rr"
    if tls:  # TLS 1.3 against the run's CA (netslo.traffic.tlsca); no session resumption: full handshakes
        tls_args = {"ssl": tlsca.client_context(), "server_hostname": tlsca.SERVER_NAME}
    else:
        tls_args = {}
    body = bytes(spec.req_bytes)
    headers = {"X-Resp-Bytes": str(spec.resp_bytes)}
    arrivals = 0
    timeout = aiohttp.ClientTimeout(total=max(spec.wait, 1.0) + 5.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        if not per_request:  # open the keep-alive connection before the schedule starts
            async with session.post(url, data=body, headers=headers, **tls_args) as resp:
                await resp.read()

        async def one(seq: int) -> None:
            nonlocal arrivals
            rows[seq]["send_ns"] = now_ns()
            try:
                async with session.post(url, data=body, headers=headers, **tls_args) as resp:
                    data = await resp.read()
                    t = now_ns()
                    row = rows[seq]        # fetched again: None once its block was written (late)
                    if resp.status != 200 or row is None:
                        return
                    row["recv_ns"] = t
                    row["resp_bytes"] = len(data)
                    row["srv_rx_ns"] = int(resp.headers.get("X-Srv-Rx-Ns", -1))
                    row["srv_tx_ns"] = int(resp.headers.get("X-Srv-Tx-Ns", -1))
                    row["srv_seen"] = 1
                    row["arrival"] = arrivals
                    arrivals += 1
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
                return

        loop = asyncio.get_running_loop()
        interval_ns = spec.interval_ns
        start = now_ns() + 20_000_000
        pending: set = set()       # tasks still running (finished ones are dropped)
        for seq in range(spec.count):
            sched = start + seq * interval_ns
            await sleep_until(sched)
            rows[seq]["sched_ns"] = sched
            task = loop.create_task(one(seq))
            pending.add(task)
            task.add_done_callback(pending.discard)
            if seq % stream.RETIRE_EVERY == 0:
                rows.retire(now_ns())
        if pending:
            await asyncio.wait(pending, timeout=spec.wait + 5.0)
        for task in list(pending):
            task.cancel()


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run the HTTP probe (keep-alive for ``http``, connection per request for ``http-new``); rows
    go to ``sink`` in chunks as they become final; returns the set (metadata only for a file sink)."""
    pin_cpu(spec.cpu)
    rows = stream.RowStream(spec.count, settle_ns=int(spec.wait * 1e9), sink=sink,
                            defaults={"req_bytes": spec.req_bytes, "tos_sent": spec.tos})
    asyncio.run(_run(spec, rows))
    return rows.finish(spec.meta())
