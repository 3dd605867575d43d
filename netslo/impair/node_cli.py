"""``python -m netslo.agent netem ...``: netem on one pod, run on that pod's node.

    python -m netslo.agent netem capability
    python -m netslo.agent netem apply  --pod-ip IP --direction egress|ingress --spec JSON
    python -m netslo.agent netem read   --pod-ip IP --direction egress|ingress
    python -m netslo.agent netem remove --pod-ip IP --direction egress|ingress
    python -m netslo.agent netem lookup --pod-ip IP
    python -m netslo.agent netem exec   --pod-ip IP -- COMMAND [ARG ...]

Runs in the impairment DaemonSet's pod (hostNetwork, root with only CAP_NET_ADMIN + CAP_SYS_ADMIN,
the host's /var/run/netns mounted read-only; see netslo.providers.kube.impair). It finds the network
namespace that holds the pod IP (``netslo.impair.podns``) and uses the same code as the embedded
provider (``netslo.impair.netem.install/read/remove``) on ``Target(<that netns>, eth0, direction,
ifb for ingress)``.

``exec`` runs COMMAND as this agent's root (CAP_NET_ADMIN) in the pod's network namespace, the way the
embedded provider runs helpers from its host: sysctls, offloads, counters and bulk-flow helpers of the
pod, which the pod's own unprivileged container may not change; its output and exit code are
COMMAND's.

stdout: one JSON object (``node``, ``kernel``, ``netns``, ``ifname``, ``held``: the netem the kernel
holds, ``inventory``: the qdiscs of the pod interface and whether netslo's ifb exists; capability:
the ``Capabilities`` fields). Failure: one JSON line on stderr and the exit code says which kind:

    3 {"error": "unsupported", "message": "node N: kernel K has no sch_netem (...)", "node", "kernel"}
    1 {"error": "infrastructure", "message": ..., "node", "kernel"}
    2 {"error": "usage", "message": "--direction: value 'up' — expected egress or ingress", ...}

The node name comes from $NODE_NAME (the DaemonSet sets it from spec.nodeName), else the hostname.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import replace

from netslo.core.errors import InfrastructureError, SpecError, Unsupported

EXIT_INFRA, EXIT_USAGE, EXIT_UNSUPPORTED = 1, 2, 3
ACTIONS = ("capability", "lookup", "apply", "read", "remove", "exec")
DIRECTIONS = ("egress", "ingress")


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are SpecError (one line, field/value/expected) instead of usage text."""

    def error(self, message):
        raise SpecError("netem arguments", " ".join(sys.argv[2:]) or "(none)",
                        f"ACTION [--pod-ip IP] [--direction egress|ingress] [--spec JSON] ({message})")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m netslo.agent netem", add_help=True,
                description="netem on one pod, run on the pod's node")
    p.add_argument("action")
    p.add_argument("--pod-ip")
    p.add_argument("--direction")
    p.add_argument("--spec", help="the impairment as JSON (netslo.impair.spec form, with units)")
    p.add_argument("--netns-dir", default=None, help="where pod namespaces are mounted (default /var/run/netns)")
    return p


def node_name() -> str:
    return os.environ.get("NODE_NAME") or platform.node()


def _check(args) -> None:
    if args.action not in ACTIONS:
        raise SpecError("action", args.action, f"one of {', '.join(ACTIONS)}")
    if args.action == "capability":
        return
    if not args.pod_ip:
        raise SpecError("--pod-ip", args.pod_ip, "the target pod's IP address")
    if args.action in ("lookup", "exec"):
        return
    if args.direction not in DIRECTIONS:
        raise SpecError("--direction", args.direction, "egress or ingress")
    if args.action == "apply" and not args.spec:
        raise SpecError("--spec", args.spec, "the impairment as JSON, e.g. '{\"delay\": \"10ms\"}'")


def impairment(text: str, direction: str):
    """--spec JSON -> Impairment on ``direction`` (a direction inside the spec must agree)."""
    from netslo.impair.spec import parse
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise SpecError("--spec", text[:80], f"JSON ({e.msg} at column {e.colno})") from None
    if isinstance(doc, dict) and doc.get("direction", direction) != direction:
        raise SpecError("--spec direction", doc["direction"], f"{direction} (as --direction)")
    return replace(parse(doc, where="--spec"), direction=direction)


def inventory(netns: str, ifname: str) -> dict:
    """What netslo could have changed in the namespace: the interface's qdiscs and the ifb's presence."""
    from netslo.core.netns_access import rtnl
    from netslo.impair.netem import IFB_NAME
    with rtnl(netns) as ipr:
        found = ipr.link_lookup(ifname=ifname)
        qdiscs = sorted(f"{m.get_attr('TCA_KIND')} parent {m['parent']:#x}"
                        for m in (ipr.get_qdiscs(index=found[0]) if found else []))
        return {"qdiscs": qdiscs, "ifb": bool(ipr.link_lookup(ifname=IFB_NAME))}


def run(args) -> dict:
    from netslo.impair import capability, netem, podns
    _check(args)
    base = {"node": node_name(), "kernel": platform.release()}
    if args.action == "capability":
        return {**base, **capability.detect().as_dict()}
    ip = podns.check_ip(args.pod_ip)
    imp = impairment(args.spec, args.direction) if args.action == "apply" else None  # bad input first
    where = podns.find(ip, args.netns_dir or podns.NETNS_RUN_DIR)
    base.update(pod_ip=ip, netns=where.name, ifname=where.ifname)
    if args.action == "lookup":
        return base
    target = netem.Target(where.name if args.netns_dir is None else os.path.join(args.netns_dir, where.name),
                          where.ifname, args.direction, netem.IFB_NAME if args.direction == "ingress" else None)
    base["direction"] = args.direction
    if args.action == "apply":
        try:
            base["held"] = netem.install(target, imp)
        except Unsupported as e:
            what = "has no sch_netem" if "sch_netem" in str(e) else "cannot do it"
            raise Unsupported(f"node {base['node']}: kernel {base['kernel']} {what} ({e})") from None
    elif args.action == "read":
        base["held"] = netem.read(target)
    else:
        netem.remove(target)
        base["removed"] = True
    base["inventory"] = inventory(target.netns, target.ifname)
    return base


def fail(kind: str, code: int, message: str) -> int:
    print(json.dumps({"error": kind, "message": message, "node": node_name(), "kernel": platform.release()},
                     ensure_ascii=False), file=sys.stderr)
    return code


def exec_in_pod(args, command: list[str]) -> int:
    """COMMAND in the pod's network namespace, with the host's /proc/sys writable where this agent has
    it mounted; COMMAND's exit code. A forked child (single-threaded, as unshare needs) enters the
    namespace and becomes COMMAND; stdout and stderr are COMMAND's."""
    from netslo.core.netns_access import setns, writable_proc_sys
    from netslo.impair import podns
    if not command:
        raise SpecError("command", "(none)", "a command after --, e.g. -- sysctl -n net.ipv4.tcp_congestion_control")
    netns_dir = args.netns_dir or podns.NETNS_RUN_DIR
    path = os.path.join(netns_dir, podns.find(podns.check_ip(args.pod_ip), netns_dir).name)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            setns(path)
            try:
                writable_proc_sys()   # this agent's own /proc/sys is read-only
            except OSError as e:      # e.g. a security profile refusing mount: sysctl writes will say so
                print(f"netslo node agent: /proc/sys stays read-only here ({e})", file=sys.stderr, flush=True)
            os.execvp(command[0], command)
        except OSError as e:
            fail("infrastructure", EXIT_INFRA, f"node {node_name()}: cannot run {command[0]!r} in the network "
                                                f"namespace of pod {args.pod_ip} ({e})")
        finally:
            os._exit(EXIT_INFRA)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def main(argv: list[str]) -> int:
    argv, command = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    try:
        args = _parser().parse_args(argv)
        if args.action == "exec":
            _check(args)
            return exec_in_pod(args, command)
        out = run(args)
    except SpecError as e:
        return fail("usage", EXIT_USAGE, str(e))
    except Unsupported as e:
        return fail("unsupported", EXIT_UNSUPPORTED, str(e))
    except InfrastructureError as e:
        return fail("infrastructure", EXIT_INFRA, str(e))
    except OSError as e:
        return fail("infrastructure", EXIT_INFRA, f"netem {argv[:1]}: {e}")
    print(json.dumps(out, sort_keys=True, ensure_ascii=False))
    return 0
