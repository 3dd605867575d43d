"""The one sample record: one row per request a probe scheduled, raw and exact.

All times are integers in nanoseconds of ``CLOCK_MONOTONIC`` of the host kernel. In the embedded
(netns) provider and on one kind node every pod shares that clock, so one-way delays are exact;
across machines only RTT (one clock: the client's) is meaningful and ``meta['shared_clock']`` is False.

Fields (``-1`` = unknown / did not happen):
  seq          request sequence number, 0..n-1 in schedule order
  sched_ns     when the open-loop schedule wanted the request sent
  send_ns      when the request left, at the clock point of ``meta['timestamps']`` (``netslo.traffic.kstamps``):
               the kernel's TX stamp (kernel), else the user-space time just before send
  recv_ns      when the matching response arrived, at the same source's clock point: the kernel's
               RX stamp (kernel, kernel-rx), else the user-space time after recv; -1 = lost / failed
  srv_rx_ns    when the responder had the request (its kernel RX stamp where it has one)
  srv_tx_ns    when the responder started sending the response (user space, just before send)
  req_bytes    request payload size (bytes, application layer)
  resp_bytes   response payload size received (bytes)
  tos_sent     IP TOS byte the client set on the request
  tos_srv      TOS byte the responder saw on the request (IP_RECVTOS), -1 unknown
  tos_cli      TOS byte the client saw on the response, -1 unknown
  srv_seen     1 the responder got the request, 0 it did not, -1 unknown (splits loss up/down)
  arrival      index of this response in client arrival order, -1 if none (reordering)
  dups         extra copies of the response the client received (duplicates)
  send_app_ns  the client's user-space time just before send (timer error = send_app_ns - sched_ns)
  recv_app_ns  the client's user-space time when it had the response (rtt_app = recv_app_ns - send_app_ns)

``meta['per_row']`` (optional): name -> list of one int per row, in seq order, for what a probe
records per request beyond these fields (the dns probe's rcode, timeouts...); ``select`` and
``concat`` keep it aligned with the rows.

With ``meta['timestamps']`` absent or ``user`` (every set recorded before kernel stamps, and every
probe but udp) send_ns == send_app_ns and recv_ns == recv_app_ns. docs/metrics.md defines the metrics.
"""

from __future__ import annotations

import io

import numpy as np

from netslo.stats import compact, sample_file

SAMPLE_DTYPE = np.dtype([
    ("seq", "<i8"), ("sched_ns", "<i8"), ("send_ns", "<i8"), ("recv_ns", "<i8"),
    ("srv_rx_ns", "<i8"), ("srv_tx_ns", "<i8"),
    ("req_bytes", "<u4"), ("resp_bytes", "<u4"),
    ("tos_sent", "<i2"), ("tos_srv", "<i2"), ("tos_cli", "<i2"),
    ("srv_seen", "<i1"), ("arrival", "<i8"), ("dups", "<u2"),
    ("send_app_ns", "<i8"), ("recv_app_ns", "<i8"),
])
APP_FIELDS = compact.ADDED     # user-space field -> its twin at the timestamps source's clock point
USER_DTYPE = np.dtype([(n, SAMPLE_DTYPE[n]) for n in SAMPLE_DTYPE.names if n not in APP_FIELDS])
"""The rows before kernel timestamps (format-1 files written before them)."""


def timestamps(meta: dict) -> str:
    """The clock points of a set's send_ns/recv_ns (``netslo.traffic.kstamps.SOURCES``; ``user`` when unrecorded)."""
    return meta.get("timestamps", "user")


def timestamps_missing(meta: dict) -> int:
    """Requests of a set whose kernel send or receive stamp did not arrive (their user-space time stands in)."""
    return sum(meta.get(k, 0) for k in ("kernel_tx_missing", "kernel_rx_missing"))


def from_user_rows(rows: np.ndarray) -> np.ndarray:
    """``USER_DTYPE`` rows as ``SAMPLE_DTYPE`` rows: the user-space fields are send_ns and recv_ns."""
    out = np.empty(len(rows), dtype=SAMPLE_DTYPE)
    for name in USER_DTYPE.names:
        out[name] = rows[name]
    for app, twin in APP_FIELDS.items():
        out[app] = rows[twin]
    return out


def empty(n: int) -> np.ndarray:
    """n rows with every 'unknown' field set to -1 and counters to 0."""
    rows = np.zeros(n, dtype=SAMPLE_DTYPE)
    for name in ("recv_ns", "srv_rx_ns", "srv_tx_ns", "tos_srv", "tos_cli", "srv_seen", "arrival",
                 "send_app_ns", "recv_app_ns"):
        rows[name] = -1
    rows["seq"] = np.arange(n)
    return rows


CHUNK_ROWS = 1 << 18        # rows per compact chunk (about 2.5 MB of offsets at most)


class SampleSet:
    """Raw samples of one probe run plus what describes it (protocol, endpoints, clock, sizes...).

    Held either as structured ``rows`` (what probes fill in place; 89 bytes per request) or as
    compact chunks (``netslo.stats.compact``; what files, streamed runs and the analysis use, a few bytes
    per request). Each form is derived from the other on demand and exactly: ``rows`` of a compact
    set is built (and then kept) on first use, ``chunks()`` of a rows set is encoded on each call so
    edits to ``rows`` are always seen."""

    def __init__(self, rows: np.ndarray | None = None, meta: dict | None = None, *, chunks=None):
        if (rows is None) == (chunks is None):
            raise ValueError("SampleSet needs rows or chunks")
        self._rows = rows
        self._chunks = list(chunks) if chunks is not None else None
        self.meta = {} if meta is None else meta

    @property
    def rows(self) -> np.ndarray:
        """Structured rows (``SAMPLE_DTYPE``); for a compact set built here, then the set's truth."""
        if self._rows is None:
            self._rows = compact.rows_of(self._chunks, SAMPLE_DTYPE)
            self._chunks = None
        return self._rows

    @rows.setter
    def rows(self, value: np.ndarray) -> None:
        self._rows, self._chunks = value, None

    def chunks(self) -> list:
        """The samples as compact chunks of at most ``CHUNK_ROWS`` rows."""
        if self._chunks is not None:
            return self._chunks
        return _encode_blocks(self._rows[i:i + CHUNK_ROWS] for i in range(0, len(self._rows), CHUNK_ROWS))

    def column(self, name: str) -> np.ndarray:
        """One field of every row (int64, -1 = unknown) without building the structured rows."""
        if self._rows is not None:
            return self._rows[name].astype(np.int64)
        parts = [c.values(name) for c in self._chunks]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def select(self, mask: np.ndarray) -> "SampleSet":
        """The rows where ``mask`` (one bool per row) is True, same metadata. A compact set is
        decoded and encoded again one chunk at a time: a soak's millions of rows never all at once."""
        meta = dict(self.meta)
        if "per_row" in meta:
            meta["per_row"] = {k: np.asarray(v)[mask].tolist() for k, v in meta["per_row"].items()}
        if self._chunks is None:
            return SampleSet(self._rows[mask], meta)
        ends = np.cumsum([c.rows for c in self._chunks], dtype=np.int64)
        out = _encode_blocks(c.to_rows(SAMPLE_DTYPE)[mask[end - c.rows:end]] for c, end in zip(self._chunks, ends))
        return SampleSet(meta=meta, chunks=out) if out else SampleSet(empty(0), meta)

    def __len__(self) -> int:
        if self._rows is not None:
            return len(self._rows)
        return sum(c.rows for c in self._chunks)

    # ---- serialisation: npz of compact chunks + JSON metadata (netslo.stats.sample_file) -----------
    def to_bytes(self) -> bytes:
        return sample_file.to_bytes(self.chunks(), self.meta)

    @classmethod
    def from_bytes(cls, data: bytes) -> "SampleSet":
        return cls.read(io.BytesIO(data))

    @classmethod
    def read(cls, source) -> "SampleSet":
        """A set from a path or binary file object in either file format."""
        chunks, rows, meta = sample_file.read(source)
        if rows is None:
            return cls(meta=meta, chunks=chunks)
        if rows.dtype == USER_DTYPE:
            rows = from_user_rows(rows)
        if rows.dtype != SAMPLE_DTYPE:
            raise ValueError(f"samples: dtype {rows.dtype} — expected netslo SAMPLE_DTYPE")
        return cls(rows, meta)

    def save(self, path) -> None:
        with open(path, "wb") as f:
            sample_file.write(f, self.chunks(), self.meta)

    @classmethod
    def load(cls, path) -> "SampleSet":
        return cls.read(path)

    def to_csv(self) -> str:
        """All rows as CSV with a header line (times in ns, -1 = unknown)."""
        names = SAMPLE_DTYPE.names
        out = io.StringIO()
        out.write(",".join(names) + "\n")
        cols = [self.rows[n].astype(np.int64) for n in names]
        np.savetxt(out, np.column_stack(cols) if len(self.rows) else np.empty((0, len(names))),
                   fmt="%d", delimiter=",")
        return out.getvalue()

    @classmethod
    def concat(cls, parts: list["SampleSet"]) -> "SampleSet":
        """Join runs of one scenario: seq and arrival are renumbered so they stay unique."""
        if not parts:
            raise ValueError("concat needs at least one SampleSet")
        meta = dict(parts[0].meta)
        meta["runs"] = len(parts)
        if "per_row" in meta:
            meta["per_row"] = {k: [x for p in parts for x in p.meta.get("per_row", {}).get(k, [-1] * len(p))]
                               for k in meta["per_row"]}
        if all(p._chunks is not None and _concat_by_shift(p._chunks) for p in parts):
            chunks, offset, arrival_offset = [], 0, 0
            for p in parts:
                for c in p._chunks:
                    chunks.append(c.shifted(offset, arrival_offset))
                offset += len(p)
                arrival_offset += sum(c.count("arrival") for c in p._chunks)
            return cls(meta=meta, chunks=chunks)
        chunks, offset, arrival_offset = [], 0, 0
        for p in parts:
            r = p.rows.copy()
            r["seq"] += offset
            got = r["arrival"] >= 0
            r["arrival"][got] += arrival_offset
            offset += len(r)
            arrival_offset += int(got.sum())
            chunks.append(r)
        return cls(np.concatenate(chunks), meta)


def _concat_by_shift(chunks) -> bool:
    """Every seq is known and every known arrival is >= 0 (and both far from overflowing), so
    shifting chunks renumbers them exactly like adding offsets to the rows would."""
    def small(c):
        return c.lo is None or (0 <= c.lo and c.hi < 2**62)
    return all(c.columns["seq"].everywhere and small(c.columns["seq"]) and small(c.columns["arrival"])
               for c in chunks)


def _encode_blocks(blocks) -> list:
    """Compact chunks of consecutive row blocks (empty ones skipped): each chunk's first row index and
    the arrival ranks of the chunks before it carried on, as one encoding of all the rows would."""
    out, start, ranks = [], 0, 0
    for rows in blocks:
        if len(rows):
            out.append(compact.encode(rows, start=start, rank_start=ranks))
            start += len(rows)
            ranks += out[-1].count("arrival")
    return out
