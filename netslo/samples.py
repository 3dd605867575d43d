"""The one sample record: one row per request a probe scheduled, raw and exact.

All times are integers in nanoseconds of ``CLOCK_MONOTONIC`` of the host kernel. In the embedded
(netns) provider and on one kind node every pod shares that clock, so one-way delays are exact;
across machines only RTT (one clock: the client's) is meaningful and ``meta['shared_clock']`` is False.

Fields (``-1`` = unknown / did not happen):
  seq          request sequence number, 0..n-1 in schedule order
  sched_ns     when the open-loop schedule wanted the request sent
  send_ns      when the client started sending it (timer error = send_ns - sched_ns)
  recv_ns      when the client had the full matching response; -1 = lost / failed
  srv_rx_ns    when the responder had the full request
  srv_tx_ns    when the responder started sending the response
  req_bytes    request payload size (bytes, application layer)
  resp_bytes   response payload size received (bytes)
  tos_sent     IP TOS byte the client set on the request
  tos_srv      TOS byte the responder saw on the request (IP_RECVTOS), -1 unknown
  tos_cli      TOS byte the client saw on the response, -1 unknown
  srv_seen     1 the responder got the request, 0 it did not, -1 unknown (splits loss up/down)
  arrival      index of this response in client arrival order, -1 if none (reordering)
  dups         extra copies of the response the client received (duplicates)
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np

SAMPLE_DTYPE = np.dtype([
    ("seq", "<i8"), ("sched_ns", "<i8"), ("send_ns", "<i8"), ("recv_ns", "<i8"),
    ("srv_rx_ns", "<i8"), ("srv_tx_ns", "<i8"),
    ("req_bytes", "<u4"), ("resp_bytes", "<u4"),
    ("tos_sent", "<i2"), ("tos_srv", "<i2"), ("tos_cli", "<i2"),
    ("srv_seen", "<i1"), ("arrival", "<i8"), ("dups", "<u2"),
])


def empty(n: int) -> np.ndarray:
    """n rows with every 'unknown' field set to -1 and counters to 0."""
    rows = np.zeros(n, dtype=SAMPLE_DTYPE)
    for name in ("recv_ns", "srv_rx_ns", "srv_tx_ns", "tos_srv", "tos_cli", "srv_seen", "arrival"):
        rows[name] = -1
    rows["seq"] = np.arange(n)
    return rows


@dataclass
class SampleSet:
    """Raw samples of one probe run plus what describes it (protocol, endpoints, clock, sizes...)."""

    rows: np.ndarray
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    # ---- serialisation: npz with the array and a JSON metadata blob --------------------------
    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, rows=self.rows, meta=np.frombuffer(
            json.dumps(self.meta, sort_keys=True).encode(), dtype=np.uint8))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "SampleSet":
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            rows = z["rows"]
            meta = json.loads(z["meta"].tobytes().decode())
        if rows.dtype != SAMPLE_DTYPE:
            raise ValueError(f"samples: dtype {rows.dtype} — expected netslo SAMPLE_DTYPE")
        return cls(rows, meta)

    def save(self, path) -> None:
        with open(path, "wb") as f:
            f.write(self.to_bytes())

    @classmethod
    def load(cls, path) -> "SampleSet":
        with open(path, "rb") as f:
            return cls.from_bytes(f.read())

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
        chunks, offset, arrival_offset = [], 0, 0
        for p in parts:
            r = p.rows.copy()
            r["seq"] += offset
            got = r["arrival"] >= 0
            r["arrival"][got] += arrival_offset
            offset += len(r)
            arrival_offset += int(got.sum())
            chunks.append(r)
        meta = dict(parts[0].meta)
        meta["runs"] = len(parts)
        return cls(np.concatenate(chunks), meta)
