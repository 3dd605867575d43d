"""Canaries of a busier host: the sender's own timer error per run, and whether it explains a
delay regression (then reported as host noise, not failed)."""

from __future__ import annotations

import math

import numpy as np

from netslo.report import run_spread
from netslo.report.regression.blocks import nearest_rank
from netslo.report.regression.comparison import Comparison, by_session
from netslo.report.regression.decision import Policy
from netslo.report.regression.runs import Run
from netslo.report.series import split_metric


def host_noise(base_parts: list[np.ndarray], cur_parts: list[np.ndarray], policy: Policy) -> dict:
    """Sender timer error (s) of both runs and whether the current run's host was busier.

    The open-loop sender records how late each request left against its schedule: CPU contention on
    the client host, not the network. When its P50 or its P99 grew ``noise_ratio``-fold (and by at
    least ``noise_abs_p50`` / ``noise_abs_p99``), the host was busier during the current run, and a
    delay regression of that test is reported as host noise (not failed): repeat the run on a quieter
    runner to judge the network. With several baseline runs the baseline value is the median of
    the runs' values (a pooled P99 would be set by the noisiest baseline run)."""
    c = np.concatenate(cur_parts) if cur_parts else np.empty(0)
    out = {"noisier": False}
    for q, floor in ((50.0, policy.noise_abs_p50), (99.0, policy.noise_abs_p99)):
        per_run = [nearest_rank(p, q) for p in base_parts if len(p)]
        vb, vc = (float(np.median(per_run)) if per_run else math.nan), nearest_rank(c, q)
        out[f"p{q:g}"] = (vb, vc)
        if math.isfinite(vb) and math.isfinite(vc) and vc > policy.noise_ratio * vb and vc - vb >= floor:
            out["noisier"] = True
    return out


def spread_canary(base_parts: list[np.ndarray], cur_parts: list[np.ndarray]) -> dict:
    """run_spread.timer_canary on the timer-error P50 and P99 of each baseline run."""
    cur = np.concatenate(cur_parts) if cur_parts else np.empty(0)
    base = {q: [nearest_rank(p, q) for p in base_parts if len(p)] for q in (50.0, 99.0)}
    return run_spread.timer_canary(base, {q: nearest_rank(cur, q) for q in base})


def index_canary(timers: dict, baseline: Run, tests: list) -> dict:
    """timer_canary on the geometric mean over ``tests`` of the timer-error P50/P99, per run."""
    runs = by_session(baseline, {t: timers[t][0] for t in tests})
    base, cur = {}, {}
    for q in (50.0, 99.0):
        base[q] = [run_spread.geometric_index({t: nearest_rank(p, q) for t, p in run.items()}) for run in runs.values()]
        cur[q] = run_spread.geometric_index({t: nearest_rank(np.concatenate(timers[t][1]), q) for t in tests})
    return run_spread.timer_canary(base, cur)


def explained_by_host(c: Comparison, timer_parts) -> bool:
    """Could the busier host explain this delay regression? Yes when the lower CI bound of delta
    is within the allowed effect plus twice the growth of the sender's timer error at the same
    percentile (a stall delays the client's send and, as often, the responder's reply)."""
    q = split_metric(c.metric)[1]
    if q is None:
        return False   # loss is counted by sequence number; host stalls do not drop requests
    base, cur = (np.concatenate(p) if p else np.empty(0) for p in timer_parts)
    growth = max(0.0, nearest_rank(cur, q) - nearest_rank(base, q)) if len(base) and len(cur) else 0.0
    return c.delta_lo <= c.allowed + 2.0 * growth
