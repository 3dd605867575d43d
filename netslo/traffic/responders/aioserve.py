"""Run an aiohttp application as a responder: listen, report ready, stop when told (every 0.2 s)."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from netslo.core.families import ANY, bound_socket


def run_app(app: web.Application, port: int, bind: str = ANY, ssl_context=None, ready=None,
            stop=None) -> None:
    """Serve ``app`` on ``bind:port`` (TLS when ``ssl_context``; both families on ``ANY``, one
    socket: ``families.bound_socket``) until ``stop()`` returns True."""

    async def main():
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = bound_socket(socket.SOCK_STREAM, bind, port)
        sock.listen(1024)
        site = web.SockSite(runner, sock, ssl_context=ssl_context, backlog=1024)
        await site.start()
        if ready:
            ready()
        try:
            while not (stop and stop()):
                await asyncio.sleep(0.2)
        finally:
            await runner.cleanup()

    asyncio.run(main())
