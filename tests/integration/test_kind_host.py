"""Host-side views of namespaces (netslo.providers.kind.host) on real namespaces of this kernel: what the
kind provider uses to capture and read qdiscs inside kind nodes and pods."""

import os

import pytest

from netslo.core.errors import InfrastructureError
from netslo.providers.kind import host as kind_host
from netslo.providers.netns.cluster import NETNS_DIR, NetnsCluster


@pytest.fixture(scope="module")
def vx():
    with NetnsCluster(nodes=2, datapath="vxlan") as c:
        yield c


def test_a_pods_namespace_is_found_by_its_inode_and_its_host_veth_by_the_peer_index(vx):
    pod = vx.add_pod("kh", "node1")
    vx.start_responders(pod, ("udp",))          # a process in the pod's namespace, as a kind pod has
    inode = os.stat(NETNS_DIR / vx.netns_of(pod)).st_ino
    path = kind_host.netns_by_inode(inode)
    assert path.startswith("/proc/") and os.stat(path).st_ino == inode
    from pyroute2 import NetNS
    with NetNS(vx.netns_of(pod), flags=0) as ipr:
        peer = ipr.get_links(ipr.link_lookup(ifname="eth0")[0])[0].get_attr("IFLA_LINK")
    assert kind_host.interface_name(str(NETNS_DIR / vx.node_netns("node1")), peer) == pod.host_interface


def test_tunnel_devices_are_the_vxlan_ones(vx):
    assert kind_host.tunnel_devices(str(NETNS_DIR / vx.node_netns("node0"))) == ["flannel.1"]


def test_a_namespace_no_process_is_in_is_an_error_naming_it():
    with pytest.raises(InfrastructureError, match=r"net:\[1\]"):
        kind_host.netns_by_inode(1)


def test_an_external_vxlan_device_is_made_once_with_its_port_and_metadata_mode(vx):
    """What kind bring-up makes on a node before Cilium's agent starts: Cilium keeps a cilium_vxlan of
    its port (it reads the tunnel key from each packet's metadata, so the device must be 'external')."""
    ns = str(NETNS_DIR / vx.node_netns("node1"))
    assert kind_host.add_external_vxlan(ns, "cilium_vxlan", 8472) is True
    assert kind_host.add_external_vxlan(ns, "cilium_vxlan", 8472) is False       # made once, kept
    from pyroute2 import NetNS
    with NetNS(vx.node_netns("node1"), flags=0) as ipr:
        (link,) = ipr.get_links(ipr.link_lookup(ifname="cilium_vxlan")[0])
        data = link.get_attr("IFLA_LINKINFO").get_attr("IFLA_INFO_DATA")
        assert data.get_attr("IFLA_VXLAN_PORT") == 8472 and data.get_attr("IFLA_VXLAN_COLLECT_METADATA") == 1
        assert data.get_attr("IFLA_VXLAN_LEARNING") == 0
        ipr.link("del", index=link["index"])
    assert kind_host.tunnel_devices(ns) == ["flannel.1"]
