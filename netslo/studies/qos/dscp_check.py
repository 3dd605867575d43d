"""Does a DSCP mark survive the pod network? Per-hop verdicts from scapy-crafted packets sniffed on the way.

``check(cluster, client, server, marks)`` crafts IPv4/UDP packets with scapy (client pod address ->
server pod address, one TOS per mark, a random marker in the payload), sends them from the client
pod's namespace through a raw socket (the kernel routes them like any pod traffic) and sniffs every
hop at once with AF_PACKET sockets opened inside each hop's namespace, the points the cluster
names (``observation_points``); in the embedded provider:

    client pod eth0 -> client node host veth [-> node flannel.1 -> underlay (switch port) -> server
    node eth0]  -> server node host veth -> server pod eth0

(on kind, ``KindCluster.observation_points``: the pods' eth0, their cali.../lxc... veths, the CNI's
tunnel device and the nodes' underlay eth0, entered from this host). Frames are decoded with scapy;
on VXLAN hops both the outer and the inner IPv4 header are judged.
Verdict per hop and layer, comparing DSCP only (ECN bits ignored):
  preserved          every packet carried the DSCP it was sent with
  rewritten to X     it carried another non-zero DSCP (X by name, e.g. AF11)
  stripped           it carried DSCP 0
  not seen           no marked packet passed this hop (dropped, or not on this path)
  bypassed           not seen here, but at a later hop: the datapath went around this device

``end_to_end(cluster, client, server, ports, marks)`` is the provider-independent check: the UDP probe
marks its requests and the responder reports the TOS it received (IP_RECVTOS) and marks its replies.

The capture runs in the calling process: each sniffer and the sender's raw socket is opened by a
short-lived thread inside its namespace (``netslo.core.netns_access``), so the caller never changes
namespace and no interpreter starts per check. A cluster whose nodes are not on this host
(Kubernetes through its node agent) has ``capture_marked(client, server, plan) -> (points, seen)``
instead: the same ``Sniffers`` and ``send_marked`` run by the agent on each node
(``python -m netslo.agent qos capture|send``). ``run_matrix(datapath, cases)``
checks one embedded datapath (placements x variants: plain, rewrite by an iptables DSCP target,
VXLAN 'tos inherit') in a child that builds and removes its own 2-node cluster.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from netslo.core import netns_access
from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.procs import CHILD_CWD, child_env
from netslo.providers.base import PathPoint
from netslo.traffic.dscp import DSCP_NAMES, dscp_of, tos_byte
from netslo.traffic.dscp_capture import capture

NETNS_DIR = Path("/run/netns")
CHECK_PORT = 7999
PACKETS_PER_MARK = 3
DEFAULT_MARKS = ("EF", "AF41", "CS1")


Hop = PathPoint   # a point of observation: ``ifname`` in ``netns``; ``encap``: frames are tunnelled there


@dataclass(frozen=True)
class HopVerdict:
    hop: str
    layer: str         # ip | outer | inner
    sent: int          # DSCP sent
    seen: tuple        # DSCP values observed (one per packet)
    verdict: str

    def line(self) -> str:
        return f"{self.hop} [{self.layer}] {name_of(self.sent)}: {self.verdict} ({len(self.seen)} packets)"


def name_of(dscp: int) -> str:
    names = [k for k, v in DSCP_NAMES.items() if v == dscp and k not in ("BE", "DF", "CS0")]
    return names[0] if names else ("CS0" if dscp == 0 else str(dscp))


def verdict(sent: int, seen) -> str:
    """preserved | rewritten to X | stripped | not seen | mixed: ... (DSCP values)."""
    seen = list(seen)
    if not seen:
        return "not seen"
    kinds = sorted(set(seen))
    if len(kinds) > 1:
        return "mixed: " + ", ".join(name_of(d) for d in kinds)
    got = kinds[0]
    if got == sent:
        return "preserved"
    if got == 0:
        return "stripped"
    return f"rewritten to {name_of(got)}"


@dataclass
class DscpReport:
    """Verdicts of one check, in path order."""

    verdicts: list
    placement: str

    def at(self, hop: str, layer: str | None = None, sent: int | None = None) -> list:
        return [v for v in self.verdicts if v.hop == hop and (layer is None or v.layer == layer)
                and (sent is None or v.sent == sent)]

    def hops(self) -> list:
        return list(dict.fromkeys(v.hop for v in self.verdicts))

    def text(self) -> str:
        return "\n".join(v.line() for v in self.verdicts)


# ---- the path --------------------------------------------------------------------------------------

def hops(cluster, client, server) -> list[Hop]:
    """Observation points from client pod to server pod: the cluster's ``observation_points``
    (embedded netns provider, kind); Unsupported where its namespaces are not on this host."""
    for pod in (client, server):
        if pod.host_network:
            raise Unsupported(f"pod {pod.name} is a hostNetwork pod: no pod-network path to observe")
    points = getattr(cluster, "observation_points", None)
    if points is None:
        raise Unsupported(f"per-hop DSCP capture needs the nodes' namespaces (this host's, or a node agent's: "
                          f"capture_marked), which provider {cluster.provider} offers neither of "
                          f"(use dscp_check.end_to_end)")
    return points(client, server)


def check(cluster, client, server, marks=DEFAULT_MARKS, per_mark: int = PACKETS_PER_MARK,
          timeout: float = 3.0) -> DscpReport:
    """Send ``per_mark`` crafted packets per DSCP mark from ``client`` to ``server``; verdict per hop."""
    dscps = [tos_byte(m, "marks") >> 2 for m in marks]
    plan = {"src": client.ip, "dst": server.ip, "port": CHECK_PORT, "dscps": dscps, "per_mark": per_mark,
            "marker": secrets.token_hex(6), "timeout": timeout}
    try:
        if getattr(cluster, "observation_points", None) is None and hasattr(cluster, "capture_marked"):
            path, seen = cluster.capture_marked(client, server, plan)   # where the nodes are (node agent)
        else:
            path = hops(cluster, client, server)
            plan.update(hops=[[h.netns, h.ifname] for h in path], sender=cluster.netns_of(client))
            seen = capture(plan)["seen"]
    except OSError as e:
        raise InfrastructureError(f"DSCP capture failed: {e}") from None
    out = []
    for i, hop in enumerate(path):
        rows = seen[i]
        for d in dscps:
            mine = [r for r in rows if r[0] == d]
            if hop.encap:
                out.append(HopVerdict(hop.name, "outer", d, tuple(dscp_of(r[2]) for r in mine if r[2] is not None),
                                      verdict(d, [dscp_of(r[2]) for r in mine if r[2] is not None])))
                out.append(HopVerdict(hop.name, "inner", d, tuple(dscp_of(r[3]) for r in mine),
                                      verdict(d, [dscp_of(r[3]) for r in mine])))
            else:
                out.append(HopVerdict(hop.name, "ip", d, tuple(dscp_of(r[3]) for r in mine),
                                      verdict(d, [dscp_of(r[3]) for r in mine])))
    placement = "same-node" if client.node == server.node else "cross-node"
    return DscpReport(_bypassed(out, [h.name for h in path]), placement)


def _bypassed(verdicts: list, order: list) -> list:
    """'not seen' at a hop while a later hop saw the same mark means the datapath went around that
    device (e.g. an eBPF redirect straight into the pod's namespace): verdict 'bypassed'."""
    seen_at = {}
    for v in verdicts:
        if v.verdict != "not seen":
            seen_at.setdefault(v.sent, set()).add(order.index(v.hop))
    out = []
    for v in verdicts:
        if v.verdict == "not seen" and any(i > order.index(v.hop) for i in seen_at.get(v.sent, ())):
            v = HopVerdict(v.hop, v.layer, v.sent, v.seen, "bypassed")
        out.append(v)
    return out


def end_to_end(cluster, client, server, ports, marks=DEFAULT_MARKS, count: int = 20) -> DscpReport:
    """Any provider: UDP probe with each mark; verdicts 'at responder' (request) and 'at client' (reply)."""
    from netslo.traffic.probes import ProbeSpec
    out = []
    for m in marks:
        tos = tos_byte(m, "marks")
        s = cluster.probe(client, ProbeSpec("udp", server.ip, ports["udp"], count=count, interval=0.002,
                                            req_bytes=64, resp_bytes=64, tos=tos, wait=1.0))
        r = s.rows[s.rows["recv_ns"] >= 0]
        d = tos >> 2
        srv = [dscp_of(x) for x in r["tos_srv"] if x >= 0]
        cli = [dscp_of(x) for x in r["tos_cli"] if x >= 0]
        out.append(HopVerdict("at responder (request)", "ip", d, tuple(srv), verdict(d, srv)))
        out.append(HopVerdict("at client (reply)", "ip", d, tuple(cli), verdict(d, cli)))
    placement = "same-node" if client.node == server.node else "cross-node"
    return DscpReport(out, placement)


# ---- one datapath, every placement and variant, in a child process -----------------------------------

VARIANTS = ("plain", "rewrite", "tos-inherit")


def _set_vxlan_tos(cluster, value: int) -> None:
    for node in cluster.nodes:
        with netns_access.rtnl(cluster.node_netns(node)) as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname="flannel.1")[0], kind="vxlan", vxlan_tos=value)


def matrix(datapath: str, cases: list, marks, per_mark: int, rewrite_to: int) -> dict:
    """Build a 2-node cluster of ``datapath``, check each (placement, variant), close it again.

    Variants: plain; rewrite (iptables DSCP target --set-dscp ``rewrite_to`` in the server node's
    mangle POSTROUTING); tos-inherit (VXLAN devices copy the inner DSCP to the outer header).
    Returns {"placement/variant": [verdict dicts]} plus the rule's packet count for rewrite."""
    from netslo.impair.shaping.qdiscs import netfilter_rule
    from netslo.providers.netns.cluster import NetnsCluster
    out = {}
    with NetnsCluster(nodes=2, datapath=datapath) as c:
        server = c.add_pod("dscp-server", "node0")
        clients = {"same-node": c.add_pod("dscp-same", "node0"), "cross-node": c.add_pod("dscp-cross", "node1")}
        for placement, variant in cases:
            client = clients[placement]
            key = f"{placement}/{variant}"
            if variant == "rewrite":
                spec = ["-p", "udp", "--dport", str(CHECK_PORT), "-j", "DSCP", "--set-dscp", str(rewrite_to)]
                with netfilter_rule(c.node_netns(server.node), "mangle", "POSTROUTING", spec) as rule:
                    rep = check(c, client, server, marks, per_mark)
                    out[key + "/rule_packets"] = rule.packets()
            elif variant == "tos-inherit":
                if datapath != "vxlan":
                    raise Unsupported("tos-inherit needs the vxlan datapath")
                _set_vxlan_tos(c, 1)
                try:
                    rep = check(c, client, server, marks, per_mark)
                finally:
                    _set_vxlan_tos(c, 0)
            else:
                rep = check(c, client, server, marks, per_mark)
            out[key] = [{"hop": v.hop, "layer": v.layer, "sent": v.sent, "seen": list(v.seen), "verdict": v.verdict}
                        for v in rep.verdicts]
            out[key + "/server_hops"] = [f"{server.node} {server.host_interface}", "server pod eth0"]
    return out


def run_matrix(datapath: str, cases: list, marks=DEFAULT_MARKS, per_mark: int = PACKETS_PER_MARK,
               rewrite_to: str = "AF11", timeout: float = 120.0) -> dict:
    """``matrix`` in a child process (its own cluster, owned and reaped by the child), JSON back.

    Verdict dicts are turned back into ``HopVerdict``s under each "placement/variant" key."""
    env = child_env()
    env.pop("NETSLO_RUN_ID", None)
    doc = {"datapath": datapath, "cases": [list(c) for c in cases], "marks": list(marks), "per_mark": per_mark,
           "rewrite_to": tos_byte(rewrite_to, "rewrite_to") >> 2}
    try:
        run = subprocess.run([sys.executable, "-m", "netslo.studies.qos.dscp_check", "matrix", json.dumps(doc)],
                             capture_output=True, text=True, env=env, cwd=CHILD_CWD, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"DSCP matrix on {datapath} did not finish within {timeout:.0f} s") from None
    if run.returncode:
        tail = run.stderr.strip().splitlines()
        raise InfrastructureError(f"DSCP matrix on {datapath} failed: {tail[-1] if tail else run.returncode}")
    raw = json.loads(run.stdout.strip().splitlines()[-1])
    out = {}
    for key, value in raw.items():
        if key.count("/") == 1:
            out[key] = DscpReport([HopVerdict(v["hop"], v["layer"], v["sent"], tuple(v["seen"]), v["verdict"])
                                   for v in value], key.split("/")[0])
        else:
            out[key] = value
    return out


if __name__ == "__main__":
    d = json.loads(sys.argv[2])     # python -m netslo.studies.qos.dscp_check matrix JSON
    print(json.dumps(matrix(d["datapath"], [tuple(c) for c in d["cases"]], d["marks"], d["per_mark"],
                            d["rewrite_to"])))
