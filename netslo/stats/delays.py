"""The per-request delays of ``netslo.stats.analysis`` in integer ns, read straight from compact chunks.

For one chunk (``netslo.stats.compact.Chunk``), ``ChunkDelays`` gives the masks and int64 values that
``stats.analyze`` defines on raw rows, without building the rows:

  got          recv_ns >= 0 (the response arrived)
  srv          got and srv_rx_ns >= 0 and srv_tx_ns >= 0 (the responder's timestamps are known)
  sent         send_ns >= 0
  round_trip   recv_ns - send_ns of the got rows             (the stored recv_ns offsets themselves)
  rtt          round_trip - server_time of the got rows      (round_trip where the row is not srv:
                                                             the responder's residence left out, as irtt does)
  rtt_app      recv_app_ns - send_app_ns of the got rows     (user space to user space)
  owd_up       srv_rx_ns - send_ns of the srv rows
  server_time  srv_tx_ns - srv_rx_ns of the srv rows
  owd_down     recv_ns - srv_tx_ns of the srv rows
  timer_error  send_app_ns - sched_ns of the sent rows
A user-space field (``samples.APP_FIELDS``) left unknown (-1) by a probe that records one clock point
per event reads as its twin (send_ns, recv_ns): the same clock point there.
Values are in row order, int64 with the wrap-around of numpy's int64 arithmetic (as on raw rows).
``bounds`` gives, from the chunk headers alone, an interval holding every value of a series over
a whole set, so a series can be collected into the narrowest type before it is read.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from netslo.stats.compact import ADDED, Chunk
from netslo.stats.order_stats import seconds

INT64 = (-2**63, 2**63 - 1)
# series -> (field, reference field): the value is field - reference, on the rows of the mask
DIFFERENCES = {"round_trip": ("recv_ns", "send_ns", "got"), "rtt_app": ("recv_app_ns", "send_app_ns", "got"),
               "owd_up": ("srv_rx_ns", "send_ns", "srv"), "server_time": ("srv_tx_ns", "srv_rx_ns", "srv"),
               "timer_error": ("send_app_ns", "sched_ns", "sent")}
SERIES = ("rtt", "round_trip", "rtt_app", "owd_up", "owd_down", "server_time", "timer_error")
MASKS = {"rtt": "got", "owd_down": "srv"}     # the derived series' rows (the others': DIFFERENCES)


class ChunkDelays:
    """Masks and delays (int64 ns) of one chunk; each computed once, on first use."""

    def __init__(self, chunk: Chunk):
        self.chunk = chunk
        self._fields: dict = {}
        self._present: dict = {}  # field -> its presence mask, unpacked once (one object per field)
        self._on: dict = {}       # (series, mask's name) -> its values: a chunk's series share parts

    def present(self, name: str) -> np.ndarray:
        """``Chunk.present(name)``, unpacked once: a mask derived from it is then the same object."""
        if name not in self._present:
            self._present[name] = self.chunk.present(name)
        return self._present[name]

    def nonneg(self, name: str) -> np.ndarray:
        """Rows whose ``name`` is >= 0 (from the presence bits when no known value is negative)."""
        c = self.chunk.columns[name]
        if c.lo is None or c.lo >= 0:
            return self.present(name)
        return self.chunk.values(name) >= 0

    @cached_property
    def got(self) -> np.ndarray:
        return self.nonneg("recv_ns")

    @cached_property
    def srv(self) -> np.ndarray:
        return self.got & self.nonneg("srv_rx_ns") & self.nonneg("srv_tx_ns")

    @cached_property
    def sent(self) -> np.ndarray:
        return self.nonneg("send_ns")

    def value(self, name: str) -> np.ndarray:
        """Every row's ``name`` (int64); a user-space field where unknown: its twin's."""
        v = self.chunk.values(name)
        if name in ADDED:
            v = np.where(v == -1, self.chunk.values(ADDED[name]), v)
        return v

    def _unstamped(self, name: str) -> bool:
        """A user-space field no row of the chunk has (so its twin stands in everywhere)."""
        return name in ADDED and self.chunk.columns[name].lo is None

    def difference(self, name: str, ref: str, mask: np.ndarray) -> np.ndarray:
        """``name - ref`` on the rows of ``mask`` (a subset of the rows where ``name`` is known)."""
        ch = self.chunk
        if self._unstamped(name) and self._unstamped(ref):   # both stand in for their twins
            name, ref = ADDED[name], ADDED[ref]
        if name in ADDED or ref in ADDED:
            return (self.value(name) - self.value(ref))[mask]
        if ch.columns[name].ref != ref:
            return (ch.values(name) - ch.values(ref))[mask]
        rel, present = self._stored(name)
        return rel if mask is present or np.array_equal(mask, present) else rel[mask[present]]

    def _stored(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(relative values of the known rows, known-rows mask) of a field, decoded once."""
        if name not in self._fields:
            self._fields[name] = (self.chunk.relative(name), self.present(name))
        return self._fields[name]

    def series(self, name: str) -> np.ndarray:
        """Values of series ``name`` (one of ``SERIES``) on its mask's rows, in row order."""
        if name == "owd_down":   # (the cached parts are never written to: one new array, then in place)
            out = self.series_on("round_trip", self.srv) - self.series_on("owd_up", self.srv)
            out -= self.series_on("server_time", self.srv)
            return out
        if name == "rtt":
            round_trip = self.series_on("round_trip", self.got)
            srv = self.srv[self.got]
            if not srv.any():
                return round_trip
            if srv.all():           # every answered row has the responder's stamps
                return round_trip - self.series_on("server_time", self.srv)
            residence = np.zeros(len(round_trip), dtype=np.int64)
            residence[srv] = self.series_on("server_time", self.srv)
            return round_trip - residence
        return self.series_on(name, self.mask(name))

    def series_on(self, name: str, mask: np.ndarray) -> np.ndarray:
        key = (name, next((m for m in ("got", "srv", "sent") if mask is self.__dict__.get(m)), None))
        if key[1] is not None and key in self._on:
            return self._on[key]
        field, ref, _ = DIFFERENCES[name]
        out = self.difference(field, ref, mask)
        if key[1] is not None:
            self._on[key] = out
        return out

    def stored(self, name: str) -> tuple[int, int, np.ndarray | None, int] | None:
        """(base, span, offsets, count) when series ``name`` is exactly its field's stored offsets
        (stored relative to the series' reference, known on exactly the series' rows); else None."""
        if name not in DIFFERENCES:
            return None
        field, ref, _ = DIFFERENCES[name]
        c = self.chunk.columns[field]
        if field in ADDED or ref in ADDED or c.ref != ref or not np.array_equal(self.mask(name), self.present(field)):
            return None
        return c.base, c.span, c.offsets, self.chunk.count(field)

    def mask(self, name: str) -> np.ndarray:
        """Rows series ``name`` is defined on."""
        return getattr(self, MASKS.get(name) or DIFFERENCES[name][2])


def series_ns(chunks, name: str) -> np.ndarray:
    """Series ``name`` (one of ``SERIES``) over ``chunks`` joined: int64 ns, in row order."""
    parts = [ChunkDelays(ch).series(name) for ch in chunks]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def series_seconds(samples, name: str) -> np.ndarray:
    """Series ``name`` (one of ``SERIES``) of a whole ``SampleSet`` in seconds, in row order."""
    return seconds(series_ns(samples.chunks(), name))


def pairs(chunks, name: str):
    """Per chunk: (x, pair) where x is series ``name`` by row (int64; 0 where undefined) preceded by
    the previous chunk's last row, and pair[i] says rows i and i+1 of x both have the series: the
    consecutive requests ``stats.ipdv`` pairs."""
    prev_m = np.zeros(1, dtype=bool)
    prev_x = np.zeros(1, dtype=np.int64)
    for ch in chunks:
        if not ch.rows:
            continue
        cd = ChunkDelays(ch)
        mask = cd.mask(name)
        x = np.zeros(ch.rows + 1, dtype=np.int64)
        x[0] = prev_x[0]
        x[1:][mask] = cd.series(name)
        m = np.concatenate([prev_m, mask])
        prev_m, prev_x = mask[-1:], x[-1:]
        yield x, m[1:] & m[:-1]


def abs_ipdv_ns(x: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """|IPDV| of the pairs in integer ns: |x[i+1] - x[i]|, exact while the series spans less than
    2^63 ns (the differences of other rows may wrap; they are not pairs)."""
    k = np.diff(x)
    return np.abs(k, out=k)[pair]


def ipdv_seconds(x: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """|IPDV| of the pairs (s): ``abs_ipdv_ns`` in seconds as everywhere (``ns * 1e-9``)."""
    return seconds(abs_ipdv_ns(x, pair))


def _field_bounds(chunks, name: str, ref: str) -> tuple[int, int] | None:
    """Interval of ``name - ref`` over the known rows of every chunk, from the headers; None = empty."""
    lo, hi = None, None
    for ch in chunks:
        c = ch.columns[name]
        if c.lo is None:
            continue
        if c.ref != ref:
            return INT64
        lo = c.base if lo is None else min(lo, c.base)
        hi = c.base + c.span if hi is None else max(hi, c.base + c.span)
    return None if lo is None else (lo, hi)


def _app_delta(chunks, name: str) -> tuple[int, int]:
    """Interval of (user-space field ``name`` - its twin) over every row, 0 included (unknown rows)."""
    b = _field_bounds(chunks, name, ADDED[name]) if name in ADDED else None
    return (min(b[0], 0), max(b[1], 0)) if b is not None else (0, 0)


def bounds(chunks, name: str) -> tuple[int, int] | None:
    """An interval holding every value of series ``name`` over ``chunks`` (None: no value at all)."""
    field, ref, _ = DIFFERENCES.get(name, (None, None, None))
    if field in ADDED or ref in ADDED:
        base = _field_bounds(chunks, ADDED.get(field, field), ADDED.get(ref, ref))
        if base is None:
            return None
        (f0, f1), (r0, r1) = _app_delta(chunks, field), _app_delta(chunks, ref)
        lo, hi = base[0] + f0 - r1, base[1] + f1 - r0
        return (lo, hi) if INT64[0] <= lo and hi <= INT64[1] else INT64
    if name == "rtt":
        b, s = bounds(chunks, "round_trip"), bounds(chunks, "server_time")
        if b is None or s is None:
            return b
        lo, hi = min(b[0], b[0] - s[1]), max(b[1], b[1] - s[0])
        return (lo, hi) if INT64[0] <= lo and hi <= INT64[1] else INT64
    if name != "owd_down":
        field, ref, _ = DIFFERENCES[name]
        b = _field_bounds(chunks, field, ref)
        return None if b is None else (max(b[0], INT64[0]), min(b[1], INT64[1]))
    parts = [bounds(chunks, s) for s in ("round_trip", "owd_up", "server_time")]
    if None in parts:
        return None
    (r0, r1), (u0, u1), (s0, s1) = parts
    lo, hi = r0 - u1 - s1, r1 - u0 - s0
    return (lo, hi) if INT64[0] <= lo and hi <= INT64[1] else INT64
