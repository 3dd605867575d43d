"""``stats.analyze`` on compact chunks gives today's results: every percentile, CI bound, min, max,
count and proportion identical to the sorted-array computation it replaced (kept below as the
reference), means to the last digits of a differently ordered sum; a streamed set analyses exactly
like the same rows held whole."""

import math

import numpy as np
import pytest

from benchmarks.synthetic_samples import synthetic, synthetic_stream
from netslo.stats import analysis as stats
from netslo.stats import delays, order_stats, sample_file, samples
from netslo.stats.analysis import (
    Analysis,
    Estimate,
    describe,
    ipdv,
    pdv,
    proportion,
    reorder_count,
    rfc3550_jitter,
)
from netslo.stats.samples import SampleSet


def abs_ipdv(d_ns: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """|D_i - D_{i-1}| (s) of consecutive rows that both have the delay, differenced in integer ns."""
    return np.abs(np.diff(d_ns))[ok[1:] & ok[:-1]] * 1e-9


def reference_analyze(s: SampleSet, confidence: float = 0.95) -> Analysis:
    """The analysis before compact samples: whole int64 columns, full sorts (``describe``); rtt
    without the responder's residence where the row has its stamps."""
    r = s.rows
    n = len(r)
    got = r["recv_ns"] >= 0
    ns = 1e-9
    srv = got & (r["srv_rx_ns"] >= 0) & (r["srv_tx_ns"] >= 0)
    residence = np.where(srv, r["srv_tx_ns"] - r["srv_rx_ns"], 0)      # rtt leaves it out (irtt's definition)
    rtt_by_seq = np.where(got, (r["recv_ns"] - r["send_ns"] - residence) * ns, np.nan)
    rtt = rtt_by_seq[got]
    m = describe(rtt, confidence, "rtt")
    if srv.any():
        m.update(describe((r["srv_tx_ns"][srv] - r["srv_rx_ns"][srv]) * ns, confidence, "server_time"))
    if s.meta.get("shared_clock", False) and srv.any():
        up = np.where(srv, (r["srv_rx_ns"] - r["send_ns"]) * ns, np.nan)
        down = np.where(srv, (r["recv_ns"] - r["srv_tx_ns"]) * ns, np.nan)
        m.update(describe(up[srv], confidence, "owd_up"))
        m.update(describe(down[srv], confidence, "owd_down"))
        m.update(describe(abs_ipdv(r["srv_rx_ns"] - r["send_ns"], srv), confidence, "ipdv_up"))
        m.update(describe(abs_ipdv(r["recv_ns"] - r["srv_tx_ns"], srv), confidence, "ipdv_down"))
    m.update(describe(abs_ipdv(r["recv_ns"] - r["send_ns"] - residence, got), confidence, "ipdv"))
    m.update(describe(pdv(rtt), confidence, "pdv"))
    send_app = np.where(r["send_app_ns"] == -1, r["send_ns"], r["send_app_ns"])   # unknown: the twin's
    recv_app = np.where(r["recv_app_ns"] == -1, r["recv_ns"], r["recv_app_ns"])
    app_by_seq = np.where(got, (recv_app - send_app) * ns, np.nan)
    m.update(describe(app_by_seq[got], confidence, "rtt_app"))
    m.update(describe(abs_ipdv(recv_app - send_app, got), confidence, "ipdv_app"))
    order = np.argsort(np.where(got, r["arrival"], np.iinfo(np.int64).max), kind="stable")[:got.sum()]
    j = rfc3550_jitter(rtt_by_seq[order])
    m["rfc3550"] = Estimate(j, j, j, int(got.sum()))
    m.update(describe(((send_app - r["sched_ns"]) * ns)[r["send_ns"] >= 0], confidence, "timer_error"))
    received = int(got.sum())
    up_lost = int(((r["srv_seen"] == 0) & ~got).sum())
    down_lost = int(((r["srv_seen"] == 1) & ~got).sum())
    unknown = int(((r["srv_seen"] < 0) & ~got).sum())
    dups, reordered = int(r["dups"].sum()), reorder_count(r["seq"][order])
    m["loss"] = proportion(n - received, n, confidence)
    if unknown == 0:
        m["loss_up"] = proportion(up_lost, n, confidence)
        m["loss_down"] = proportion(down_lost, max(n - up_lost, 0), confidence)
    m["dup"] = proportion(dups, max(received, 1), confidence)
    m["reorder"] = proportion(reordered, max(received, 1), confidence)
    return Analysis(m, {"sent": n, "received": received, "lost": n - received, "lost_up": up_lost,
                        "lost_down": down_lost, "lost_unknown_direction": unknown, "duplicates": dups,
                        "reordered": reordered})


def messy_rows(rng, n: int, quantum: int = 1, reorder: bool = False, extreme: bool = False,
               kernel: bool = False) -> np.ndarray:
    """Heavy-tailed RTTs, loss, unknown server timestamps, unsent rows, duplicates, loss split;
    ``kernel``: user-space times around the send/recv stamps (a few unknown: the twin's)."""
    r = samples.empty(n)
    r["sched_ns"] = np.arange(n) * 2_000_000 + 10**12
    r["send_ns"] = r["sched_ns"] + rng.integers(0, 300_000, n) // quantum * quantum
    rtt = (rng.pareto(1.5, n) * 50_000 + 20_000).astype(np.int64) // quantum * quantum
    r["srv_rx_ns"] = r["send_ns"] + rtt // 3
    r["srv_tx_ns"] = r["srv_rx_ns"] + rng.integers(1000, 9000, n)
    r["recv_ns"] = r["send_ns"] + rtt
    got = rng.random(n) >= 0.05
    r["recv_ns"][~got] = -1
    r["srv_seen"] = np.where(rng.random(n) < 0.5, 1, 0)
    r["srv_seen"][rng.random(n) < 0.01] = -1
    r["dups"] = rng.random(n) < 0.01
    arrival = np.arange(got.sum())
    if reorder:
        for i in np.flatnonzero(rng.random(max(len(arrival) - 1, 0)) < 0.05):
            arrival[i], arrival[i + 1] = arrival[i + 1], arrival[i]
    r["arrival"][got] = arrival
    r["srv_rx_ns"][rng.random(n) < 0.02] = -1
    r["send_ns"][rng.random(n) < 0.01] = 0
    if extreme:
        r["recv_ns"][rng.random(n) < 0.01] = 2**62
        r["send_ns"][rng.random(n) < 0.01] = -5
    if kernel:
        r["send_app_ns"] = np.where(r["send_ns"] >= 0, r["send_ns"] - rng.integers(500, 20_000, n), -1)
        r["recv_app_ns"] = np.where(r["recv_ns"] >= 0, r["recv_ns"] + rng.integers(500, 90_000, n), -1)
        r["send_app_ns"][rng.random(n) < 0.01] = -1
    return r


def assert_identical(new: Analysis, ref: Analysis) -> None:
    assert list(new.metrics) == list(ref.metrics) and new.counts == ref.counts
    for name, e in ref.metrics.items():
        f = new.metrics[name]
        assert f.n == e.n and f.unit == e.unit, name
        for field in ("value", "lo", "hi"):
            a, b = getattr(f, field), getattr(e, field)
            if name.endswith(".mean") and math.isfinite(b):
                assert a == pytest.approx(b, rel=1e-12, abs=1e-300), (name, field)
            else:
                assert a == b or (math.isnan(a) and math.isnan(b)), (name, field, a, b)


@pytest.mark.parametrize("chunk_rows", [1 << 18, 97])
@pytest.mark.parametrize("shape", [{}, {"quantum": 1000}, {"reorder": True}, {"extreme": True}, {"kernel": True},
                                   {"kernel": True, "extreme": True}])
@pytest.mark.parametrize("shared_clock", [True, False])
def test_same_results_as_the_sorted_computation(monkeypatch, chunk_rows, shape, shared_clock):
    monkeypatch.setattr(samples, "CHUNK_ROWS", chunk_rows)
    rng = np.random.default_rng(chunk_rows + len(shape))
    meta = {"shared_clock": shared_clock, **({"timestamps": "kernel"} if shape.get("kernel") else {})}
    for n in (1, 2, 3, 10, 500, 4000):
        s = SampleSet(messy_rows(rng, n, **shape), meta)
        assert_identical(stats.analyze(s), reference_analyze(s))
        compact_set = SampleSet.from_bytes(s.to_bytes())
        assert_identical(stats.analyze(compact_set), reference_analyze(s))


@pytest.mark.parametrize("shape", [{}, {"extreme": True}])
def test_series_the_headers_bound_only_by_int64_are_still_exact(monkeypatch, shape):
    """Every series bounded only by int64 itself (as a column stored against another reference is):
    its order statistics (kept as uint64 offsets past 2^63, then counted) and its |IPDV| (the sorted
    floats) are those of the sorted computation."""
    real = delays.bounds
    monkeypatch.setattr(delays, "bounds", lambda chunks, name: real(chunks, name) and delays.INT64)
    rng = np.random.default_rng(5)
    for n in (1, 3, 4000):
        s = SampleSet(messy_rows(rng, n, **shape), {"shared_clock": True})
        assert_identical(stats.analyze(s), reference_analyze(s))


def test_same_results_on_synthetic_and_empty_sets():
    for n in (0, 1, 1000, 100_000):
        s = synthetic(n, seed=n)
        assert_identical(stats.analyze(s), reference_analyze(SampleSet(s.rows.copy(), s.meta)))


def test_streamed_run_analyses_exactly_like_the_same_rows_held_whole(tmp_path):
    n = 2_000_000
    with open(tmp_path / "soak.npz", "wb") as f:
        w = sample_file.ChunkWriter(f)
        w.close(synthetic_stream(n, w).meta)
    streamed = stats.analyze(SampleSet.load(tmp_path / "soak.npz"))
    whole = stats.analyze(synthetic(n))
    assert streamed.counts == whole.counts and streamed.counts["sent"] == n
    assert streamed.metrics == whole.metrics            # every Estimate, means included, bit for bit


def test_moments_do_not_depend_on_how_values_are_fed():
    x = np.random.default_rng(2).lognormal(0, 2, 300_000)
    whole = order_stats.Moments().add_blocks([x]).finish()
    for piece in (1, 777, 65536, 100_000):
        m = order_stats.Moments().add_blocks(x[i:i + piece] for i in range(0, len(x), piece)).finish()
        assert (m.n, m.mean, m.m2) == (whole.n, whole.mean, whole.m2)
    assert whole.mean == pytest.approx(x.mean(), rel=1e-13) and whole.std() == pytest.approx(x.std(ddof=1), rel=1e-12)


@pytest.mark.parametrize("span, given", [(49, 0), (order_stats.COUNT_LIMIT + 1, 0), (49, 2**40)])
def test_order_statistics_are_those_of_a_sort(span, given):
    """Counted (small span), partitioned (large span) or kept then counted (a wide interval given,
    narrow values)."""
    rng = np.random.default_rng(8)
    for n in (1, 5, 1000, 50_000):
        x = np.concatenate([rng.integers(0, 50, n - 1), [span]]) - 7
        ranks = [1, n, (n + 1) // 2, int(rng.integers(1, n + 1))]
        s = order_stats.OrderStatistics(-7 - given, span - 7 + given, n)
        for i in range(0, n, 333):
            s.add(x[i:i + 333])
        counted = span + 2 * given <= order_stats.COUNT_LIMIT and span + 2 * given <= 4 * n
        assert s.counting == counted
        picked = s.pick(ranks)
        actual = int(x.max() - x.min())
        assert s.counting == (counted or (actual <= order_stats.COUNT_LIMIT and actual <= 4 * n))
        xs = np.sort(x)
        assert picked == {r: int(xs[r - 1]) for r in ranks}
