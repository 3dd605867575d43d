"""Responder kinds of the protocol-breadth probes, as ``python -m netslo.agent serve KIND`` runs them.

  ws     WebSocket + HTTP ``/rr`` (aiohttp), plain                  -> ``responders.websocket``
  tls    the same app behind TLS 1.3 (``--tls-dir`` / $NETSLO_TLS_DIR) -> ``responders.websocket``
  mqtt   a real mosquitto broker, Nagle off unless ``--no-nodelay``  -> ``responders.mqtt``
  proxy  L7 reverse proxy (ingress-like) to ``--upstream HOST:PORT``  -> ``responders.proxy``
"""

from __future__ import annotations

KINDS = ("ws", "tls", "mqtt", "proxy")


def serve(args, ready=None, stop=None) -> None:
    """Run the responder kind ``args.protocol`` with the agent's parsed ``serve`` options."""
    if args.protocol in ("ws", "tls"):
        from netslo.traffic.responders import websocket
        websocket.serve(args.port, args.bind, tls_dir=args.tls_dir, tls=args.protocol == "tls",
                        ready=ready, stop=stop)
    elif args.protocol == "mqtt":
        from netslo.traffic.responders import mqtt
        mqtt.serve(args.port, args.bind, nodelay=not args.no_nodelay, ready=ready, stop=stop)
    elif args.protocol == "proxy":
        from netslo.core.errors import SpecError
        from netslo.traffic.endpoint import parse_target
        from netslo.traffic.responders import proxy
        if not args.upstream:
            raise SpecError("--upstream", None, "HOST:PORT of the HTTP responder (serve proxy needs it)")
        proxy.serve(args.port, parse_target(args.upstream, "--upstream"), args.bind, ready=ready, stop=stop)
    else:
        raise ValueError(f"kind: value {args.protocol!r} — expected one of {', '.join(KINDS)}")
