"""Crafted DSCP-marked UDP packets sent from a pod's namespace and sniffed at every hop (AF_PACKET).

A plan names the sender's namespace, the addresses, the marks (``dscps``: DSCP values), ``per_mark``
packets of each and a random ``marker`` that every crafted payload starts with; a sniffer keeps only
frames that carry it, so other traffic never counts. Frames are decoded with scapy; on a VXLAN hop
both the outer and the inner IPv4 TOS are read. ``capture(plan)`` runs sniffers and sender in this
process (each socket opened by a short-lived thread inside its namespace: ``netslo.core.netns_access``);
a node agent runs ``Sniffers`` and ``send_marked`` on its node (``netslo.impair.shaping.node_cli``).
The verdicts are ``netslo.studies.qos.dscp_check``'s.
"""

from __future__ import annotations

import select
import socket
import time

from netslo.core import netns_access

ETH_P_ALL = 0x0003
SEND_GAP_S = 0.002     # s between two crafted packets


def _decode(frame: bytes, marker: bytes):
    """(dscp_sent, k, outer_tos | None, inner_tos) of one of our frames, else None."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.layers.vxlan import VXLAN
    if marker not in frame:
        return None
    pkt = Ether(frame)
    ip = pkt.getlayer(IP)
    if ip is None:
        return None
    outer = None
    if pkt.haslayer(VXLAN):
        outer = ip.tos
        ip = pkt[VXLAN].getlayer(IP)
        if ip is None:
            return None
    udp = ip.getlayer(UDP)
    payload = bytes(udp.payload) if udp is not None else b""
    if not payload.startswith(marker) or len(payload) < len(marker) + 2:
        return None
    return payload[len(marker)], payload[len(marker) + 1], outer, ip.tos


def _sniffer(ifname: str) -> socket.socket:
    """A non-blocking AF_PACKET socket on ``ifname`` of the calling thread's namespace."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        s.bind((ifname, 0))
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


class Sniffers:
    """AF_PACKET sockets on ``points`` ([(namespace path, ifname), ...]), each opened by a thread inside
    its namespace; ``drain(timeout)`` files the frames carrying ``marker`` per point and (dscp, k)."""

    def __init__(self, points, marker: bytes):
        self.marker, self.socks = marker, []
        try:
            for path, ifname in points:
                self.socks.append(netns_access.run_in(path, _sniffer, ifname))
        except BaseException:
            self.close()
            raise
        self.seen = [dict() for _ in self.socks]

    def drain(self, timeout: float) -> None:
        ready, _, _ = select.select(self.socks, [], [], timeout)
        for s in ready:
            i = self.socks.index(s)
            while True:
                try:
                    frame = s.recv(65535)
                except BlockingIOError:
                    break
                got = _decode(frame, self.marker)
                if got is not None:
                    self.seen[i].setdefault((got[0], got[1]), list(got))

    def wait(self, want: int, timeout: float) -> list:
        """Drain until the last point saw ``want`` frames or ``timeout`` s passed, then late copies;
        per point the rows [dscp, k, outer_tos | None, inner_tos]."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(len(x) < want for x in self.seen[-1:]):
            self.drain(0.05)
        self.drain(0.2)  # late copies at other hops
        return [list(x.values()) for x in self.seen]

    def close(self) -> None:
        for s in self.socks:
            s.close()


def send_marked(tx: socket.socket, plan: dict, pause) -> None:
    """The crafted packets of ``plan`` (per mark, ``per_mark`` of them) on the raw socket ``tx``;
    ``pause(SEND_GAP_S)`` between two."""
    from scapy.layers.inet import IP, UDP
    from scapy.packet import Raw
    marker = bytes.fromhex(plan["marker"])
    for d in plan["dscps"]:
        for k in range(plan["per_mark"]):
            pkt = IP(src=plan["src"], dst=plan["dst"], tos=(d << 2) & 0xFC, ttl=64) / \
                UDP(sport=41000 + k, dport=plan["port"]) / Raw(marker + bytes([d, k]) + bytes(32))
            tx.sendto(bytes(pkt), (plan["dst"], 0))
            pause(SEND_GAP_S)


def raw_sender(netns: str) -> socket.socket:
    """An IPPROTO_RAW socket opened in ``netns`` (a name under /run/netns or a path)."""
    return netns_access.run_in(netns_access.path_of(netns), socket.socket, socket.AF_INET, socket.SOCK_RAW,
                               socket.IPPROTO_RAW)


def capture(plan: dict) -> dict:
    """Open every hop's sniffer in its namespace, send the crafted packets, collect what passed."""
    sniff = Sniffers([(netns_access.path_of(ns), ifname) for ns, ifname in plan["hops"]], bytes.fromhex(plan["marker"]))
    try:
        tx = raw_sender(plan["sender"])
        try:
            send_marked(tx, plan, sniff.drain)
            seen = sniff.wait(len(plan["dscps"]) * plan["per_mark"], plan["timeout"])
        finally:
            tx.close()
    finally:
        sniff.close()
    return {"seen": seen}
