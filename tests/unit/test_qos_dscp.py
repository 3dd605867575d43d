"""DSCP verdicts and decoding of sniffed frames (plain and VXLAN), built with scapy."""

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

from netslo.studies.qos import dscp_check as dc
from netslo.traffic.dscp_capture import _decode

MARKER = bytes.fromhex("a1b2c3d4e5f6")


def test_verdicts():
    assert dc.verdict(46, [46, 46]) == "preserved"
    assert dc.verdict(46, [0, 0]) == "stripped"
    assert dc.verdict(46, [10]) == "rewritten to AF11"
    assert dc.verdict(46, []) == "not seen"
    assert dc.verdict(46, [46, 0]).startswith("mixed")
    assert dc.verdict(0, [0]) == "preserved"


def test_names():
    assert dc.name_of(46) == "EF" and dc.name_of(34) == "AF41" and dc.name_of(0) == "CS0" and dc.name_of(7) == "7"


def _inner(tos):
    return IP(src="10.244.1.2", dst="10.244.0.2", tos=tos) / UDP(sport=41000, dport=dc.CHECK_PORT) / \
        Raw(MARKER + bytes([46, 2]) + bytes(8))


def test_decode_plain_frame():
    frame = bytes(Ether() / _inner(0xB8))
    assert _decode(frame, MARKER) == (46, 2, None, 0xB8)


def test_decode_vxlan_frame_outer_and_inner():
    frame = bytes(Ether() / IP(src="172.18.0.11", dst="172.18.0.10", tos=0x02) / UDP(sport=5555, dport=4789)
                  / VXLAN(vni=1) / Ether() / _inner(0xB9))
    assert _decode(frame, MARKER) == (46, 2, 0x02, 0xB9)


def test_decode_ignores_foreign_frames():
    assert _decode(bytes(Ether() / IP() / UDP() / Raw(b"hello")), MARKER) is None


def test_report_selection():
    v = [dc.HopVerdict("a", "ip", 46, (46,), "preserved"), dc.HopVerdict("b", "outer", 46, (0,), "stripped")]
    r = dc.DscpReport(v, "cross-node")
    assert r.hops() == ["a", "b"] and r.at("b", "outer")[0].verdict == "stripped"
    assert "b [outer] EF: stripped (1 packets)" in r.text()


def test_a_device_the_datapath_goes_around_is_bypassed_not_lost():
    """'not seen' before a hop that saw the mark is 'bypassed' (e.g. an eBPF redirect into the pod);
    'not seen' with nothing seen after it stays 'not seen' (dropped)."""
    order = ["client pod eth0", "node lxc", "server pod eth0"]
    vs = [dc.HopVerdict("client pod eth0", "ip", 46, (46,), "preserved"),
          dc.HopVerdict("node lxc", "ip", 46, (), "not seen"),
          dc.HopVerdict("server pod eth0", "ip", 46, (46,), "preserved"),
          dc.HopVerdict("client pod eth0", "ip", 10, (10,), "preserved"),
          dc.HopVerdict("node lxc", "ip", 10, (), "not seen"),
          dc.HopVerdict("server pod eth0", "ip", 10, (), "not seen")]
    got = [v.verdict for v in dc._bypassed(vs, order)]
    assert got == ["preserved", "bypassed", "preserved", "preserved", "not seen", "not seen"]
