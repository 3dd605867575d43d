"""``python -m netslo.agent qos ...`` run the way the node agent runs it: inside a node's network
namespace (an embedded cluster's node standing in for a kind node), finding pods by IP under
/run/netns. The same code as ``LocalNodeLinks``; the random drop on VXLAN-encapsulated packets
(xt_u32 at fixed offsets) is shown to match exactly the flow it names, and nothing else."""

import json
import subprocess
import sys

import pytest

from netslo.impair.shaping import bandwidth, node_cli, priority
from netslo.impair.shaping.node_links import LocalNodeLinks
from netslo.providers.netns.cluster import NetnsCluster
from netslo.traffic.probes import ProbeSpec

POLICY = priority.parse_policy({"link": "20mbit", "classes": [
    {"name": "ef", "dscp": ["EF"], "rate": "4mbit", "prio": 0},
    {"name": "be", "default": True, "rate": "16mbit", "prio": 1}]})


def agent(cl, node: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run(["nsenter", f"--net=/run/netns/{cl.node_netns(node)}", sys.executable, "-m",
                          "netslo.agent", "qos", *args], capture_output=True, text=True, timeout=60,
                         env={"NODE_NAME": node, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if check:
        assert run.returncode == 0, run.stderr
    return run


def out(cl, node: str, *args: str) -> dict:
    return json.loads(agent(cl, node, *args).stdout)


def tc(cl, node: str, *args: str) -> str:
    return subprocess.run(["nsenter", f"--net=/run/netns/{cl.node_netns(node)}", "tc", *args], capture_output=True,
                          text=True, check=True).stdout


@pytest.fixture(scope="module")
def vx():
    with NetnsCluster(nodes=2, datapath="vxlan") as c:
        yield c


def test_describe_finds_the_uplink_and_the_tunnel(vx):
    d = out(vx, "node1", "describe")
    assert d["node"] == "node1" and d["uplink"] == "eth0"
    assert d["layer"] == "vxlan-inner" and d["tunnel_port"] == priority.VXLAN_PORT and d["tunnels"]


def test_pod_lookup_by_ip_reads_what_the_local_links_read(vx):
    pod = vx.add_pod("bw", "node1", annotations={bandwidth.EGRESS_KEY: "3M"})
    got = out(vx, "node1", "pod", "--pod-ip", pod.ip)
    local = vx.node_links("node1")
    assert got["host_if"] == pod.host_interface
    assert got["bandwidth"] == local.pod_bandwidth(pod) == {"ingress": None, "egress": 3_000_000}
    assert got["link_mtu"] == local.pod_link_mtu(pod) and got["pod_mtu"] == local.pod_mtu(pod) == vx.mtu
    got = out(vx, "node1", "reshape", "--pod-ip", pod.ip, "--spec", json.dumps({"egress_bits": 6e6}))
    assert got["bandwidth"] == {"ingress": None, "egress": 6_000_000}


def test_priority_and_bottleneck_are_installed_and_cleared(vx):
    got = out(vx, "node1", "priority", "--spec", json.dumps({"policy": node_cli.policy_doc(POLICY)}))
    want = priority.match_bytes(46, "vxlan-inner")
    assert [(f["flowid"], {int(k): tuple(v) for k, v in f["match"].items()}) for f in got["filters"]] == [("1:10", want)]
    assert set(out(vx, "node1", "counters")["class_bytes"]) >= {"1:10", "1:11"}
    control = [["sport", 10250], ["dport", 6443]]
    got = out(vx, "node1", "priority", "--spec", json.dumps({"policy": node_cli.policy_doc(POLICY), "control": control}))
    assert [(f["flowid"], {int(k): tuple(v) for k, v in f["match"].items()}) for f in got["filters"]] == [
        ("1:2", {0: (0x45, 0xFF), 9: (6, 0xFF), 20: (0x28, 0xFF), 21: (0x0A, 0xFF)}),     # 10250 = 0x280a
        ("1:2", {0: (0x45, 0xFF), 9: (6, 0xFF), 22: (0x19, 0xFF), 23: (0x2B, 0xFF)}),     # 6443 = 0x192b
        ("1:10", want)]
    assert set(out(vx, "node1", "counters")["class_bytes"]) >= {"1:2", "1:10", "1:11"}
    out(vx, "node1", "clear", "--spec", '{"kind": "htb"}')
    assert "htb" not in tc(vx, "node1", "qdisc", "show", "dev", "eth0")
    b = out(vx, "node1", "bottleneck", "--spec", json.dumps({"rate_bits": 10e6, "queue_s": 0.02}))
    assert b["rate_bits"] == 10e6 and "tbf" in tc(vx, "node1", "qdisc", "show", "dev", "eth0")
    out(vx, "node1", "clear", "--spec", '{"kind": "tbf"}')
    assert "tbf" not in tc(vx, "node1", "qdisc", "show", "dev", "eth0")


def test_tunnel_drop_counts_exactly_the_named_flow(vx):
    """The rule on the encapsulated packets sees the TCP flow it names (inner src, dst, dport: every
    request's segment) and nothing of another flow; a drop probability of 5 % drops about that share."""
    server = vx.add_pod("drop-srv", "node0")
    ports = vx.start_responders(server, ("udp", "tcp"))
    client = vx.add_pod("drop-cli", "node1")
    rule = {"probability": 0.05, "src": client.ip, "dst": server.ip, "dport": ports["tcp"]}
    out(vx, "node1", "drop-add", "--spec", json.dumps(rule))
    try:
        vx.probe(client, ProbeSpec("udp", server.ip, ports["udp"], count=100, interval=0.002))
        assert out(vx, "node1", "drop-counts", "--spec", json.dumps(rule))["matched"] == 0   # another flow
        vx.probe(client, ProbeSpec("tcp-rr", server.ip, ports["tcp"], count=300, interval=0.002, wait=1.0))
        got = out(vx, "node1", "drop-counts", "--spec", json.dumps(rule))
    finally:
        out(vx, "node1", "drop-remove", "--spec", json.dumps(rule))
    # a lost request stalls the connection for an RTO and later requests share a segment: matched
    # varies, but it is this flow's segments (>= 100) and about 5 % of them are dropped (P(none) ~ 1e-4)
    assert got["matched"] >= 100 and 1 <= got["dropped"] <= 0.15 * got["matched"], got
    rules = subprocess.run(["nsenter", f"--net=/run/netns/{vx.node_netns('node1')}", "iptables", "-t", "mangle", "-S"],
                           capture_output=True, text=True, check=True).stdout
    assert "netslo-qos" not in rules


def test_local_links_of_the_embedded_node_append_to_forward(vx):
    """The embedded provider keeps its FORWARD-chain rule on the inner header (what the gate measured)."""
    links = vx.node_links("node1")
    assert isinstance(links, LocalNodeLinks) and links.layer == "vxlan-inner"
    rules = links.drop_rules(0.1, "10.0.0.1", "10.0.0.2", 5)
    assert (rules.drop.table, rules.drop.chain) == ("filter", "FORWARD") and "-s" in rules.drop.spec


@pytest.mark.parametrize("args, field", [
    (["drop-add", "--spec", '{"probability": 0.5}'], "--spec src"),
    (["pod"], "--pod-ip"),
    (["clear", "--spec", '{"kind": "fq"}'], "--spec kind"),
    (["shape"], "action"),
    (["priority", "--spec", '{"policy": {}, "control": [10250]}'], "--spec control"),
])
def test_bad_input_is_one_line_naming_the_field(vx, args, field):
    run = agent(vx, "node1", *args, check=False)
    assert run.returncode == 2 and run.stdout == ""
    err = json.loads(run.stderr.strip())
    assert err["error"] == "usage" and err["message"].startswith(f"{field}: ") and "\n" not in err["message"]


def test_capture_and_send_see_the_marks_per_hop(vx, tmp_path):
    """``qos capture`` on the client node's points and ``qos send`` from the client pod: every mark at
    the pod's eth0, on the host veth and inside the tunnel (outer TOS 0: the VXLAN device's tos 0)."""
    server, client = vx.add_pod("cap-srv", "node0"), vx.add_pod("cap-cli", "node1")
    ready = tmp_path / "ready"
    spec = {"points": [[client.ip, "eth0"], [None, client.host_interface], [None, "eth0"]], "marker": "a1b2c3d4e5f6",
            "want": 6, "timeout": 20, "ready": str(ready)}
    cap = subprocess.Popen(["nsenter", f"--net=/run/netns/{vx.node_netns('node1')}", sys.executable, "-m", "netslo.agent",
                            "qos", "capture", "--spec", json.dumps(spec)], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if ready.exists() or cap.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"])
        plan = {"src": client.ip, "dst": server.ip, "port": 7999, "dscps": [46, 10], "per_mark": 3,
                "marker": "a1b2c3d4e5f6"}
        out(vx, "node1", "send", "--pod-ip", client.ip, "--spec", json.dumps(plan))
        got = json.loads(cap.communicate(timeout=30)[0])["seen"]
    finally:
        cap.kill()
    assert [sorted((r[0], r[1]) for r in rows) for rows in got] == [sorted((d, k) for d in (46, 10) for k in range(3))] * 3
    assert all(r[3] >> 2 == r[0] for rows in got for r in rows)               # inner/own header keeps the mark
    assert [r[2] for r in got[2]] == [0] * 6 and all(r[2] is None for r in got[0])   # outer header: DSCP 0
