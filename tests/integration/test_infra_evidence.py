"""Evidence on a real connect timeout in the embedded pod network: an iptables DROP rule in the server
pod's namespace for the TCP responder port makes the probe's connect time out; the InfrastructureError
names every section (tc, iptables counters, neighbours, routes of both pods and both nodes, ss of the
client, the server's sockets and responders) and shows the DROP rule with a packet counter > 0. A run
that hangs past its timeout is looked at before it is killed: ss shows the flow in SYN-SENT. A refused
connection (the responder's listener aborted with ``ss -K``) names the responder and shows no listener."""

import re
import subprocess
import time

import pytest

from netslo.core.errors import InfrastructureError
from netslo.impair import capability
from netslo.impair.shaping import qdiscs
from netslo.providers.netns.cluster import NetnsCluster
from netslo.traffic.probes import ProbeSpec

PLACES = ("client pod client", "client node node1", "server node node0", "server pod server")
COMMANDS = ("tc -s qdisc", "iptables-save -c", "ip -br link", "ip neigh", "ip route")
SERVER_SECTIONS = ("ss -tuan: server pod server (", "responders: server pod server (")


@pytest.fixture(scope="module")
def cl():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        server = c.add_pod("server", "node0")
        client = c.add_pod("client", "node1")
        ports = c.start_responders(server, ("tcp",))
        yield c, server, client, ports["tcp"]


def drop_rule(cluster, server, port: int):
    return qdiscs.netfilter_rule(cluster.netns_of(server), "filter", "INPUT",
                                  ["-p", "tcp", "--dport", str(port), "-j", "DROP"], tag="evidence-drop")


def drop_counter(text: str, port: int) -> int:
    found = re.search(rf"^\s*\[(\d+):\d+\] -A INPUT -p tcp -m tcp --dport {port} .*-j DROP$", text, re.M)
    assert found, text
    return int(found.group(1))


def test_connect_timeout_carries_the_paths_evidence(cl):
    c, server, client, port = cl
    with drop_rule(c, server, port) as rule:
        with pytest.raises(InfrastructureError) as e:
            c.probe(client, ProbeSpec("tcp-rr", server.ip, port, count=5, interval=0.01))
        assert rule.packets() > 0
    msg = str(e.value)
    assert msg.startswith("__agent__ probe tcp-rr in pod client exited with 1: ") and "timed out" in msg.splitlines()[0]
    assert "\nevidence (each section cut to" in msg
    for place in PLACES:
        for command in COMMANDS:
            assert f"\n  {command}: {place} (" in msg, (command, place, msg)
    assert "\n  ss -tin: client pod client (" in msg
    assert drop_counter(msg, port) > 0
    assert set(e.value.evidence) == {k for k in e.value.evidence
                                     if k.split(":")[0] in (*COMMANDS, "ss -tin", "ss -tuan", "responders")}
    assert len(e.value.evidence) == len(PLACES) * len(COMMANDS) + 1 + len(SERVER_SECTIONS)
    sockets = next(v for k, v in e.value.evidence.items() if k.startswith(SERVER_SECTIONS[0]))
    assert re.search(rf"^tcp +LISTEN .*:{port} ", sockets, re.M), sockets
    assert e.value.evidence[next(k for k in e.value.evidence if k.startswith(SERVER_SECTIONS[1]))] == \
        "tcp: running, each with its socket"
    assert "default via 10.244.1.1 dev eth0" in next(v for k, v in e.value.evidence.items()
                                                     if k.startswith("ip route: client pod"))
    links = next(v for k, v in e.value.evidence.items() if k.startswith("ip -br link: client node"))
    assert re.search(r"^cni0 +UP +0a:58:0a:f4:01:01 ", links, re.M), links   # the gateway MAC, to compare


def test_a_hung_run_is_looked_at_before_it_is_killed(cl):
    c, server, client, port = cl
    with drop_rule(c, server, port):
        with pytest.raises(InfrastructureError) as e:  # the agent's connect waits 5 s; the run gets 3 s
            c.exec_agent(client, ["probe", "tcp-rr", "--target", f"{server.ip}:{port}", "--count", "5",
                                  "--out", "-"], timeout=3)
    msg = str(e.value)
    assert msg.startswith("__agent__ probe tcp-rr in pod client timed out after 3 s"), msg
    flow = next(v for k, v in e.value.evidence.items() if k.startswith("ss -tin: client pod client"))
    assert re.search(rf"SYN-SENT\s+\d+\s+\d+\s+{re.escape(client.ip)}:\d+\s+{re.escape(server.ip)}:{port}", flow), flow
    assert drop_counter(msg, port) > 0


def test_a_refused_connection_names_the_responder_that_stopped_listening():
    """The TCP responder's listening socket aborted from outside (``ss -K``, the kernel's SOCK_DESTROY):
    the responder ends saying so, ``responder_faults`` names it, and a probe's refused connect carries
    the server's sockets (no listener on the port) and that line."""
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        server = c.add_pod("server", "node0")
        client = c.add_pod("client", "node1")
        port = c.start_responders(server, ("tcp",))["tcp"]
        assert c.responder_faults(server) == []
        killed = subprocess.run(["nsenter", f"--net=/run/netns/{c.netns_of(server)}", "ss", "-K", "-tln",
                                 f"sport = :{port}"], capture_output=True, text=True)
        if killed.returncode or f":{port}" not in killed.stdout:
            pytest.skip(f"this kernel cannot abort a socket (ss -K: {killed.stderr.strip() or killed.stdout})")
        deadline = time.monotonic() + 5
        while "exited" not in str(faults := c.responder_faults(server)) and time.monotonic() < deadline:
            assert faults in ([], [f"responder tcp in pod server runs (pid {c._responders[(server.name, 'tcp')].pid}) "
                                   f"but nothing listens on tcp port {port}"]), faults
            time.sleep(0.05)
        assert faults == [f"responder tcp in pod server exited (code 1): tcp responder: port {port} "
                          "stopped listening (Invalid argument)"], faults
        with pytest.raises(InfrastructureError) as e:
            c.probe(client, ProbeSpec("tcp-rr", server.ip, port, count=5, interval=0.01))
    assert "refused" in str(e.value).splitlines()[0].lower(), str(e.value)[:300]
    sockets = next(v for k, v in e.value.evidence.items() if k.startswith(SERVER_SECTIONS[0]))
    assert not re.search(rf"LISTEN .*:{port} ", sockets), sockets
    assert e.value.evidence[next(k for k in e.value.evidence if k.startswith(SERVER_SECTIONS[1]))] == faults[0]


def test_a_responder_that_runs_without_its_socket_is_named(cl):
    """A process registered as the server's UDP responder that has no socket on the port (here a plain
    ``sleep`` in the pod's namespace): ``responder_faults`` says it runs but nothing is bound."""
    c, server, _, _ = cl
    proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{c.netns_of(server)}", "sleep", "30"])
    c._responders[(server.name, "udp")] = proc
    try:
        assert c.responder_faults(server) == [f"responder udp in pod server runs (pid {proc.pid}) but nothing "
                                              "is bound to udp port 7000"]
    finally:
        del c._responders[(server.name, "udp")]
        proc.kill()
        proc.wait()


def test_same_node_path_names_the_shared_node_once(cl):
    c, server, _, port = cl
    near = c.add_pod("near", "node0")
    places = c.path_places(near, server.ip)
    assert [(p.role, p.name) for p in places] == [("client pod", "near"), ("client and server node", "node0"),
                                                  ("server pod", "server")]
    assert places[1].devices == (near.host_interface, server.host_interface, "cni0", "eth0")


def test_evidence_crosses_the_user_mode_linux_channel():
    """In the guest kernel (no nf_tables there) netem 100 % loss on the server's egress makes the connect
    fail (no ARP answer: EHOSTUNREACH); the evidence comes back through the guest channel, with the
    netem drop counter > 0."""
    ok, why = capability.uml_available()
    if not ok:
        pytest.skip(f"no user-mode-linux: {why}")
    from netslo.impair.spec import parse
    from netslo.providers.netns.uml import UmlCluster
    with UmlCluster(nodes=2) as c:
        server = c.add_pod("server", "node0")
        client = c.add_pod("client", "node1")
        port = c.start_responders(server, ("tcp",))["tcp"]
        c.impairer.apply(server, parse({"loss": "100%"}))
        try:
            with pytest.raises(InfrastructureError) as e:
                c.probe(client, ProbeSpec("tcp-rr", server.ip, port, count=5, interval=0.01))
        finally:
            c.impairer.clear()
    assert len(e.value.evidence) == len(PLACES) * len(COMMANDS) + 1 + len(SERVER_SECTIONS)
    qdisc_text = next(v for k, v in e.value.evidence.items() if k.startswith("tc -s qdisc: server pod server"))
    dropped = re.search(r"qdisc netem 1: dev eth0 root.*\n.*\(dropped (\d+),", qdisc_text)
    assert dropped and int(dropped.group(1)) > 0, qdisc_text
    assert all("    " + line in str(e.value) for line in qdisc_text.splitlines())
