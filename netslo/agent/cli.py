"""The one program that runs inside a pod, for every provider.

    python -m netslo.agent serve udp|tcp|http|ws|tls|mqtt|proxy|dns --port P [--bind ADDR] [--ready-file F]
                          [--no-nodelay] [--tls-dir D] [--upstream HOST:PORT] [--record NAME=IP ...]
    python -m netslo.agent responders udp,tcp,http --ready-dir DIR   (one process each, forked: netslo.agent.responder_set)
    python -m netslo.agent probe udp|tcp-rr|tcp-crr|http|http-new|ws|wss|https|https-new|
                          mqtt-qos0|mqtt-qos1|mqtt-qos2|icmp --target HOST:PORT|[IPV6]:PORT
                          [--count N] [--interval 2ms] [--req-size 1k] [--resp-size 1k]
                          [--tos EF|46|0xb8...] [--no-nodelay] [--wait 1s] [--cpu N] [--progress] --out FILE|-
                          [--sender python|native]   (udp: native = the compiled send loop)
                          [--give-up 250ms]          (tcp-crr: abort unanswered connections; RST close)
    python -m netslo.agent probe dns --target HOST:PORT|resolv.conf [--name N] [--qtypes parallel|sequential|a|aaaa]
                          [--search S1,S2] [--ndots 5] [--timeout 1s] [--attempts 2]   (+ the options above)
    python -m netslo.agent bulk --target HOST:PORT [--duration 6s] [--omit 1s] [--cc bbr] [--sndbuf 512KiB]
    python -m netslo.agent sockets --comm NAME   (TCP_NODELAY of NAME's connected sockets here: netslo.traffic.tcpinfo)
    python -m netslo.agent netns-id [DEVICE]    (this network namespace's inode and DEVICE's iflink, JSON)
    python -m netslo.agent session       (requests on stdin, replies on stdout: netslo.agent.session)
    python -m netslo.agent detach --ready-file F --log L [--timeout S] -- serve KIND ...
                                         (a responder that outlives the command, once ready: netslo.agent.detach)
    python -m netslo.agent netem capability|lookup|apply|read|remove [--pod-ip IP] [--direction egress|ingress]
                          [--spec JSON]       (on the pod's node; see netslo.impair.node_cli)
    python -m netslo.agent qos describe|priority|counters|bottleneck|clear|drop-add|drop-counts|drop-remove|
                          pod|reshape|root-qdisc|capture|send [--pod-ip IP] [--spec JSON]
                                              (a node's links for the QoS studies; see netslo.impair.shaping.node_cli)

``probe`` writes raw samples (npz of compact chunks, see ``netslo.stats.sample_file``) to a file, streamed
while it runs, or, with ``--out -``, to stdout at the end: results never travel as log text. Bad options
give one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import replace

from netslo.core import units
from netslo.core.errors import SpecError
from netslo.core.families import ANY
from netslo.traffic.endpoint import parse_target
from netslo.traffic.probes import MODULES, SENDERS, SOURCE_PORTS
from netslo.traffic.responders.kinds import KINDS

EXIT_USAGE = 2
PROBE_PROTOCOLS = tuple(MODULES)
SERVE_PROTOCOLS = ("udp", "tcp", "http") + KINDS + ("dns",)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m netslo.agent", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run a responder")
    s.add_argument("protocol", choices=SERVE_PROTOCOLS)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bind", default=ANY, help="address to listen on (default '::': both families)")
    s.add_argument("--ready-file", help="created once the responder listens")
    s.add_argument("--no-nodelay", action="store_true", help="leave Nagle on (TCP)")
    s.add_argument("--tls-dir", help="tls: directory with ca.pem/server.pem/server.key (default $NETSLO_TLS_DIR)")
    s.add_argument("--upstream", help="proxy: HOST:PORT of the HTTP responder to forward to")
    s.add_argument("--record", action="append", default=[],
                   help="dns: NAME=IP served as A (IPv4) or AAAA (IPv6); default: responders.dns.DEFAULT_NAMES")
    q = sub.add_parser("probe", help="run a probe and write raw samples")
    q.add_argument("protocol", choices=PROBE_PROTOCOLS)
    q.add_argument("--target", required=True)
    q.add_argument("--count", type=int, default=1000)
    q.add_argument("--interval", default="2ms")
    q.add_argument("--req-size", default="1k")
    q.add_argument("--resp-size", default="1k")
    q.add_argument("--tos", default="0")
    q.add_argument("--no-nodelay", action="store_true")
    q.add_argument("--wait", default="1s")
    q.add_argument("--cpu", type=int)
    q.add_argument("--sender", default="python", choices=SENDERS,
                   help="udp: 'native' sends from a compiled loop (high rates; built on first use with cc)")
    q.add_argument("--give-up", default=None,
                   help="tcp-crr: abort a connection unanswered after this long (< 1s; its request is lost) "
                        "and end every connection with RST")
    q.add_argument("--source-ports", default="kernel", choices=SOURCE_PORTS,
                   help="tcp-crr: source ports chosen by connect() (kernel) or taken in turn through the "
                        "ephemeral range (in-turn: no tuple back within range-size connections)")
    q.add_argument("--out", required=True)
    q.add_argument("--progress", action="store_true", help="a line per chunk of requests on stderr")
    d = q.add_argument_group("dns", "lookups of the dns probe (netslo.traffic.probes.dns)")
    d.add_argument("--name", default=None, help="the name looked up")
    d.add_argument("--qtypes", default="parallel", help="parallel (A+AAAA on one socket), sequential, a, aaaa")
    d.add_argument("--search", default="", help="search suffixes, comma-separated (resolv.conf order)")
    d.add_argument("--ndots", type=int, default=1)
    d.add_argument("--timeout", default="1s", help="per query send before it is sent again")
    d.add_argument("--attempts", type=int, default=2, help="sends per query")
    return p


def probe_spec(args):
    """argparse namespace -> ProbeSpec, every unit checked."""
    from netslo.traffic.dscp import tos_byte
    from netslo.traffic.probes import ProbeSpec, check_give_up, check_sender, check_source_ports
    dns = dns_options(args)
    host, port = (args.target, 53) if dns is not None and args.target == "resolv.conf" else parse_target(args.target)
    if args.count < 1:
        raise SpecError("--count", args.count, "a whole number >= 1")
    if args.no_nodelay and args.protocol.startswith(("http", "ws", "wss", "https")):
        raise SpecError("--no-nodelay", args.protocol, "a raw TCP protocol (tcp-rr, tcp-crr): aiohttp always "
                        "turns TCP_NODELAY on for its connections")
    check_sender(args.protocol, args.sender, "--sender")
    give_up = None if args.give_up is None else units.duration(args.give_up, "--give-up")
    check_give_up(args.protocol, give_up, "--give-up")
    check_source_ports(args.protocol, args.source_ports, "--source-ports")
    interval = units.duration(args.interval, "--interval")
    if interval <= 0:
        raise SpecError("--interval", args.interval, "a duration > 0, e.g. '2ms'")
    return ProbeSpec(protocol=args.protocol, host=host, port=port, count=args.count, interval=interval,
                     req_bytes=units.size(args.req_size, "--req-size"),
                     resp_bytes=units.size(args.resp_size, "--resp-size"),
                     tos=tos_byte(args.tos, "--tos"), nodelay=not args.no_nodelay,
                     wait=units.duration(args.wait, "--wait"), cpu=args.cpu, sender=args.sender, dns=dns,
                     give_up=give_up, source_ports=args.source_ports)


def dns_options(args):
    """The dns probe's lookup options (``probes.dns.DnsOptions``, checked); None for other protocols."""
    if args.protocol != "dns":
        for opt in ("name", "search"):
            if getattr(args, opt):
                raise SpecError(f"--{opt}", getattr(args, opt), "no value: it is an option of the dns probe only")
        return None
    from netslo.traffic.probes.dns import DnsOptions
    opts = DnsOptions(qtypes=args.qtypes, search=tuple(s for s in args.search.split(",") if s.strip()),
                      ndots=args.ndots, timeout=units.duration(args.timeout, "--timeout"), attempts=args.attempts)
    return (replace(opts, name=args.name) if args.name is not None else opts).check()


def _serve(args) -> int:
    from netslo.traffic.responders import http, tcp, udp
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))

    def ready():
        if args.ready_file:
            with open(args.ready_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(args.ready_file + ".tmp", args.ready_file)

    stop = lambda: bool(stopping)  # noqa: E731
    if args.protocol == "udp":
        udp.serve(args.port, args.bind, ready=ready, stop=stop)
    elif args.protocol == "tcp":
        tcp.serve(args.port, args.bind, nodelay=not args.no_nodelay, ready=ready, stop=stop)
    elif args.protocol == "dns":
        from netslo.traffic.responders import dns
        dns.serve(args.port, args.bind, records=dns.parse_records(args.record), ready=ready, stop=stop)
    elif args.protocol in KINDS:
        from netslo.traffic.responders import kinds
        kinds.serve(args, ready=ready, stop=stop)
    else:
        http.serve(args.port, args.bind, ready=ready, stop=stop)
    return 0


def _probe(args) -> int:
    """Run a probe. To a file, rows are streamed as compact chunks while the probe runs (memory
    stays bounded however long it runs); to stdout they are kept compact and written at the end.
    ``--progress``: one line per chunk on stderr (``netslo.stats.soak_progress``)."""
    from netslo.stats import sample_file, stream
    from netslo.stats.soak_progress import ProgressSink
    from netslo.traffic import probes
    spec = probe_spec(args)

    def sink(inner):
        return ProgressSink(inner) if args.progress else inner
    if args.out == "-":
        data = probes.run(spec, sink=sink(stream.ChunkList())).to_bytes()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    with open(args.out + ".tmp", "wb") as f:
        writer = sample_file.ChunkWriter(f)
        result = probes.run(spec, sink=sink(writer))
        writer.close(result.meta)
    os.replace(args.out + ".tmp", args.out)
    return 0


def _responders(argv: list[str]) -> int:
    from netslo.agent import responder_set
    from netslo.agent.responder_set import RESPONDER_PORTS
    p = argparse.ArgumentParser(prog="python -m netslo.agent responders")
    p.add_argument("protocols", help="comma-separated: " + ",".join(responder_set.PROTOCOLS))
    p.add_argument("--ready-dir", required=True, help="each responder creates PROTOCOL.ready here once it serves")
    p.add_argument("--ready-port", type=int, help="TCP port accepting once every responder serves (a startup probe's)")
    args = p.parse_args(argv)
    try:
        protocols = responder_set.parse_protocols(args.protocols)
    except SpecError as e:
        print(f"netslo.agent: {e}", file=sys.stderr)
        return EXIT_USAGE
    from netslo.traffic.responders import http, tcp, udp  # noqa: F401  (imported once, before the forks)

    def serve(protocol: str, ready: str) -> int:
        return _serve(_parser().parse_args(["serve", protocol, "--port", str(RESPONDER_PORTS[protocol]),
                                            "--ready-file", ready]))
    return responder_set.run(protocols, args.ready_dir, serve, args.ready_port)


def netns_id(device: str = "eth0") -> dict:
    """Which network namespace this process is in (``inode`` of /proc/self/ns/net, as the host sees it
    too) and ``device``'s ``iflink``: for a veth, the ifindex of its peer in the other namespace. Read
    from /sys as a container sees it (sysfs mounted in its own network namespace)."""
    with open(f"/sys/class/net/{device}/iflink") as f:
        iflink = int(f.read())
    return {"inode": os.stat("/proc/self/ns/net").st_ino, "iflink": iflink}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bulk"]:  # bulk TCP probe (issue 3): its own options, JSON on stdout
        from netslo.traffic.probes import bulk
        return bulk.main(argv[1:])
    if argv[:1] == ["session"]:  # a warm agent behind one exec stream (Kubernetes providers)
        from netslo.agent import session as agent_session
        return agent_session.main(argv[1:], main)
    if argv[:1] == ["detach"]:  # a responder started through a warm session, left running
        from netslo.agent import detach
        return detach.main(argv[1:], main)
    if argv[:1] == ["responders"]:  # a Kubernetes agent pod's responders, one container
        return _responders(argv[1:])
    if argv[:1] == ["netem"]:  # impairment DaemonSet: netem in a pod's netns, JSON on stdout
        from netslo.impair import node_cli
        return node_cli.main(argv[1:])
    if argv[:2] == ["sockets", "--comm"] and len(argv) == 3:   # a pod's broker, read in its own namespace
        import json

        from netslo.traffic.tcpinfo import sockets_of
        print(json.dumps(sockets_of(argv[2])))
        return 0
    if argv[:1] == ["netns-id"] and len(argv) <= 2:   # kind: a pod's namespace and veth, found from the host
        import json
        print(json.dumps(netns_id(*argv[1:])))
        return 0
    if argv[:1] == ["qos"]:  # node agent: the QoS studies' qdiscs and rules on its node, JSON on stdout
        from netslo.impair.shaping import node_cli as qos_cli
        return qos_cli.main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        return {"serve": _serve, "probe": _probe}[args.cmd](args)
    except SpecError as e:
        print(f"netslo.agent: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130

