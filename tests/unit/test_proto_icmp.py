"""ICMP echo packets: RFC 1071 checksum, request layout, reply parsing."""

import struct

from netslo.traffic.probes import icmp


def test_checksum_of_rfc1071_example_and_self_check():
    # RFC 1071 section 3: words 0001 f203 f4f5 f6f7 sum to 0xddf2; the checksum is its complement
    assert icmp.checksum(bytes.fromhex("0001f203f4f5f6f7")) == (~0xDDF2) & 0xFFFF
    pkt = icmp.echo_request(0x1234, 70000, 56)
    assert icmp.checksum(pkt) == 0                     # a correct checksum makes the sum verify to 0
    kind, code, _ck, ident, seq = icmp.HDR.unpack_from(pkt)
    assert (kind, code, ident, seq, len(pkt)) == (8, 0, 0x1234, 70000 & 0xFFFF, 64)


def test_parse_reply_skips_the_ip_header_and_ignores_other_types():
    ip = bytes([0x45, 0]) + struct.pack("!H", 20 + 16) + bytes(16)
    reply = icmp.HDR.pack(icmp.ECHO_REPLY, 0, 0, 7, 9) + bytes(8)
    assert icmp.parse_reply(ip + reply) == (7, 9, 16)
    request = icmp.HDR.pack(icmp.ECHO_REQUEST, 0, 0, 7, 9) + bytes(8)
    assert icmp.parse_reply(ip + request) is None and icmp.parse_reply(b"\x45") is None
