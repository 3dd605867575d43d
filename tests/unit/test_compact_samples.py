"""Compact samples: exact round trip of every field (random, sentinel and extreme rows) through the
columnar npz, old files still read, concat and streaming produce the same rows, and the size."""

import io

import numpy as np
import pytest

from benchmarks.synthetic_samples import synthetic, synthetic_rows, synthetic_stream
from netslo.stats import compact, sample_file, samples, stream
from netslo.stats.samples import SAMPLE_DTYPE, SampleSet


def random_rows(rng, n: int) -> np.ndarray:
    """Every field: random over its whole type, a constant extreme, small values, or -1 sprinkled."""
    rows = np.zeros(n, dtype=SAMPLE_DTYPE)
    for name in SAMPLE_DTYPE.names:
        dt = SAMPLE_DTYPE[name]
        info = np.iinfo(dt)
        kind = rng.integers(0, 5)
        if kind == 0:
            v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        elif kind == 1:
            v = np.full(n, rng.choice([info.min, info.max, 0, -1 if info.min < 0 else 1]), dtype=dt)
        elif kind == 2:
            v = rng.integers(0, 1000, n).astype(dt)
        elif kind == 3:
            v = (np.arange(n) * int(rng.integers(1, 10**6)) + int(rng.integers(0, 10**12))).astype(dt)
        else:
            v = rng.choice(np.array([info.min, info.max, 0, 1], dtype=dt), n)
        if info.min < 0:
            v[rng.random(n) < rng.choice([0.0, 0.3, 1.0])] = -1
        rows[name] = v
    return rows


def assert_same_rows(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype == SAMPLE_DTYPE and len(a) == len(b)
    for name in SAMPLE_DTYPE.names:
        assert np.array_equal(a[name], b[name]), name
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("chunk_rows", [1 << 18, 64, 1])
def test_random_and_edge_rows_round_trip_bit_exactly(monkeypatch, chunk_rows):
    monkeypatch.setattr(samples, "CHUNK_ROWS", chunk_rows)
    rng = np.random.default_rng(chunk_rows)
    for n in [0, 1, 2, 3, 200, 1000] + [int(x) for x in rng.integers(0, 400, 40)]:
        rows = random_rows(rng, n)
        back = SampleSet.from_bytes(SampleSet(rows.copy(), {"n": n}).to_bytes())
        assert back.meta == {"n": n}
        assert_same_rows(back.rows, rows)


def test_extremes_and_sentinels_of_every_field_round_trip():
    rows = samples.empty(8)
    for name in SAMPLE_DTYPE.names:
        info = np.iinfo(SAMPLE_DTYPE[name])
        rows[name] = [info.min, info.max, 0, -1 if info.min < 0 else 1, info.min, info.max, 1, 0]
    rows["recv_ns"][2] = -1
    back = SampleSet.from_bytes(SampleSet(rows.copy()).to_bytes())
    assert_same_rows(back.rows, rows)


def test_columns_are_stored_in_the_smallest_exact_type():
    c = synthetic(1 << 16).chunks()[0].columns
    assert c["seq"].offsets is None and c["sched_ns"].offsets is None     # implicit: index, exact schedule
    assert c["srv_tx_ns"].offsets is None and c["req_bytes"].offsets is None  # constants
    assert c["send_ns"].offsets.dtype == np.uint16                          # timer error 5..60 µs
    assert c["recv_ns"].offsets.dtype == np.uint32                          # RTT
    assert c["arrival"].offsets is None                                     # arrival order = seq order


def test_counters_cost_nothing_where_they_are_zero():
    rows = synthetic_rows(0, 1000)
    rows["recv_ns"][::7] = -1
    got = rows["recv_ns"] >= 0
    rows["resp_bytes"][got] = 1000          # what a probe stores: the answer's size, 0 when lost
    c = SampleSet(rows.copy()).chunks()[0].columns
    assert c["resp_bytes"].presence == "same:recv_ns" and c["resp_bytes"].offsets is None
    assert_same_rows(SampleSet.from_bytes(SampleSet(rows.copy()).to_bytes()).rows, rows)


def test_format_1_files_still_read(tmp_path):
    rows = random_rows(np.random.default_rng(3), 300)
    buf = io.BytesIO()
    np.savez_compressed(buf, rows=rows, meta=np.frombuffer(b'{"protocol": "udp"}', dtype=np.uint8))
    (tmp_path / "old.npz").write_bytes(buf.getvalue())
    s = SampleSet.load(tmp_path / "old.npz")
    assert s.meta == {"protocol": "udp"}
    assert_same_rows(s.rows, rows)


def test_bytes_per_request_in_memory_and_on_disk():
    s = synthetic(1_000_000)
    in_memory = compact.nbytes(s.chunks()) / len(s)
    on_disk = len(s.to_bytes()) / len(s)
    assert in_memory < 11 and on_disk < 7      # structured rows: 73 bytes per request


def test_concat_of_compact_sets_equals_concat_of_rows(monkeypatch):
    monkeypatch.setattr(samples, "CHUNK_ROWS", 50)
    rng = np.random.default_rng(9)
    for _ in range(20):
        parts = []
        for n in rng.integers(0, 200, 3):
            r = synthetic_rows(0, int(n), seed=int(rng.integers(1 << 30)))
            r["arrival"][r["arrival"] >= 0] = rng.permutation(int((r["arrival"] >= 0).sum()))
            parts.append(SampleSet(r, {"run": 1}))
        by_rows = SampleSet.concat(parts)
        by_chunks = SampleSet.concat([SampleSet.from_bytes(p.to_bytes()) for p in parts])
        assert by_chunks._chunks is not None
        assert_same_rows(by_chunks.rows, by_rows.rows)


def test_select_of_a_compact_set_equals_select_of_its_rows(monkeypatch):
    monkeypatch.setattr(samples, "CHUNK_ROWS", 50)
    rng = np.random.default_rng(11)
    for p_keep in (0.0, 0.1, 0.7, 1.0):
        rows = random_rows(rng, 333)
        compact_set = SampleSet.from_bytes(SampleSet(rows, {"run": 1}).to_bytes())
        assert len(compact_set._chunks) == 7
        mask = rng.random(len(rows)) < p_keep
        picked = compact_set.select(mask)
        assert picked.meta == {"run": 1} and compact_set._rows is None      # never decoded whole
        assert_same_rows(picked.rows, rows[mask])
        assert_same_rows(SampleSet(rows, {}).select(mask).rows, rows[mask])


def test_row_stream_writes_final_blocks_and_gives_the_same_rows(monkeypatch):
    """Rows filled one by one, responses out of order and late: the streamed chunks decode to the rows
    an in-memory run would hold, minus the answers that came after their block was written."""
    rng = np.random.default_rng(4)
    n, block, settle = 1000, 64, 50
    sink = stream.ChunkList()
    rs = stream.RowStream(n, settle_ns=settle, sink=sink, block=block, defaults={"req_bytes": 100})
    ref = samples.empty(n)
    ref["req_bytes"] = 100
    live_max, arrivals = 0, 0
    for seq in range(n):
        t = 1000 + 10 * seq
        for rows in (rs[seq], ref[seq:seq + 1]):
            rows["sched_ns"], rows["send_ns"] = t - 3, t
        # answer an earlier request: usually recent, sometimes long after its block settled
        back = seq - int(rng.integers(0, 8)) if rng.random() < 0.97 else int(rng.integers(0, seq + 1))
        row = rs[back]
        if row is not None and row["recv_ns"] < 0:
            row["recv_ns"], row["arrival"] = t + 1, arrivals
            ref["recv_ns"][back], ref["arrival"][back] = t + 1, arrivals
            arrivals += 1
        rs.retire(t)
        live_max = max(live_max, len(rs.blocks))
    result = rs.finish({"p": 1})
    assert live_max <= 3 and rs.late > 0 and result.meta["late_responses"] == rs.late
    assert_same_rows(result.rows, ref)


def test_streamed_synthetic_file_reads_back_the_same_rows(tmp_path):
    n = 300_000
    with open(tmp_path / "s.npz", "wb") as f:
        w = sample_file.ChunkWriter(f)
        meta = synthetic_stream(n, w).meta
        w.close(meta)
    back = SampleSet.load(tmp_path / "s.npz")
    assert back.meta == meta and len(back) == n
    assert_same_rows(back.rows, synthetic_rows(0, n))
