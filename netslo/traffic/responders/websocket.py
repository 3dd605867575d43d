"""WebSocket responder (aiohttp), plain (kind ``ws``) or TLS 1.3 (kind ``tls``).

``GET /ws`` upgrades to a WebSocket; every binary request message (``payload.WS_REQ`` header)
gets one binary answer of the requested size: ``payload.WS_RESP`` header with the server's receive
time (full message read) and send time (CLOCK_MONOTONIC ns), then random bytes. No compression
(permessage-deflate is refused). The same app also serves the HTTP responder's ``POST /rr``, so
persistent (WebSocket), per-request HTTP and TLS are measured against one server.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from netslo.core.families import ANY
from netslo.traffic import payload, tlsca, wire
from netslo.traffic.clock import now_ns
from netslo.traffic.responders import http as http_responder
from netslo.traffic.responders.aioserve import run_app


async def ws_echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(compress=False, max_msg_size=wire.MAX_TCP_MESSAGE)
    await ws.prepare(request)
    async for msg in ws:
        if msg.type != aiohttp.WSMsgType.BINARY:
            await ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=b"binary messages only")
            break
        rx = now_ns()
        try:
            seq, size = payload.parse_ws_request(msg.data)
        except payload.PayloadError as e:
            await ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=str(e).encode()[:120])
            break
        if not payload.WS_RESP.size <= size <= wire.MAX_TCP_MESSAGE:
            await ws.close(code=aiohttp.WSCloseCode.MESSAGE_TOO_BIG,
                           message=f"resp_bytes {size}: expected {payload.WS_RESP.size}..{wire.MAX_TCP_MESSAGE}".encode())
            break
        await ws.send_bytes(payload.ws_response(seq, rx, now_ns(), size))
    return ws


def make_app() -> web.Application:
    app = http_responder.make_app()
    app.router.add_get("/ws", ws_echo)
    return app


def serve(port: int, bind: str = ANY, tls_dir=None, tls: bool = False, ready=None, stop=None) -> None:
    """Run until ``stop()`` returns True (checked every 0.2 s); TLS 1.3 when ``tls``."""
    run_app(make_app(), port, bind, tlsca.server_context(tls_dir) if tls else None, ready, stop)
