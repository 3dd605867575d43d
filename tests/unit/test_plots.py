"""Plots: what is drawn (ms, log axes, SLO lines, CI marks, loss marks) and that PNGs decode."""

from __future__ import annotations

import io

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from netslo.report import plots

RTT = 1e-4 * np.random.default_rng(0).lognormal(0, 0.6, 1000)      # seconds, median 100 µs
SLO = [plots.SloLine(50, 1e-3, "rtt.p50 ≤ 1ms"), plots.SloLine(99, 10e-3, "rtt.p99 ≤ 10ms")]


def pixels(png: bytes) -> np.ndarray:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return mpimg.imread(io.BytesIO(png))[:, :, :3]


def share_of(png: bytes, color: str, tol: float = 0.06) -> float:
    """Fraction of pixels within ``tol`` of ``color`` (anti-aliasing leaves the core exact)."""
    img = pixels(png)
    return float((np.abs(img - np.array(to_rgb(color))).max(axis=2) < tol).mean())


def legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_ecdf_is_exact_in_ms_on_log_axes_with_slo_lines():
    fig = plots.ecdf_figure(RTT, title="t", slo=SLO, xlabel="RTT (ms)")
    left, right = fig.axes
    assert left.get_xscale() == right.get_xscale() == "log" and right.get_yscale() == "log"
    assert left.get_xlabel() == "RTT (ms)"
    ecdf = left.lines[0]
    x, y = ecdf.get_xdata(), ecdf.get_ydata()
    assert np.allclose(x, np.sort(RTT) * 1e3)                            # milliseconds
    assert np.allclose(y, np.arange(1, 1001) / 1000)                      # F_n(x_(i)) = i/n
    lo, hi = left.get_xlim()
    assert lo < RTT.min() * 1e3 and hi > 10.0                              # the 10 ms SLO is on the axis
    texts = legend_texts(fig)
    assert "SLO rtt.p50 ≤ 1ms" in texts and "SLO rtt.p99 ≤ 10ms" in texts
    # the SLO corner sits at (threshold, quantile) on the ECDF and at (threshold, 1-q) on the tail
    corners = {(round(ln.get_xdata()[0], 6), round(ln.get_ydata()[1], 6)) for ln in left.lines[1:] if len(ln.get_xdata()) == 3}
    assert corners == {(1.0, 0.5), (10.0, 0.99)}


def test_slo_lines_and_marks_are_visible_in_the_png():
    with_slo = plots.ecdf_png(RTT, title="t", slo=SLO,
                              marks=[plots.Mark(99, float(np.quantile(RTT, .99)), 2e-4, 4e-4)])
    without = plots.ecdf_png(RTT, title="t")
    assert share_of(with_slo, plots.SLO_COLOR) > 0.0002                  # dashed lines + corner dots
    assert share_of(without, plots.SLO_COLOR) == 0.0
    assert pixels(with_slo).shape[:2] == (420, 1000)


def test_unbounded_ci_mark_is_drawn_to_the_axis_edge():
    fig = plots.ecdf_figure(RTT[:50], title="few", marks=[plots.Mark(99.9, float(RTT[:50].max()), 1e-4, float("inf"))])
    assert fig.axes[0].collections or any(c for c in fig.axes[0].containers)   # errorbar drawn, no crash


def test_distribution_has_log_bins_percentiles_and_box_whiskers():
    fig = plots.distribution_figure(RTT, title="t", slo=SLO[1:])
    hist, box = fig.axes
    assert hist.get_xscale() == "log" and hist.get_yscale() == "log" and box.get_xscale() == "log"
    widths = [p.get_width() for p in hist.patches]
    lefts = [p.get_x() for p in hist.patches]
    ratios = (np.array(lefts) + np.array(widths)) / np.array(lefts)
    assert np.allclose(ratios, ratios[0])                                   # geometric bins
    assert sum(p.get_height() for p in hist.patches) == len(RTT)            # every request counted
    texts = legend_texts(fig)
    p99 = float(np.percentile(RTT * 1e3, 99, method="inverted_cdf"))
    assert f"P99 = {p99:.3g} ms" in texts and "SLO rtt.p99 ≤ 10ms" in texts
    drawn = np.concatenate([ln.get_xdata() for ln in box.lines])
    for q in (1, 99):                                                       # whisker caps at P1 and P99
        assert np.min(np.abs(drawn / np.percentile(RTT * 1e3, q) - 1)) < 1e-2


def test_timeseries_marks_losses_and_keeps_the_tail_when_thinning():
    t = np.arange(1000) * 0.002
    lost = np.zeros(1000, bool)
    lost[[10, 500, 501]] = True
    png = plots.timeseries_png(t[~lost], RTT[~lost], t[lost], title="t", slo=SLO)
    assert share_of(png, plots.LOSS_COLOR) > 0.0
    assert share_of(plots.timeseries_png(t, RTT, (), title="t"), plots.LOSS_COLOR) == 0.0
    fig = plots.timeseries_figure(t[~lost], RTT[~lost], t[lost], title="t", slo=SLO)
    assert "lost (3)" in legend_texts(fig) and fig.axes[0].get_yscale() == "log"

    n = 60_000
    big = 1e-4 * np.random.default_rng(1).lognormal(0, 0.6, n)
    fig = plots.timeseries_figure(np.arange(n) * 1e-3, big, title="big")
    dots = fig.axes[0].lines[0].get_ydata()
    assert len(dots) <= plots.MAX_POINTS
    assert np.sum(dots > np.percentile(big, 99) * 1e3) == np.sum(big > np.percentile(big, 99))
    assert "thinned" in legend_texts(fig)[0]


@pytest.mark.parametrize("make", [
    lambda: plots.ecdf_png(np.array([]), title="none"),
    lambda: plots.distribution_png(np.array([]), title="none"),
    lambda: plots.timeseries_png(np.array([]), np.array([]), title="none"),
    lambda: plots.distribution_png(np.full(100, 1e-4), title="constant"),
])
def test_empty_or_degenerate_series_still_give_a_png(make):
    assert pixels(make()).shape[:2] == (420, 1000)
