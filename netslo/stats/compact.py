"""Exact columnar encoding of sample rows (``netslo.stats.samples.SAMPLE_DTYPE``), one chunk at a time.

A chunk holds consecutive rows. Each field is stored as

  presence   rows whose value is not -1 (the "unknown" sentinel, which costs no value; 0 for the
             counters resp_bytes and dups): every row, no row, the same rows as an earlier field,
             or one bit per row
  ref        what the value is stored relative to, per row: nothing, the global row number
             (``seq``), the number of earlier present values of the field over the whole set
             (``arrival``), ``step`` x the row number in the chunk (an open-loop schedule), or
             another field of the same row (``recv_ns`` relative to ``send_ns`` is the RTT)
  offsets    value = ref + base + offset (int64 arithmetic modulo 2^64, so any int64 round-trips),
             offset in the smallest unsigned type holding max - min (u1, u2, u4, u8); no array at
             all when every offset is 0 (a constant, or an exact schedule)

Reading back gives the original rows bit for bit. The analysis reads the relative values directly:
``recv_ns`` relative to ``send_ns`` is the RTT in ns, ``base`` + ``offsets`` of the present rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

UNKNOWN = -1
ABSENT = {"resp_bytes": 0, "dups": 0}     # counters whose usual "nothing" is 0, not -1


def absent(name: str) -> int:
    """The value that costs nothing to store in field ``name`` (-1 = unknown, or 0 for counters)."""
    return ABSENT.get(name, UNKNOWN)

# field -> references to try, the first one giving the smallest offsets wins (decoding follows
# this order: a field's reference is decoded before it)
REFERENCES = {
    "seq": ("index",), "sched_ns": ("step",), "send_ns": ("sched_ns",), "recv_ns": ("send_ns",),
    "srv_rx_ns": ("send_ns",), "srv_tx_ns": ("srv_rx_ns",), "req_bytes": ("none",), "resp_bytes": ("none",),
    "tos_sent": ("none",), "tos_cli": ("none",), "tos_srv": ("none",), "srv_seen": ("none",),
    "arrival": ("rank", "index"), "dups": ("none",), "send_app_ns": ("send_ns",), "recv_app_ns": ("recv_ns",),
}
# fields added later -> the field they equal in chunks written before them (``with_added``)
ADDED = {"send_app_ns": "send_ns", "recv_app_ns": "recv_ns"}
REFERENCED = {ref for refs in REFERENCES.values() for ref in refs if ref in REFERENCES}
# what renumbering a chunk (SampleSet.concat) adds to a field: rows before it, or arrivals before it
RENUMBERED = {"seq": "rows", "arrival": "ranks"}
OFFSET_TYPES = (np.uint8, np.uint16, np.uint32, np.uint64)


@dataclass(frozen=True)
class Column:
    """One field of one chunk. ``lo``/``hi``: smallest/largest present value (absolute), None if none."""

    presence: object          # "all" | "none" | "same:<field>" | np.ndarray of packed bits (little)
    ref: str
    base: int = 0             # int64
    span: int = 0             # largest offset (uint64); 0 = no offsets array
    offsets: np.ndarray | None = None
    step: int = 0             # ref "step": value = step * row + base + offset
    rank_start: int = 0       # ref "rank": present values of this field in earlier chunks
    lo: int | None = None
    hi: int | None = None

    @property
    def everywhere(self) -> bool:
        """Every row of the chunk has a value."""
        return isinstance(self.presence, str) and self.presence == "all"


@dataclass(frozen=True)
class Chunk:
    """Rows ``start`` .. ``start + rows - 1`` of a sample set, every field a ``Column``."""

    rows: int
    start: int
    columns: dict

    def present(self, name: str) -> np.ndarray:
        """Boolean mask of rows whose ``name`` is not ``absent(name)`` (-1, or 0 for counters)."""
        p = self.columns[name].presence
        if isinstance(p, str):
            if p == "all":
                return np.ones(self.rows, dtype=bool)
            if p == "none":
                return np.zeros(self.rows, dtype=bool)
            return self.present(p[5:])
        return np.unpackbits(p, count=self.rows, bitorder="little").view(bool)

    def count(self, name: str) -> int:
        """Number of present values of ``name``."""
        c = self.columns[name]
        if c.offsets is not None:
            return len(c.offsets)
        p = c.presence
        if isinstance(p, str):
            return self.rows if p == "all" else (0 if p == "none" else self.count(p[5:]))
        return int(np.unpackbits(p, count=self.rows, bitorder="little").sum())

    def relative(self, name: str) -> np.ndarray:
        """``base + offset`` of the present rows (int64): the value minus its reference."""
        c = self.columns[name]
        if c.offsets is None:
            return np.full(self.count(name), c.base, dtype=np.int64)
        return c.offsets.astype(np.int64) + np.int64(c.base)

    def reference(self, name: str) -> np.ndarray | None:
        """The reference value of every row (int64) per ``Column.ref``; None for ref 'none'."""
        c = self.columns[name]
        if c.ref == "none":
            return None
        if c.ref == "index":
            return np.arange(self.start, self.start + self.rows, dtype=np.int64)
        if c.ref == "step":
            return np.arange(self.rows, dtype=np.int64) * np.int64(c.step)
        if c.ref == "rank":
            return np.cumsum(self.present(name), dtype=np.int64) + np.int64(c.rank_start - 1)
        return self.values(c.ref)

    def values(self, name: str) -> np.ndarray:
        """Every row's value of ``name`` (int64; ``absent(name)`` where none is stored)."""
        c = self.columns[name]
        ref = self.reference(name)
        if c.everywhere:
            if c.offsets is None:
                return np.full(self.rows, c.base, dtype=np.int64) if ref is None else ref + np.int64(c.base)
            rel = self.relative(name)
            return rel if ref is None else ref + rel
        mask = self.present(name)
        out = np.full(self.rows, absent(name), dtype=np.int64)
        out[mask] = self.relative(name) if ref is None else ref[mask] + self.relative(name)
        return out

    def constant(self, name: str) -> int | None:
        """The value every row has, when the field is stored as one constant; else None."""
        c = self.columns[name]
        return c.base if c.everywhere and c.offsets is None and c.ref == "none" else None

    def total(self, name: str) -> int:
        """Exact sum of every row's value of ``name``."""
        c = self.columns[name]
        missing = (self.rows - self.count(name)) * absent(name)
        if c.ref != "none":
            return int(self.values(name)[self.present(name)].sum()) + missing
        if c.offsets is None:
            return self.count(name) * c.base + missing
        high = int((c.offsets >> np.uint8(32)).sum(dtype=np.uint64)) if c.offsets.itemsize == 8 else 0
        low = int((c.offsets & np.uint64(0xFFFFFFFF) if high else c.offsets).sum(dtype=np.uint64))
        return self.count(name) * c.base + (high << 32) + low + missing

    def to_rows(self, dtype: np.dtype) -> np.ndarray:
        """The structured rows of this chunk, bit-exact."""
        rows = np.empty(self.rows, dtype=dtype)
        for name in dtype.names:
            rows[name] = self.values(name).astype(dtype[name])
        return rows

    def shifted(self, rows: int, ranks: int) -> "Chunk":
        """This chunk placed ``rows`` rows later in a set with ``ranks`` more earlier arrivals:
        ``seq`` grows by ``rows`` and every known ``arrival`` by ``ranks``, nothing else changes."""
        by = {"rows": rows, "ranks": ranks}
        cols = {}
        for name, c in self.columns.items():
            wanted = by.get(RENUMBERED.get(name), 0)
            moved = rows if c.ref == "index" else (ranks if c.ref == "rank" else 0)
            base = (c.base + wanted - moved + 2**63) % 2**64 - 2**63
            cols[name] = replace(c, base=base, rank_start=c.rank_start + (ranks if c.ref == "rank" else 0),
                                 lo=None if c.lo is None else c.lo + wanted,
                                 hi=None if c.hi is None else c.hi + wanted)
        return Chunk(self.rows, self.start + rows, cols)


def with_added(chunk: Chunk) -> Chunk:
    """``chunk`` with every ``ADDED`` field it lacks (written before the field existed) stored as
    equal to its twin: no array, the twin's rows."""
    missing = [name for name in ADDED if name not in chunk.columns]
    if not missing:
        return chunk
    cols = dict(chunk.columns)
    for name in missing:
        twin = cols[ADDED[name]]
        cols[name] = Column(presence="same:" + ADDED[name], ref=ADDED[name], lo=twin.lo, hi=twin.hi)
    return Chunk(chunk.rows, chunk.start, cols)


def offset_type(span: int):
    """Smallest unsigned numpy type holding 0..span."""
    for t in OFFSET_TYPES:
        if span <= np.iinfo(t).max:
            return t
    raise ValueError(f"span {span} exceeds 64 bits")


def _presence(mask: np.ndarray, earlier: dict):
    if mask.all():
        return "all"
    if not mask.any():
        return "none"
    for name, m in earlier.items():
        if np.array_equal(m, mask):
            return "same:" + name
    return np.packbits(mask, bitorder="little")


def _schedule_step(values: np.ndarray) -> int:
    """Step of an evenly spaced schedule (0 when fewer than two rows)."""
    if len(values) < 2:
        return 0
    step = (int(values[-1]) - int(values[0])) // (len(values) - 1)
    return step if -2**63 <= step < 2**63 else 0


def encode(rows: np.ndarray, start: int = 0, rank_start: int = 0) -> Chunk:
    """Encode structured rows (``SAMPLE_DTYPE``) as one chunk starting at global row ``start``;
    ``rank_start``: present ``arrival`` values before this chunk."""
    n = len(rows)
    cols, decoded, masks = {}, {}, {}
    for name, refs in REFERENCES.items():
        v = rows[name].astype(np.int64)
        mask = v != absent(name)
        presence = _presence(mask, masks)
        if not isinstance(presence, str):
            masks[name] = mask                       # a later field with the same rows refers to it
        present = v[mask]
        best = None
        for ref in refs:
            step = 0
            if ref == "none":
                rel = present
            elif ref == "index":
                rel = present - (np.arange(n, dtype=np.int64) + np.int64(start))[mask]
            elif ref == "step":
                step = _schedule_step(present) if mask.all() else 0
                rel = present - np.arange(n, dtype=np.int64)[mask] * np.int64(step)
            elif ref == "rank":
                rel = present - (np.arange(len(present), dtype=np.int64) + np.int64(rank_start))
            else:
                rel = present - decoded[ref][mask]   # modulo 2^64, like every int64 numpy operation
            base = int(rel.min()) if len(rel) else 0
            off = (rel - np.int64(base)).view(np.uint64)
            span = int(off.max()) if len(rel) else 0
            if best is None or span < best[2]:
                best = (ref, base, span, off, step)
        ref, base, span, off, step = best
        cols[name] = Column(
            presence=presence, ref=ref, base=base, span=span,
            offsets=off.astype(offset_type(span)) if span else None, step=step,
            rank_start=rank_start if ref == "rank" else 0,
            lo=int(present.min()) if len(present) else None, hi=int(present.max()) if len(present) else None)
        if name in REFERENCED:
            decoded[name] = v
    return Chunk(n, start, cols)


def rows_of(chunks, dtype: np.dtype) -> np.ndarray:
    """Structured rows of consecutive chunks."""
    if not chunks:
        return np.empty(0, dtype=dtype)
    return np.concatenate([c.to_rows(dtype) for c in chunks])


def nbytes(chunks) -> int:
    """Bytes of array data the chunks hold in memory."""
    total = 0
    for ch in chunks:
        for c in ch.columns.values():
            total += (c.offsets.nbytes if c.offsets is not None else 0)
            total += 0 if isinstance(c.presence, str) else c.presence.nbytes
    return total
