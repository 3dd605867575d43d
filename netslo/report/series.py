"""The raw per-sample series behind each statistic of ``stats.analyze`` (seconds), for plots and
regression tests that need samples, not summaries.

``series(samples, "rtt")`` returns exactly the values whose nearest-rank percentiles are
``analyze(samples).metrics["rtt.p99"]`` etc. Names: rtt, owd_up, owd_down, ipdv, ipdv_up, ipdv_down,
pdv, server_time, timer_error (delays, seconds; ipdv* are absolute values) and loss (0/1 per request).
"""

from __future__ import annotations

import numpy as np

from ..samples import SampleSet
from ..stats import ipdv, pdv

NS = 1e-9
DELAY_SERIES = ("rtt", "owd_up", "owd_down", "ipdv", "ipdv_up", "ipdv_down", "pdv", "server_time",
                "timer_error")


def received(samples: SampleSet) -> np.ndarray:
    """Boolean mask of requests whose response arrived."""
    return samples.rows["recv_ns"] >= 0


def rtt_by_seq(samples: SampleSet) -> np.ndarray:
    """RTT (s) per request in schedule order, NaN where lost."""
    r = samples.rows
    return np.where(received(samples), (r["recv_ns"] - r["send_ns"]) * NS, np.nan)


def _server_mask(samples: SampleSet) -> np.ndarray:
    r = samples.rows
    return received(samples) & (r["srv_rx_ns"] >= 0) & (r["srv_tx_ns"] >= 0)


def series(samples: SampleSet, name: str) -> np.ndarray:
    """The raw values of one series (seconds; 'loss' gives 1.0 per lost request, 0.0 otherwise).

    Returns an empty array when the series cannot be measured (e.g. one-way delay without a shared
    clock). Raises ValueError for an unknown name."""
    r = samples.rows
    got = received(samples)
    if name == "rtt":
        return rtt_by_seq(samples)[got]
    if name == "loss":
        return (~got).astype(np.float64)
    if name == "ipdv":
        return np.abs(ipdv(rtt_by_seq(samples)))
    if name == "pdv":
        return pdv(rtt_by_seq(samples)[got])
    if name == "timer_error":
        return ((r["send_ns"] - r["sched_ns"]) * NS)[r["send_ns"] >= 0]
    srv = _server_mask(samples)
    if name == "server_time":
        return ((r["srv_tx_ns"] - r["srv_rx_ns"]) * NS)[srv]
    if name in ("owd_up", "owd_down", "ipdv_up", "ipdv_down"):
        if not samples.meta.get("shared_clock", False):
            return np.empty(0)
        up = np.where(srv, (r["srv_rx_ns"] - r["send_ns"]) * NS, np.nan)
        down = np.where(srv, (r["recv_ns"] - r["srv_tx_ns"]) * NS, np.nan)
        d = up if name.endswith("up") else down
        return np.abs(ipdv(d)) if name.startswith("ipdv") else d[srv]
    raise ValueError(f"series: value {name!r} — expected one of {', '.join(DELAY_SERIES + ('loss',))}")


def split_metric(metric: str) -> tuple[str, float | None]:
    """'rtt.p99' -> ('rtt', 99.0); 'loss' -> ('loss', None); 'ipdv.p99.9' -> ('ipdv', 99.9)."""
    if "." not in metric:
        return metric, None
    name, stat = metric.split(".", 1)
    if not stat.startswith("p"):
        raise ValueError(f"metric: value {metric!r} — expected <series>.p<percentile> or loss")
    return name, float(stat[1:])
