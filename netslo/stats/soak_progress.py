"""Live progress of a long (soak) probe run: one line per chunk of requests as it is written.

Each line holds the exact statistics of that chunk's requests (the point estimates ``stats.analyze``
gives for the chunk, no sketch, so nothing to bound): which requests, RTT P50/P99, loss, and the
totals so far. A chunk is ``netslo.stats.stream.BLOCK_ROWS`` requests (262 144: 52 s of a 5 000/s soak).
Point estimates only (no confidence intervals): the agent image needs no scipy for them.
"""

from __future__ import annotations

import sys

import numpy as np

from netslo.core.units import format_duration, format_percent
from netslo.stats.delays import ChunkDelays
from netslo.stats.order_stats import nearest_rank, seconds


def line(chunk, sent_before: int, lost_before: int) -> tuple[str, int]:
    """(the progress line of ``chunk``, its lost requests)."""
    delays = ChunkDelays(chunk)
    lost = chunk.rows - int(delays.got.sum())
    sent = sent_before + chunk.rows
    rtt = np.sort(seconds(delays.series("rtt")))
    rtt = (f"rtt p50 {format_duration(nearest_rank(rtt, 50))} p99 {format_duration(nearest_rank(rtt, 99))}"
           if len(rtt) else "no answers")
    return (f"requests {chunk.start}-{chunk.start + chunk.rows - 1}: {rtt}, loss {format_percent(lost / chunk.rows)}"
            f" | so far {sent} sent, loss {format_percent((lost_before + lost) / sent)}"), lost


class ProgressSink:
    """Passes chunks on to ``sink`` and prints each one's progress line to ``out`` (stderr)."""

    def __init__(self, sink, out=None, prefix: str = "netslo.agent: "):
        self.sink, self.out, self.prefix = sink, out, prefix
        self.sent = self.lost = 0

    @property
    def chunks(self):
        """The chunks the wrapped sink keeps in memory (none for a file writer)."""
        return getattr(self.sink, "chunks", [])

    def write(self, chunk) -> None:
        self.sink.write(chunk)
        text, lost = line(chunk, self.sent, self.lost)
        self.sent += chunk.rows
        self.lost += lost
        print(self.prefix + text, file=self.out or sys.stderr, flush=True)
