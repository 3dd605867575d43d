"""Synthetic raw samples for the statistics benchmarks and the streamed-soak check (no network).

Requests every 100 µs, lognormal RTT (median 100 µs, sigma 0.5), 0.1 % loss, server timestamps,
send-timer error 5-60 µs. Rows are generated in blocks of ``GEN_BLOCK`` seqs, each from its own
seeded generator, so the same seqs get the same rows whether they are made all at once, chunk by
chunk, or streamed.
"""

from __future__ import annotations

import numpy as np

from netslo.stats import compact
from netslo.stats.samples import CHUNK_ROWS, SAMPLE_DTYPE, SampleSet, empty
from netslo.stats.stream import RowStream

GEN_BLOCK = 1 << 16
META = {"protocol": "udp", "shared_clock": True, "synthetic": True}


def _block(b: int, seed: int, scale: float) -> np.ndarray:
    lo = b * GEN_BLOCK
    rng = np.random.default_rng([seed, b])
    n = GEN_BLOCK
    rows = empty(n)
    rows["seq"] += lo
    rows["sched_ns"] = (np.arange(n, dtype=np.int64) + lo) * 100_000
    rows["send_ns"] = rows["sched_ns"] + rng.integers(5_000, 60_000, n)
    rtt = (scale * 1e5 * rng.lognormal(0, 0.5, n)).astype(np.int64)
    rows["srv_rx_ns"] = rows["send_ns"] + rtt // 2
    rows["srv_tx_ns"] = rows["srv_rx_ns"] + 5_000
    rows["recv_ns"] = rows["send_ns"] + rtt + 5_000
    rows["srv_seen"] = 1
    rows["arrival"] = rows["seq"]
    lost = rng.random(n) < 0.001
    rows["recv_ns"][lost] = -1
    rows["arrival"][lost] = -1
    return rows


def synthetic_rows(lo: int, hi: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """Structured rows of seqs lo..hi-1."""
    if hi <= lo:
        return np.empty(0, dtype=SAMPLE_DTYPE)
    blocks = range(lo // GEN_BLOCK, (hi - 1) // GEN_BLOCK + 1)
    rows = np.concatenate([_block(b, seed, scale) for b in blocks])
    first = blocks[0] * GEN_BLOCK
    return rows[lo - first:hi - first]


def synthetic(n: int, seed: int = 0, scale: float = 1.0) -> SampleSet:
    """n requests as a compact set, built chunk by chunk (never all 73-byte rows at once)."""
    chunks, ranks = [], 0
    for lo in range(0, n, CHUNK_ROWS):
        c = compact.encode(synthetic_rows(lo, min(lo + CHUNK_ROWS, n), seed, scale), start=lo, rank_start=ranks)
        ranks += c.count("arrival")
        chunks.append(c)
    return SampleSet(meta=dict(META), chunks=chunks)


def synthetic_stream(n: int, sink, seed: int = 0, scale: float = 1.0, settle_ns: int = 1_000_000_000) -> SampleSet:
    """The fast synthetic writer: n requests fed through ``netslo.stats.stream.RowStream`` (blocks held
    while they can change, then encoded and handed to ``sink``) ``GEN_BLOCK`` rows at a time, its
    clock being the synthetic send times. Returns what ``RowStream.finish`` returns."""
    stream = RowStream(n, settle_ns=settle_ns, sink=sink)
    for lo in range(0, n, GEN_BLOCK):
        hi = min(lo + GEN_BLOCK, n)
        rows = synthetic_rows(lo, hi, seed, scale)
        stream.rows_between(lo, hi)[...] = rows
        stream.retire(int(rows["send_ns"][-1]))
    return stream.finish(dict(META))
