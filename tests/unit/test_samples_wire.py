"""Sample records (save/load/CSV/concat) and the wire format (hostile input is dropped)."""

import os

import numpy as np

from netslo.stats import samples
from netslo.traffic import wire
from netslo.traffic.responders.udp import FlowTable, handle


def test_npz_roundtrip_keeps_rows_and_meta(tmp_path):
    s = samples.SampleSet(samples.empty(5), {"protocol": "udp", "interval": 0.002})
    s.rows["recv_ns"][2] = 123
    s.save(tmp_path / "x.npz")
    t = samples.SampleSet.load(tmp_path / "x.npz")
    assert np.array_equal(s.rows, t.rows) and t.meta == s.meta


def test_csv_has_header_and_one_line_per_row():
    text = samples.SampleSet(samples.empty(3)).to_csv().splitlines()
    assert text[0].split(",") == list(samples.SAMPLE_DTYPE.names) and len(text) == 4


def test_concat_renumbers_seq_and_arrival():
    a, b = samples.empty(2), samples.empty(2)
    a["arrival"] = [0, 1]
    b["arrival"] = [1, 0]
    c = samples.SampleSet.concat([samples.SampleSet(a), samples.SampleSet(b)])
    assert list(c.rows["seq"]) == [0, 1, 2, 3] and list(c.rows["arrival"]) == [0, 1, 3, 2]


def test_responder_answers_requests_and_fin_with_bitmap():
    table = FlowTable()
    for seq in (0, 2, 3):
        req = wire.pack_udp(wire.UDP_REQ, 42, seq, 111, resp_bytes=200, size=100)
        reply = handle(req, 0xB8, 999, table)
        kind, tos, flow, rseq, send_ns, rx, _tx, _r = wire.unpack_udp(reply)
        assert (kind, tos, flow, rseq, send_ns, rx, len(reply)) == (wire.UDP_REPLY, 0xB8, 42, seq, 111, 999, 200)
    fin = handle(wire.pack_udp(wire.UDP_FIN, 42, 4), -1, 0, table)
    bits = wire.unpack_bitmap(fin[wire.UDP_HDR.size:])
    assert [wire.bit_is_set(bits, s) for s in range(5)] == [True, False, True, True, False]


def test_responder_drops_garbage_and_truncated_datagrams():
    table = FlowTable()
    rng = np.random.default_rng(0)
    good = wire.pack_udp(wire.UDP_REQ, 1, 1, size=64)
    for n in range(wire.UDP_HDR.size):
        assert handle(good[:n], 0, 0, table) is None          # truncated header: dropped
    for _ in range(2000):
        assert handle(rng.bytes(int(rng.integers(0, 200))), 0, 0, table) is None  # not ours: dropped
    bad_kind = bytearray(wire.pack_udp(wire.UDP_REQ, 1, 1))
    bad_kind[4] = 99
    assert handle(bytes(bad_kind), 0, 0, table) is None
    for _ in range(500):  # right magic, random rest: answered or dropped, never an exception
        handle(b"NSL1" + bytes([1]) + os.urandom(60), 0, 0, table)
    huge = wire.pack_udp(wire.UDP_REQ, 1, 2, resp_bytes=2**32 - 1)
    assert len(handle(huge, 0, 0, table)) == wire.MAX_UDP_PAYLOAD   # oversize answer request is capped


def test_flow_table_memory_is_bounded():
    table = FlowTable(max_new=8, max_established=4)
    for flow in range(100):
        table.mark(flow, 10)
        table.mark(flow, wire.MAX_FIN_SEQS + 5)    # beyond the tracked range: ignored
        table.mark(flow + 1000, wire.MAX_FIN_SEQS - 1)  # a new flow may not start with a huge seq
    assert len(table.flows) == 8 and all(len(b) <= 2 for b in table.flows.values())


def test_a_flood_of_new_flows_cannot_evict_an_established_silent_flow():
    table = FlowTable()
    for seq in range(100):
        table.mark(7, seq)                          # a real probe, then silent (waiting for answers)
    for flow in range(100_000, 120_000):            # flood: 20 000 unknown flow ids
        table.mark(flow, 0)
    bits = table.bitmap(7)
    assert all(wire.bit_is_set(bits, s) for s in range(100))
    assert len(table.new) <= 1024 and len(table.established) == 1
