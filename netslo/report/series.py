"""The raw per-sample series behind each statistic of ``stats.analyze`` (seconds), for plots and
regression tests that need samples, not summaries.

``series(samples, "rtt")`` returns exactly the values whose nearest-rank percentiles are
``analyze(samples).metrics["rtt.p99"]`` etc. Names: rtt, rtt_app, owd_up, owd_down, ipdv, ipdv_app,
ipdv_up, ipdv_down, pdv, server_time, timer_error (delays, seconds; ipdv* are absolute values) and loss
(0/1 per request); ``round_trip`` is rtt with the responder's residence in it (``netslo.stats.delays``).
A dns probe's set names its lookup time ``dns`` and its failed lookups ``dns.fail``: the same values
as its rtt and loss (``stats._dns``).
"""

from __future__ import annotations

import numpy as np

from netslo.slo.spec import FRACTION_METRICS
from netslo.stats import delays
from netslo.stats.delays import ChunkDelays
from netslo.stats.order_stats import seconds
from netslo.stats.samples import SampleSet

NS = 1e-9
DELAY_SERIES = ("rtt", "rtt_app", "owd_up", "owd_down", "ipdv", "ipdv_app", "ipdv_up", "ipdv_down", "pdv",
                "server_time", "timer_error")
ALIASES = {"dns": "rtt", "dns.fail": "loss"}   # another probe's name for the same series


def _joined(parts, dtype) -> np.ndarray:
    parts = list(parts)
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def received(samples: SampleSet) -> np.ndarray:
    """Boolean mask of requests whose response arrived."""
    return _joined((ChunkDelays(ch).got for ch in samples.chunks()), bool)


def rtt_by_seq(samples: SampleSet) -> np.ndarray:
    """RTT (s) per request in schedule order, NaN where lost."""
    def chunk(ch):
        cd = ChunkDelays(ch)
        out = np.full(ch.rows, np.nan)
        out[cd.got] = seconds(cd.series("rtt"))
        return out
    return _joined(map(chunk, samples.chunks()), np.float64)


def series(samples: SampleSet, name: str) -> np.ndarray:
    """The raw values of one series (seconds; 'loss' gives 1.0 per lost request, 0.0 otherwise).

    Returns an empty array when the series cannot be measured (e.g. one-way delay without a shared
    clock). Raises ValueError for an unknown name. Read from the compact chunks (no 73-byte rows)."""
    name = ALIASES.get(name, name)
    chunks = samples.chunks()
    if name == "loss":
        return (~received(samples)).astype(np.float64)
    if name in ("owd_up", "owd_down", "ipdv_up", "ipdv_down") and not samples.meta.get("shared_clock", False):
        return np.empty(0)
    if name in delays.SERIES:
        return delays.series_seconds(samples, name)
    if name in ("ipdv", "ipdv_app", "ipdv_up", "ipdv_down"):
        of = {"ipdv": "rtt", "ipdv_app": "rtt_app", "ipdv_up": "owd_up", "ipdv_down": "owd_down"}[name]
        return _joined((delays.ipdv_seconds(x, pair) for x, pair in delays.pairs(chunks, of)), np.float64)
    if name == "pdv":
        rtt = series(samples, "rtt")
        return rtt - rtt.min() if len(rtt) else rtt
    raise ValueError(f"series: value {name!r} — expected one of {', '.join(DELAY_SERIES + ('loss',))}")


def split_metric(metric: str) -> tuple[str, float | None]:
    """'rtt.p99' -> ('rtt', 99.0); 'loss' -> ('loss', None); 'ipdv.p99.9' -> ('ipdv', 99.9);
    'dns.fail' -> ('dns.fail', None)."""
    if "." not in metric or metric in FRACTION_METRICS:
        return metric, None
    name, stat = metric.split(".", 1)
    if not stat.startswith("p"):
        raise ValueError(f"metric: value {metric!r} — expected <series>.p<percentile> or loss")
    return name, float(stat[1:])
