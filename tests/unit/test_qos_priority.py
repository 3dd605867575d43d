"""QoS policy as data: validation, u32 keys and their byte-level read-back comparison."""

import pytest

from netslo.core.errors import SpecError
from netslo.impair.shaping import priority as pr

GOOD = {"link": "20mbit", "queue": "50ms", "classes": [
    {"name": "ef", "dscp": ["EF"], "rate": "4mbit", "prio": 0},
    {"name": "af", "dscp": ["AF41", 24], "rate": "4mbit", "ceil": "10mbit", "prio": 1},
    {"name": "be", "default": True, "rate": "12mbit", "prio": 2}]}


def test_parse_policy():
    p = pr.parse_policy(GOOD)
    assert p.link_bits == 20e6 and p.queue_s == 0.05 and p.burst_bytes == 16384
    assert [c.name for c in p.classes] == ["ef", "af", "be"]
    assert p.class_of(46).name == "ef" and p.class_of(34).name == "af" and p.class_of(24).name == "af"
    assert p.class_of(0).name == "be" and p.default_class.name == "be"
    assert p.classes[0].ceil_bits == 20e6 and p.classes[1].ceil_bits == 10e6
    assert p.queue_bytes(p.classes[0]) == max(int(20e6 / 8 * 0.05), pr.MIN_QUEUE_BYTES)


def _with(**changes):
    doc = {**GOOD, "classes": [dict(c) for c in GOOD["classes"]]}
    for k, v in changes.items():
        if k.startswith("c0_"):
            doc["classes"][0][k[3:]] = v
        else:
            doc[k] = v
    return doc


@pytest.mark.parametrize("doc,field", [
    (_with(link="fast"), "qos.priority.link"),
    (_with(queue="50"), "qos.priority.queue"),
    (_with(burst="1"), "qos.priority.burst"),
    (_with(extra=1), "qos.priority.extra"),
    (_with(classes=[]), "qos.priority.classes"),
    (_with(c0_name="EF!"), "qos.priority.classes[0].name"),
    (_with(c0_rate="30mbit"), "qos.priority.classes[0].ceil"),
    (_with(c0_prio=9), "qos.priority.classes[0].prio"),
    (_with(c0_dscp=["XX"]), "qos.priority.classes[0].dscp"),
    (_with(c0_dscp=["AF41"]), "qos.priority.classes[1].dscp"),
    (_with(c0_default=True), "qos.priority.classes"),
    (_with(c0_colour="red"), "qos.priority.classes[0].colour"),
])
def test_parse_policy_errors_are_one_line(doc, field):
    with pytest.raises(SpecError) as e:
        pr.parse_policy(doc)
    assert str(e.value).startswith(field + ": value") and "\n" not in str(e.value)


def test_flat_control_has_no_filters():
    f = pr.flat(pr.parse_policy(GOOD))
    assert len(f.classes) == 1 and f.classes[0].default and not f.classes[0].dscp
    assert f.classes[0].rate_bits == f.classes[0].ceil_bits == 20e6


def test_u32_keys_for_tos_byte():
    assert pr.u32_keys(pr.match_bytes(46, "ip")) == ["0x00b80000/0x00fc0000+0"]


def test_u32_keys_for_vxlan_inner_header():
    keys = pr.u32_keys(pr.match_bytes(46, "vxlan-inner"))
    assert keys == ["0x000012b5/0x0000ffff+20", "0x080045b8/0xfffffffc+48"]


def test_tc_read_back_normalizes_offsets():
    """tc prints '0x00b80000/0x00fc0000+0' as 'b8000000/fc000000 at 1': same bytes."""
    assert pr.key_bytes(0xB8000000, 0xFC000000, 1) == pr.match_bytes(46, "ip")
    assert pr.key_bytes(0x00B80000, 0x00FC0000, 0) == pr.match_bytes(46, "ip")


def test_pitfall_key_matches_the_wrong_byte():
    """'0xb8000000/0xfc000000+0' matches version/IHL (byte 0), not the TOS byte: read-back differs."""
    assert pr.key_bytes(0xB8000000, 0xFC000000, 0) == {0: (0xB8, 0xFC)}
    assert pr.key_bytes(0xB8000000, 0xFC000000, 0) != pr.match_bytes(46, "ip")


def test_unknown_layer():
    with pytest.raises(SpecError, match="layer"):
        pr.match_bytes(46, "mpls")
