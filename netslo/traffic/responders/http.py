"""HTTP responder (aiohttp): ``POST /rr`` answers with ``X-Resp-Bytes`` bytes of body.

Headers on the answer: ``X-Srv-Rx-Ns`` (request body fully read) and ``X-Srv-Tx-Ns`` (response
about to be written), both CLOCK_MONOTONIC ns. Keep-alive is allowed; the client decides.
Request bodies above ``wire.MAX_TCP_MESSAGE`` are refused with 413 by aiohttp itself.
"""

from __future__ import annotations

from aiohttp import web

from netslo.core.families import ANY
from netslo.traffic import wire
from netslo.traffic.clock import now_ns

_ZEROS = bytes(wire.MAX_TCP_MESSAGE // 64)


async def rr(request: web.Request) -> web.Response:
    await request.read()
    rx = now_ns()
    try:
        size = int(request.headers.get("X-Resp-Bytes", "0"))
    except ValueError:
        return web.Response(status=400, text="X-Resp-Bytes: expected an integer byte count\n")
    if not 0 <= size <= len(_ZEROS):
        return web.Response(status=400, text=f"X-Resp-Bytes: expected 0..{len(_ZEROS)}\n")
    return web.Response(body=_ZEROS[:size], headers={"X-Srv-Rx-Ns": str(rx), "X-Srv-Tx-Ns": str(now_ns())})


async def healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def make_app() -> web.Application:
    app = web.Application(client_max_size=wire.MAX_TCP_MESSAGE)
    app.router.add_post("/rr", rr)
    app.router.add_get("/healthz", healthz)
    return app


def serve(port: int, bind: str = ANY, ready=None, stop=None) -> None:
    """Run until ``stop()`` returns True (checked every 0.2 s) or forever."""
    from netslo.traffic.responders.aioserve import run_app
    run_app(make_app(), port, bind, ready=ready, stop=stop)
