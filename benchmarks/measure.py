"""Measurements that need an interpreter of their own: peak RSS above the baseline after imports.

    python -m benchmarks.measure analyze FILE      load a raw-samples file and analyse it
    python -m benchmarks.measure stream N FILE     the synthetic soak writer: N requests through
                                                   netslo.stats.stream.RowStream into a ChunkWriter
    python -m benchmarks.measure whole N           the same N synthetic requests held whole as
                                                   structured rows (73 B each), then analysed

Each prints one JSON line: seconds, ``peak_mb`` (peak RSS minus the RSS after the imports) and, for
analyses, every metric. Only numpy, scipy and netslo are imported before the baseline, so the
baseline is the interpreter a probe or the analysis runs in. Peaks are the kernel's high-water mark
(VmHWM), reset after the imports (``/proc/self/clear_refs``); ``ru_maxrss`` would not do: Linux
keeps it across exec, so a child of a big pytest process starts with the parent's peak.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy
import scipy.signal
import scipy.stats

from benchmarks.synthetic_samples import synthetic_rows, synthetic_stream
from netslo.stats import compact, sample_file
from netslo.stats.analysis import analyze
from netslo.stats.samples import SampleSet


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


with open("/proc/self/clear_refs", "w") as _f:    # peak RSS := RSS now (Linux >= 4.0)
    _f.write("5")
BASELINE_MB = _status_mb("VmHWM")
BASELINE_MODULES = (numpy, scipy.signal, scipy.stats)   # imported before the baseline on purpose


def peak_mb() -> float:
    """Peak RSS above the baseline so far (MB)."""
    return _status_mb("VmHWM") - BASELINE_MB


def rss_mb() -> float:
    """RSS now above the baseline (MB)."""
    return _status_mb("VmRSS") - BASELINE_MB


def _analysis(s: SampleSet) -> dict:
    t = time.perf_counter()
    a = analyze(s)
    return {"analyze_s": time.perf_counter() - t, "peak_mb": peak_mb(),
            "metrics": {k: e.as_dict() for k, e in a.metrics.items()}, "counts": a.counts}


def analyze_file(path: str) -> dict:
    t = time.perf_counter()
    s = SampleSet.load(path)
    out = {"n": len(s), "load_s": time.perf_counter() - t, "baseline_mb": BASELINE_MB, "after_load_mb": peak_mb(),
           "memory_bytes_per_request": compact.nbytes(s.chunks()) / max(len(s), 1),
           "file_bytes_per_request": os.path.getsize(path) / max(len(s), 1)}
    out.update(_analysis(s))
    return out


class _RssSampler:
    """A ChunkWriter that also notes the RSS each time a chunk is written."""

    def __init__(self, writer):
        self.writer, self.rss = writer, []

    def write(self, chunk) -> None:
        self.writer.write(chunk)
        self.rss.append(rss_mb())


def stream(n: int, path: str) -> dict:
    t = time.perf_counter()
    with open(path, "wb") as f:
        w = sample_file.ChunkWriter(f)
        sampler = _RssSampler(w)
        meta = synthetic_stream(n, sampler).meta
        w.close(meta)
    return {"n": n, "seconds": time.perf_counter() - t, "baseline_mb": BASELINE_MB, "peak_mb": peak_mb(),
            "rss_mb_per_chunk": [round(x, 1) for x in sampler.rss], "file_bytes": os.path.getsize(path)}


def whole(n: int) -> dict:
    s = SampleSet(synthetic_rows(0, n), {"protocol": "udp", "shared_clock": True, "synthetic": True})
    return {"n": n, **_analysis(s)}


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    result = {"analyze": lambda: analyze_file(args[0]), "stream": lambda: stream(int(args[0]), args[1]),
              "whole": lambda: whole(int(args[0]))}[cmd]()
    print(json.dumps(result))
