"""L7 reverse proxy (aiohttp), the embedded stand-in for an ingress controller.

``POST /rr`` is forwarded to the upstream HTTP responder over a pool of keep-alive connections
(TCP_NODELAY on both sides, as aiohttp sets it); the answer body and the responder's
``X-Srv-Rx-Ns``/``X-Srv-Tx-Ns`` headers come back unchanged, plus ``X-Proxy-Rx-Ns`` (request read
by the proxy) and ``X-Proxy-Tx-Ns`` (answer about to be written), CLOCK_MONOTONIC ns. An upstream
failure is a 502, so the probe counts it as lost.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from netslo.core.families import ANY, url_host
from netslo.traffic import wire
from netslo.traffic.clock import now_ns
from netslo.traffic.responders.aioserve import run_app

PASS_HEADERS = ("X-Resp-Bytes",)
BACK_HEADERS = ("X-Srv-Rx-Ns", "X-Srv-Tx-Ns")


def make_app(upstream: tuple[str, int]) -> web.Application:
    app = web.Application(client_max_size=wire.MAX_TCP_MESSAGE)
    url = f"http://{url_host(upstream[0])}:{upstream[1]}/rr"

    async def start(app_):
        app_["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                                timeout=aiohttp.ClientTimeout(total=30.0))

    async def stop(app_):
        await app_["session"].close()

    async def rr(request: web.Request) -> web.Response:
        body = await request.read()
        rx = now_ns()
        headers = {k: request.headers[k] for k in PASS_HEADERS if k in request.headers}
        try:
            async with request.app["session"].post(url, data=body, headers=headers) as up:
                data = await up.read()
                back = {k: up.headers[k] for k in BACK_HEADERS if k in up.headers}
                status = up.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            return web.Response(status=502, text=f"upstream {url}: {e}\n")
        back.update({"X-Proxy-Rx-Ns": str(rx), "X-Proxy-Tx-Ns": str(now_ns())})
        return web.Response(status=status, body=data, headers=back)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_post("/rr", rr)
    app.router.add_get("/healthz", lambda _r: web.Response(text="ok\n"))
    return app


def serve(port: int, upstream: tuple[str, int], bind: str = ANY, ready=None, stop=None) -> None:
    """Run until ``stop()`` returns True (checked every 0.2 s)."""
    run_app(make_app(upstream), port, bind, None, ready, stop)
