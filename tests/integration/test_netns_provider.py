"""Embedded provider lifecycle on the real kernel: create, use, teardown, reap."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyroute2 import NetNS, netns

from netslo.core.errors import SpecError
from netslo.providers.netns.cluster import DATAPATHS, NetnsCluster, reap
from netslo.stats import analysis as stats
from netslo.traffic.probes import ProbeSpec

ROOT = Path(__file__).resolve().parents[2]


def _ours(run_id):
    return [n for n in netns.listnetns() if n.startswith(f"nsl-{run_id}-")]


@pytest.mark.parametrize("datapath", DATAPATHS)
def test_pods_reach_each_other_same_and_cross_node_then_teardown_removes_all(datapath):
    with NetnsCluster(nodes=2, datapath=datapath) as c:
        srv = c.add_pod("server", "node0")
        same, cross = c.add_pod("same", "node0"), c.add_pod("cross", "node1")
        ports = c.start_responders(srv, ("udp", "tcp"))
        for pod in (same, cross):
            for proto, port in (("udp", ports["udp"]), ("tcp-rr", ports["tcp"])):
                a = stats.analyze(c.probe(pod, ProbeSpec(proto, srv.ip, port, count=200, interval=0.001)))
                assert a.counts["received"] == 200, (datapath, pod.name, proto, a.counts)
        with NetNS(c.netns_of(cross)) as ipr:
            eth = ipr.get_links(ifname="eth0")[0]
            addr = ipr.get_addr(index=eth["index"])[0]
        assert eth.get_attr("IFLA_MTU") == (1450 if datapath == "vxlan" else 1500)
        assert addr["prefixlen"] == (32 if datapath == "routed" else 24)
        assert c.environment()["emulated"] == "yes"
        rid = c.run_id
        assert len(_ours(rid)) == 6  # sw, 2 nodes, 3 pods
    assert _ours(rid) == [] and not Path(f"/run/netslo/{rid}").exists()


def test_vxlan_cross_node_traffic_is_encapsulated_on_the_underlay():
    with NetnsCluster(nodes=2, datapath="vxlan") as c:
        srv, cross = c.add_pod("server", "node0"), c.add_pod("cross", "node1")
        ports = c.start_responders(srv, ("udp",))
        with NetNS(c.ns_name("sw")) as sw:
            before = sw.get_links(ifname="n1")[0].get_attr("IFLA_STATS64")["rx_packets"]
        c.probe(cross, ProbeSpec("udp", srv.ip, ports["udp"], count=100, interval=0.001))
        with NetNS(c.node_netns("node1")) as ipr:
            vx = ipr.get_links(ifname="flannel.1")[0].get_attr("IFLA_STATS64")
        assert vx["tx_packets"] >= 100  # the probe went through the VXLAN device
        with NetNS(c.ns_name("sw")) as sw:
            after = sw.get_links(ifname="n1")[0].get_attr("IFLA_STATS64")["rx_packets"]
        assert after - before >= 100


def _mtu(ns: str, ifname: str) -> int:
    with NetNS(ns) as ipr:
        return ipr.get_links(ifname=ifname)[0].get_attr("IFLA_MTU")


@pytest.mark.parametrize("datapath, mtu, expected", [("bridge", None, 1500), ("bridge", 1450, 1450),
                                                     ("routed", 1400, 1400), ("vxlan", None, 1450)])
def test_the_pods_mtu_is_the_datapaths_or_the_one_asked_for(datapath, mtu, expected):
    with NetnsCluster(nodes=2, datapath=datapath, mtu=mtu) as c:
        pod = c.add_pod("server", "node0")
        assert _mtu(c.netns_of(pod), "eth0") == expected
        assert c.environment()["pod_mtu"] == str(expected)
        big = c.exec_in(c.add_pod("cross", "node1"), ["ping", "-c", "1", "-W", "2", "-M", "do", "-s",
                                                       str(expected - 28), pod.ip])      # a full-size packet passes
        assert b" 0% packet loss" in big


def test_bad_options_fail_before_anything_is_created():
    before = set(netns.listnetns())
    with pytest.raises(SpecError, match="--netslo-datapath"):
        NetnsCluster(datapath="calico")
    with pytest.raises(SpecError, match="--netslo-nodes"):
        NetnsCluster(nodes=0)
    with pytest.raises(SpecError, match="mtu: value 1500 — expected a whole number 1280..1450 on the vxlan"):
        NetnsCluster(datapath="vxlan", mtu=1500)
    assert set(netns.listnetns()) == before


def test_pod_names_are_validated():
    with NetnsCluster(nodes=1) as c:
        with pytest.raises(SpecError, match="pod name"):
            c.add_pod("Bad_Name", "node0")
        with pytest.raises(SpecError, match="node"):
            c.add_pod("ok", "node7")


def test_kill_9_leaves_orphans_that_the_next_run_reaps():
    run_id = "c0ffee"
    code = ("import time, sys; sys.path.insert(0, %r)\n"
            "from netslo.providers.netns.cluster import NetnsCluster\n"
            "c = NetnsCluster(nodes=2, run_id=%r); p = c.add_pod('server', 'node0'); c.start_responders(p)\n"
            "print('up', flush=True); time.sleep(60)\n") % (str(ROOT), run_id)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "up"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert len(_ours(run_id)) == 4                      # the orphans are really there
    said = reap()
    assert any(run_id in line and "processes" in line for line in said)
    assert _ours(run_id) == [] and not Path(f"/run/netslo/{run_id}").exists()
    time.sleep(0.2)
    agents = subprocess.run(["pgrep", "-f", "ready-server"], capture_output=True, text=True).stdout.split()
    assert not [p for p in agents if Path(f"/proc/{p}/cmdline").exists()
                and run_id in Path(f"/proc/{p}/cmdline").read_text()]


def test_two_clusters_in_one_process_do_not_reap_each_other():
    with NetnsCluster(nodes=1) as first:
        with NetnsCluster(nodes=1) as second:
            assert len(_ours(first.run_id)) == 2 and len(_ours(second.run_id)) == 2
        assert len(_ours(first.run_id)) == 2  # still alive after the second came and went


@pytest.mark.parametrize("datapath", ["bridge", "vxlan"])
def test_gateway_mac_stays_put_when_a_pod_with_a_lower_mac_joins_the_node(datapath):
    """A Linux bridge without an assigned address takes the lowest MAC of its ports, so a new pod
    could move the gateway's MAC under the pods already on the node. A pod whose cached gateway MAC
    is then another pod's host-veth address has its frames dropped (PACKET_OTHERHOST) until the
    neighbour entry expires: tens of seconds of silent loss. The gateway's address must not move."""
    def set_mac(pod, mac):
        with NetNS(c.node_netns(pod.node)) as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname=pod.host_interface)[0], address=mac)

    def gateway_mac():
        with NetNS(c.node_netns("node1")) as ipr:
            return ipr.get_links(ifname="cni0")[0].get_attr("IFLA_ADDRESS")

    with NetnsCluster(nodes=2, datapath=datapath) as c:
        srv, first, old = c.add_pod("server", "node0"), c.add_pod("first", "node1"), c.add_pod("old", "node1")
        set_mac(first, "02:00:00:00:00:02")
        ports = c.start_responders(srv, ("udp",))
        spec = ProbeSpec("udp", srv.ip, ports["udp"], count=50, interval=0.001)
        assert stats.analyze(c.probe(old, spec)).counts["received"] == 50   # caches the gateway's MAC
        before = gateway_mac()
        set_mac(c.add_pod("new", "node1"), "02:00:00:00:00:01")
        a = stats.analyze(c.probe(old, spec))
        assert (a.counts["received"], gateway_mac()) == (50, before), a.counts
