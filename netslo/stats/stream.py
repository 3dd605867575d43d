"""The rows of a running probe, held only while they can still change.

A probe fills rows by seq (``stream[seq]["recv_ns"] = t``) as it did with ``samples.empty(n)``.
Rows live in blocks of ``block`` consecutive seqs. Once every request of a block was sent and the
newest of them more than ``settle_ns`` ago (the probe's ``--wait``, which the last request of any
run gets too), the block is final: it is encoded (``netslo.stats.compact``, a few bytes per request) and
handed to ``sink.write`` (a ``sample_file.ChunkWriter`` streams it to disk) and its rows are
dropped, by a writer thread so the probe's sending never pauses for it. A soak of hours therefore
holds at most a few blocks of rows, whatever its length.
A response for a request whose block was written counts in ``late`` (meta ``late_responses``) and
changes nothing: in a streamed run a request is lost when it is not answered within ``--wait``.
"""

from __future__ import annotations

import queue
import sys
import threading

import numpy as np

from netslo.stats import compact
from netslo.stats.samples import SampleSet, empty

RETIRE_EVERY = 1024         # requests a probe sends between checks for final blocks
BLOCK_ROWS = 1 << 16        # rows per block (and per chunk written): 4.8 MB of rows, ~10 ms to encode
QUEUED_BLOCKS = 1           # final blocks waiting for the writer thread at most (then the probe waits)
SWITCH_INTERVAL_S = 0.0002  # while the writer thread runs: longest the probe waits for the GIL


class ChunkList:
    """A sink that keeps the encoded chunks in memory."""

    def __init__(self):
        self.chunks: list = []

    def write(self, chunk) -> None:
        self.chunks.append(chunk)


class RowStream:
    """Rows of one run of ``n`` requests; see the module doc. ``defaults``: field -> value set on
    every row when its block is created (e.g. ``req_bytes``, ``tos_sent``). ``keep_all``: write
    nothing before ``finish`` (a run that fills a column at its very end)."""

    def __init__(self, n: int, *, settle_ns: int, sink=None, defaults: dict | None = None,
                 keep_all: bool = False, block: int | None = None, background: bool = True):
        self.n = n
        self.background = background
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.settle_ns = settle_ns
        self.sink = ChunkList() if sink is None else sink
        self.defaults = dict(defaults or {})
        self.keep_all = keep_all
        self.block = block or BLOCK_ROWS
        self.blocks: dict[int, np.ndarray] = {}
        self.written = 0          # blocks handed to the sink (all seqs below written * block)
        self.ranks = 0            # known arrivals in the written blocks
        self.late = 0
        if n > 0:
            self._rows(0)         # made now, not inside the first request's timestamps

    def _rows(self, b: int) -> np.ndarray:
        rows = self.blocks.get(b)
        if rows is None:
            lo = b * self.block
            rows = empty(min(self.block, self.n - lo))
            rows["seq"] += lo
            for name, value in self.defaults.items():
                rows[name] = value
            self.blocks[b] = rows
        return rows

    def __getitem__(self, seq: int):
        """The row of ``seq`` (a numpy record, writable in place), or None once it was written."""
        b = seq // self.block
        if b < self.written:
            self.late += 1
            return None
        return self._rows(b)[seq - b * self.block]

    def __len__(self) -> int:
        return self.n

    def rows_between(self, lo: int, hi: int) -> np.ndarray:
        """Writable rows of seqs lo..hi-1, which must lie in one block not yet written (for a
        writer that fills many rows at once)."""
        b = lo // self.block
        if b < self.written or (hi - 1) // self.block != b or not 0 <= lo < hi <= self.n:
            raise ValueError(f"rows_between({lo}, {hi}): not inside one unwritten block of {self.block}")
        return self._rows(b)[lo - b * self.block:hi - b * self.block]

    def retire(self, now_ns: int) -> int:
        """Write every leading block that is final at ``now_ns``; returns how many were written."""
        done = 0
        while not self.keep_all and self.written * self.block < self.n:
            rows = self.blocks.get(self.written)
            if rows is None or rows["send_ns"][-1] <= 0 or now_ns - rows["send_ns"][-1] < self.settle_ns:
                break
            self._write(self.written)
            done += 1
        return done

    def _write(self, b: int) -> None:
        rows = self._rows(b)
        job = (rows, b * self.block, self.ranks)
        self.ranks += int(np.count_nonzero(rows["arrival"] != compact.UNKNOWN))
        del self.blocks[b]
        self.written = b + 1
        if not self.background:
            self._encode(*job)
            return
        if self._thread is None:
            self._switch = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)   # the probe's thread gets the GIL back soon
            self._queue = queue.Queue(maxsize=QUEUED_BLOCKS)
            self._thread = threading.Thread(target=self._work, name="netslo-row-stream", daemon=True)
            self._thread.start()
        self._queue.put(job)

    def _encode(self, rows: np.ndarray, start: int, ranks: int) -> None:
        self.sink.write(compact.encode(rows, start=start, rank_start=ranks))

    def _work(self) -> None:
        """The writer thread: encode and hand over blocks in order, so a probe never stops sending
        for a block's encoding."""
        while (job := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._encode(*job)
                except BaseException as e:  # reported by finish()
                    self._error = e

    def set_column(self, name: str, values: np.ndarray) -> None:
        """Assign a whole column; only before anything was written."""
        if self.written:
            raise RuntimeError("RowStream.set_column after blocks were written")
        for b in range(self._count()):
            lo = b * self.block
            rows = self._rows(b)
            rows[name] = values[lo:lo + len(rows)]

    def _count(self) -> int:
        return -(-self.n // self.block)

    def finish(self, meta: dict) -> SampleSet:
        """Write every remaining block. Returns the set of what the sink keeps in memory (all of
        it for the default in-memory sink; metadata only for a file writer)."""
        streamed = self.written > 0
        for b in range(self.written, self._count()):
            self._write(b)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
            sys.setswitchinterval(self._switch)
        if self._error is not None:
            raise self._error
        if streamed:
            meta = dict(meta, late_responses=self.late)
        return SampleSet(meta=meta, chunks=getattr(self.sink, "chunks", []))
