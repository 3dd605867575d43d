"""Plots of one scenario's raw samples, as PNG bytes (matplotlib, Agg canvas, no pyplot state).

Every delay axis is in milliseconds on a log scale (latency tails span decades). Three figures
(``*_figure`` returns the matplotlib Figure, ``*_png`` its PNG bytes):
  ecdf              ECDF F(x) and its tail 1-F(x) (log), with each SLO threshold and the measured
                    percentile with its CI drawn at the quantile it constrains
  distribution      log-binned histogram and a box plot (box P25-P75, whiskers P1-P99)
  timeseries        delay per request over the run, a rolling median, lost requests marked
Inputs are plain arrays in seconds, so plots never reach back into the measurement. ``Plot`` holds one
figure's inputs (picklable: a worker process can render it later) and ``render(plot)`` its PNG bytes.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

MS = 1e3
MAX_POINTS = 20_000          # time series: at most this many dots drawn (all of the tail kept)
SIZE = (10.0, 4.2)           # inches; at DPI gives 1000x420 px
DPI = 100
SLO_COLOR, MEASURED_COLOR, LOSS_COLOR = "#c0392b", "#1f5fa8", "#d35400"
SIDE_COLORS = ("#1f5fa8", "#d35400", "#2e8b57")     # a comparison's A, B (and a third)
SLO_STYLES = ("--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))   # one dash pattern per threshold


@dataclass(frozen=True)
class SloLine:
    """A threshold to draw: ``limit`` seconds at percentile ``q`` (None = not a percentile, e.g. mean)."""

    q: float | None
    limit: float
    label: str


@dataclass(frozen=True)
class Mark:
    """A measured percentile ``q`` with value and CI [lo, hi], seconds (lo/hi may be +-inf)."""

    q: float
    value: float
    lo: float
    hi: float


def _ms_formatter():
    def fmt(x, _pos):
        if x <= 0:
            return ""
        return f"{x:g}" if x >= 0.01 else f"{x:.0e}"
    return FuncFormatter(fmt)


def _figure(ncols: int = 2, widths=None, top: float = 0.89) -> tuple[Figure, list]:
    """A figure of ``ncols`` axes with fixed margins (fractions of the figure; a layout engine
    measured every tick label on each save and took a third of a plot's time)."""
    fig = Figure(figsize=SIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, gridspec_kw={"width_ratios": widths} if widths else None)
    fig.subplots_adjust(left=0.075, right=0.985, bottom=0.12, top=top, wspace=0.28)
    return fig, list(np.atleast_1d(axes))


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _log_ms_axis(ax, which: str = "x") -> None:
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(_ms_formatter())
    axis.set_minor_formatter(FuncFormatter(lambda *_: ""))


def _positive_ms(values_s) -> np.ndarray:
    """Sorted delays in ms, zeros/negatives clipped to 1 ns so a log axis can show them."""
    x = np.sort(np.asarray(values_s, dtype=np.float64)) * MS
    x = x[np.isfinite(x)]
    return np.maximum(x, 1e-6)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xticks([])
    ax.set_yticks([])


def _ecdf_points(n: int) -> np.ndarray:
    """Ranks (0-based) to draw: all of them up to MAX_POINTS, else evenly spaced ones plus every
    rank of the slowest 0.1 % (the tail the log panel shows); the steps look the same at 100 dpi."""
    if n <= MAX_POINTS:
        return np.arange(n)
    tail_from = int(n * 0.999)
    body = np.linspace(0, tail_from, MAX_POINTS // 2, dtype=np.int64)
    tail = np.arange(tail_from, n) if n - tail_from <= MAX_POINTS // 2 else \
        np.unique(np.geomspace(1, n - tail_from, MAX_POINTS // 2).astype(np.int64)) * -1 + n
    return np.unique(np.concatenate([body, tail, [n - 1]]))


def _ecdf_axes(left, right, lo_x: float, hi_x: float, xlabel: str, least: float) -> None:
    """The axes of an ECDF plot: log ms on x (``lo_x``..``hi_x`` ms, widened), F on the left, the tail
    1-F on a log scale down to ``least`` on the right."""
    for ax in (left, right):
        _log_ms_axis(ax, "x")
        ax.set_xlim(lo_x / 1.3, hi_x * 1.3)
        ax.set_xlabel(xlabel)
        ax.grid(True, which="major", alpha=0.3)
    left.set_ylim(0, 1.02)
    left.set_ylabel("fraction of requests ≤ x")
    right.set_yscale("log")
    right.set_ylim(min(least, 1e-3), 1.5)
    right.set_ylabel("fraction of requests ≥ x (log)")


def ecdf_figure(values_s, *, title: str, slo=(), marks=(), xlabel: str = "delay (ms)") -> Figure:
    """ECDF (left, linear y) and tail 1-F (right, log y) of ``values_s`` with SLO lines and marks."""
    x = _positive_ms(values_s)
    n = len(x)
    fig, (left, right) = _figure()
    fig.suptitle(title, fontsize=11)
    if n == 0:
        _empty(left, "no samples")
        _empty(right, "no samples")
        return fig
    idx = _ecdf_points(n)
    y = (idx + 1) / n                               # F_n(x_(i)) = i/n (exact ECDF at the drawn points)
    tail = 1.0 - idx / n                            # 1 - F just before x_(i): P(X >= x_(i))
    left.step(x[idx], y, where="post", color=MEASURED_COLOR, lw=1.4, label=f"ECDF (n={n})")
    right.step(x[idx], tail, where="post", color=MEASURED_COLOR, lw=1.4, label="1 − F (tail)")
    lo_x = min(x[0], *(s.limit * MS for s in slo)) if slo else x[0]
    hi_x = max(x[-1], *(s.limit * MS for s in slo)) if slo else x[-1]
    _ecdf_axes(left, right, lo_x, hi_x, xlabel, 0.5 / n)
    for i, s in enumerate(slo):
        lim = s.limit * MS
        label, ls = f"SLO {s.label}", SLO_STYLES[i % len(SLO_STYLES)]
        if s.q is None:
            for ax in (left, right):
                ax.axvline(lim, color=SLO_COLOR, ls=ls, lw=1.2, label=label)
            continue
        p = s.q / 100.0
        left.plot([lim, lim, lo_x / 1.3], [0, p, p], color=SLO_COLOR, ls=ls, lw=1.2, label=label)
        left.plot([lim], [p], marker="o", color=SLO_COLOR)
        right.plot([lim, lim, lo_x / 1.3], [right.get_ylim()[0], 1 - p, 1 - p], color=SLO_COLOR,
                   ls=ls, lw=1.2, label=label)
        right.plot([lim], [1 - p], marker="o", color=SLO_COLOR)
    for m in marks:
        p = m.q / 100.0
        lo = m.lo * MS if math.isfinite(m.lo) else lo_x / 1.3
        hi = m.hi * MS if math.isfinite(m.hi) else hi_x * 1.3
        v = m.value * MS
        for ax, yy in ((left, p), (right, 1 - p)):
            ax.errorbar([v], [yy], xerr=[[max(v - lo, 0)], [max(hi - v, 0)]], fmt="D", ms=4,
                        color="black", capsize=3, lw=1)
        right.annotate(f"P{m.q:g} {v:.3g} ms", (v, 1 - p), textcoords="offset points", xytext=(6, 4),
                       fontsize=8)
    left.plot([], [], "D", color="black", ms=4, label="measured P (95% CI)")
    left.legend(loc="lower right", fontsize=8, framealpha=0.9)
    right.legend(loc="lower left", fontsize=8, framealpha=0.9)
    return fig


def two_ecdf_figure(sides: dict, *, title: str, xlabel: str = "rtt (ms)") -> Figure:
    """The ECDFs (left, linear y) and tails 1-F (right, log y) of several sides in one plot, e.g. a
    comparison's A and B: ``sides`` maps a label to its values (s)."""
    fig, (left, right) = _figure(top=0.83)
    fig.suptitle(title, fontsize=10)
    xs = {label: _positive_ms(v) for label, v in sides.items()}
    if not any(len(x) for x in xs.values()):
        _empty(left, "no samples")
        _empty(right, "no samples")
        return fig
    lo_x = min(x[0] for x in xs.values() if len(x))
    hi_x = max(x[-1] for x in xs.values() if len(x))
    least = 1.0
    for (label, x), color in zip(xs.items(), SIDE_COLORS):
        if not len(x):
            continue
        n = len(x)
        idx = _ecdf_points(n)
        left.step(x[idx], (idx + 1) / n, where="post", color=color, lw=1.4, label=f"{label} (n={n})")
        right.step(x[idx], 1.0 - idx / n, where="post", color=color, lw=1.4, label=label)
        least = min(least, 0.5 / n)
    _ecdf_axes(left, right, lo_x, hi_x, xlabel, least)
    left.legend(loc="lower right", fontsize=8, framealpha=0.9)
    right.legend(loc="lower left", fontsize=8, framealpha=0.9)
    return fig


def distribution_figure(values_s, *, title: str, slo=(), xlabel: str = "delay (ms)") -> Figure:
    """Histogram with log-spaced bins (left) and a box plot with P1-P99 whiskers (right)."""
    x = _positive_ms(values_s)
    fig, (hist, box) = _figure(2, widths=(3, 2))
    fig.suptitle(title, fontsize=11)
    if len(x) == 0:
        _empty(hist, "no samples")
        _empty(box, "no samples")
        return fig
    lo, hi = x[0], x[-1]
    if hi <= lo * 1.01:                      # (nearly) constant: give the axes some width
        lo, hi = lo / 1.1, hi * 1.1
    bins = np.geomspace(lo, hi, 60)
    hist.hist(x, bins=bins, color=MEASURED_COLOR, alpha=0.8, label=f"requests (n={len(x)})")
    hist.set_yscale("log")
    hist.set_ylabel("requests per bin (log)")
    for ax in (hist, box):
        _log_ms_axis(ax, "x")
        ax.set_xlim(lo / 1.2, max(hi, *(s.limit * MS for s in slo)) * 1.2 if slo else hi * 1.2)
        ax.set_xlabel(xlabel)
        ax.grid(True, which="major", alpha=0.3)
    q = {p: float(np.percentile(x, p, method="inverted_cdf")) for p in (50, 90, 99, 99.9)}
    for p, color in zip(q, ("black", "dimgray", "darkorange", "purple")):
        hist.axvline(q[p], color=color, lw=1, ls=":", label=f"P{p:g} = {q[p]:.3g} ms")
    for i, s in enumerate(slo):
        hist.axvline(s.limit * MS, color=SLO_COLOR, ls=SLO_STYLES[i % len(SLO_STYLES)], lw=1.2,
                     label=f"SLO {s.label}")
    hist.legend(loc="upper right", fontsize=8, framealpha=0.9)
    box.boxplot([x], orientation="horizontal", whis=(1, 99), widths=0.5, showmeans=True,
                flierprops={"marker": ".", "markersize": 2, "alpha": 0.4},
                meanprops={"marker": "^", "markerfacecolor": "white", "markeredgecolor": "black"})
    box.set_yticks([1], ["all"])
    box.set_title("box P25–P75, whiskers P1–P99, ▲ mean", fontsize=9)
    for i, s in enumerate(slo):
        box.axvline(s.limit * MS, color=SLO_COLOR, ls=SLO_STYLES[i % len(SLO_STYLES)], lw=1.2)
    return fig


def _thin(t: np.ndarray, d: np.ndarray, limit: int, rng) -> tuple[np.ndarray, np.ndarray, bool]:
    """At most ``limit`` points: every point above the P99 plus a random subset of the rest."""
    if len(d) <= limit:
        return t, d, False
    cut = np.percentile(d, 99)
    keep = d > cut
    body = np.flatnonzero(~keep)
    chosen = rng.choice(body, size=max(limit - int(keep.sum()), 0), replace=False)
    keep[chosen] = True
    return t[keep], d[keep], True


def timeseries_figure(t_s, delay_s, lost_t_s=(), *, title: str, slo=(), ylabel: str = "RTT (ms)",
                      window: int = 51) -> Figure:
    """Delay per request against time since the first scheduled send (s), log y, with a rolling
    median (``window`` requests) and each lost request marked along the top edge."""
    t = np.asarray(t_s, dtype=np.float64)
    d = np.asarray(delay_s, dtype=np.float64) * MS
    lost = np.asarray(lost_t_s, dtype=np.float64)
    fig, (ax,) = _figure(1, top=0.83)   # room for the legend above the axes
    fig.suptitle(title, fontsize=11)
    if len(d) == 0 and len(lost) == 0:
        _empty(ax, "no samples")
        return fig
    d = np.maximum(d, 1e-6)
    tt, dd, thinned = _thin(t, d, MAX_POINTS, np.random.default_rng(0))
    ax.plot(tt, dd, ".", ms=2, color=MEASURED_COLOR, alpha=0.5,
            label=f"{ylabel.split(' ')[0]} per request (n={len(d)}{', thinned' if thinned else ''})")
    if len(d) >= window:
        k = window // 2
        med = np.array([np.median(d[max(0, i - k):i + k + 1]) for i in range(0, len(d), max(1, len(d) // 2000))])
        ax.plot(t[::max(1, len(d) // 2000)][:len(med)], med, color="black", lw=1.2,
                label=f"rolling median ({window} requests)")
    _log_ms_axis(ax, "y")
    ymax = max([d.max() if len(d) else 1.0] + [s.limit * MS for s in slo]) * 2.0
    ymin = (d.min() if len(d) else 0.01) / 1.5
    ax.set_ylim(ymin, ymax)
    for i, s in enumerate(slo):
        ax.axhline(s.limit * MS, color=SLO_COLOR, ls=SLO_STYLES[i % len(SLO_STYLES)], lw=1.2,
                   label=f"SLO {s.label}")
    if len(lost):
        ax.plot(lost, np.full(len(lost), ymax / 1.15), "x", color=LOSS_COLOR, ms=6, mew=1.5,
                label=f"lost ({len(lost)})")
    ax.set_xlabel("time since start of the run (s)")
    ax.set_ylabel(ylabel + " (log)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, ncol=5, frameon=False)
    return fig


def ecdf_png(values_s, **kw) -> bytes:
    return _png(ecdf_figure(values_s, **kw))


def two_ecdf_png(sides: dict, **kw) -> bytes:
    return _png(two_ecdf_figure(sides, **kw))


def distribution_png(values_s, **kw) -> bytes:
    return _png(distribution_figure(values_s, **kw))


def timeseries_png(t_s, delay_s, lost_t_s=(), **kw) -> bytes:
    return _png(timeseries_figure(t_s, delay_s, lost_t_s, **kw))


@dataclass(frozen=True)
class Plot:
    """One figure to render: ``kind`` (ecdf, distribution or timeseries), the arrays it is drawn from
    (seconds) and its keyword arguments (title, slo, marks, xlabel)."""

    kind: str
    arrays: tuple
    options: dict = field(default_factory=dict)


_RENDERERS = {"ecdf": ecdf_png, "distribution": distribution_png, "timeseries": timeseries_png}


def render(plot: Plot) -> bytes:
    """The PNG bytes of ``plot``."""
    return _RENDERERS[plot.kind](*plot.arrays, **plot.options)
