"""Run an aiohttp application as a responder: listen, report ready, stop when told (every 0.2 s)."""

from __future__ import annotations

import asyncio

from aiohttp import web


def run_app(app: web.Application, port: int, bind: str = "0.0.0.0", ssl_context=None, ready=None,
            stop=None) -> None:
    """Serve ``app`` on ``bind:port`` (TLS when ``ssl_context``) until ``stop()`` returns True."""

    async def main():
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, bind, port, reuse_address=True, backlog=1024, ssl_context=ssl_context)
        await site.start()
        if ready:
            ready()
        try:
            while not (stop and stop()):
                await asyncio.sleep(0.2)
        finally:
            await runner.cleanup()

    asyncio.run(main())
