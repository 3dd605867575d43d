"""A 20 M-request soak through the streaming path, written by a fast synthetic writer (numbers
printed; nothing asserted about time or memory, only that the results are the same).

    python -m pytest benchmarks/bench_soak_synthetic_stream.py -s

No network: ``benchmarks.synthetic_samples.synthetic_stream`` fills ``netslo.stats.stream.RowStream``
(the rows a udp/tcp probe holds while they can change) 65 536 rows at a time, its clock being the
synthetic send times (a request every 100 µs: 20 M requests = 33 min of a 10 000/s soak), and the
final blocks go to ``netslo.stats.sample_file.ChunkWriter`` on disk, as ``python -m netslo.agent probe
... --out FILE`` does. Each step runs in an interpreter of its own (``benchmarks.measure``):

  stream    the writer; peak RSS above the interpreter after imports, and the RSS at every chunk
  analyze   the streamed file loaded and analysed
  whole     the same 20 M rows held whole (73 B each, 1.5 GB) and analysed, the non-streamed path
The streamed analysis must equal the whole one in every metric and count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOAK_REQUESTS = 20_000_000


def measure(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.measure", *args], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_soak_synthetic_stream_20m(benchmark, tmp_path):
    path = str(tmp_path / "soak.npz")
    w = benchmark.pedantic(measure, args=("stream", str(SOAK_REQUESTS), path), rounds=1, iterations=1)
    rss = w["rss_mb_per_chunk"]
    print(f"\nsynthetic writer -> RowStream -> ChunkWriter: {SOAK_REQUESTS:,} requests in {w['seconds']:.1f} s, "
          f"peak RSS {w['peak_mb']:.1f} MB above baseline ({w['baseline_mb']:.0f} MB); RSS after chunk 1 / "
          f"{len(rss) // 2} / {len(rss)} (last): {rss[0]:.1f} / {rss[len(rss) // 2 - 1]:.1f} / {rss[-1]:.1f} MB, "
          f"highest {max(rss):.1f} MB; "
          f"file {w['file_bytes'] / SOAK_REQUESTS:.2f} B/request")
    streamed = measure("analyze", path)
    print(f"analyze streamed file: {streamed['analyze_s']:.2f} s, peak RSS {streamed['peak_mb']:.1f} MB above "
          f"baseline ({streamed['memory_bytes_per_request']:.2f} B/request in memory)")
    whole = measure("whole", str(SOAK_REQUESTS))
    print(f"analyze the same rows held whole: {whole['analyze_s']:.2f} s, peak RSS {whole['peak_mb']:.1f} MB")
    benchmark.extra_info.update(writer_peak_mb=w["peak_mb"], writer_rss_last_mb=rss[-1],
                                analyze_streamed_s=streamed["analyze_s"], analyze_streamed_peak_mb=streamed["peak_mb"])
    assert streamed["counts"] == whole["counts"] and streamed["counts"]["sent"] == SOAK_REQUESTS
    assert streamed["metrics"] == whole["metrics"]
    print("streamed analysis == whole analysis: every metric and count")
