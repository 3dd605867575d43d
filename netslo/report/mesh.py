"""The report of a node-pair mesh (``netslo.studies.mesh``): mesh.json (every pair: its labels,
estimates, checks), mesh.md (the verdict, the nodes named, a text matrix of P50/P99 up to
``MATRIX_NODES`` nodes and the worst pairs beyond), mesh-heatmap.png (node × node P50, P99 and loss,
zone and pool blocks marked), and the lines the command prints."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from netslo.core.units import format_duration, format_percent
from netslo.report.compare import MARK

MATRIX_NODES = 16     # summary.md's matrix up to this many nodes; beyond, the worst pairs
WORST = 10


def _num(x: float):
    return x if math.isfinite(x) else None


def _fmt(metric: str, v: float) -> str:
    return format_percent(v) if metric.endswith("loss") else format_duration(v)


def _checks_of(result) -> dict:
    out: dict = {}
    for c in result.checks:
        out.setdefault(c.pair, []).append(c)
    return out


def pair_verdict(checks: list) -> str:
    v = {c.verdict for c in checks}
    return "fail" if "fail" in v else ("undecided" if "inconclusive" in v else "pass")


def to_json(result) -> dict:
    p, checks = result.plan, _checks_of(result)
    return {
        "verdict": result.verdict, "provider": result.provider, "datapath": result.datapath,
        "design": p.design, "coverage": p.coverage, "nodes": p.nodes, "rounds": len(p.rounds),
        "requests_per_pair": p.requests, "interval_s": p.interval, "confidence": result.confidence,
        "family_alpha": result.alpha, "labels": {n: p.labels[n] for n in p.nodes},
        "phases_s": {k: round(v, 3) for k, v in result.phases.items()},
        "named_nodes": {n: {"failed": f, "measured": m} for n, (f, m) in result.attribution.nodes.items()},
        "pairs_left": [list(x) for x in result.attribution.pairs],
        "undecided": [list(x) for x in result.undecided], "not_judged": result.not_judged,
        "pairs": [{"a": pr.pair[0], "b": pr.pair[1], "labels": pr.labels, "round": pr.round, "requests": pr.requests,
                   "sent": pr.sent, "lost": pr.lost, "verdict": pair_verdict(checks.get(pr.pair, [])),
                   "estimates": {k: {"value": _num(e.value), "lo": _num(e.lo), "hi": _num(e.hi)}
                                 for k, e in pr.estimates.items()},
                   "checks": [{"metric": c.metric, "limit": c.limit, "objective": c.objective, "p": c.p,
                               "p_holm": c.p_adjusted, "verdict": c.verdict} for c in checks.get(pr.pair, [])]}
                  for pr in sorted(result.pairs.values(), key=lambda x: x.pair)],
        "aggregates": [{"metric": a.threshold.metric, "objective": a.threshold.objective, "threshold": a.threshold.text,
                        "pairs": a.pairs, "value": _num(a.check.estimate.value), "lo": _num(a.check.estimate.lo),
                        "hi": _num(a.check.estimate.hi), "verdict": a.check.verdict} for a in result.aggregates],
    }


def headline(result) -> str:
    p = result.plan
    return (f"mesh of {len(p.nodes)} nodes ({result.provider}/{result.datapath}): {MARK.get(result.verdict, '')} "
            f"{result.verdict} — {len(result.pairs)} pairs in {len(p.rounds)} rounds, {p.requests} requests per "
            f"pair every {format_duration(p.interval)}; {p.design}; {p.coverage}")


def finding_lines(result) -> list[str]:
    """The nodes named, the pairs left, the undecided pairs and the mesh objectives not passed."""
    checks = _checks_of(result)
    out = []
    for node, (f, m) in result.attribution.nodes.items():
        bad = [c for pair, cs in checks.items() if node in pair for c in cs if c.verdict == "fail"]
        worst = {}
        for c in bad:
            if c.metric not in worst or c.estimate.value > worst[c.metric].estimate.value:
                worst[c.metric] = c
        out.append(f"node {node}: {f} of {m} of its pairs failed (worst: "
                   + ", ".join(f"{k} {_fmt(k, c.estimate.value)} > {_fmt(k, c.limit)}" for k, c in sorted(worst.items()))
                   + ")")
    for pair in result.attribution.pairs:
        out.append(f"pair {pair[0]} - {pair[1]} failed: " + "; ".join(
            f"{c.metric} {_fmt(c.metric, c.estimate.value)} > {_fmt(c.metric, c.limit)} [objective {c.objective}], "
            f"p {c.p_adjusted:.2g} Holm" for c in checks[pair] if c.verdict == "fail"))
    out += [f"pair {a} - {b} undecided (its CI straddles a threshold after measuring it again)"
            for a, b in result.undecided]
    out += [f"{a.threshold.metric} over {a.pairs} pairs [objective {a.threshold.objective}]: {a.check.line()}"
            for a in result.aggregates if a.check.verdict != "pass"]
    if result.not_judged:
        out.append(f"not judged per pair (a mesh judges RTT percentiles and loss): {', '.join(result.not_judged)}")
    return out


def _matrix(result, metric: str) -> np.ndarray:
    nodes = result.plan.nodes
    ix = {n: i for i, n in enumerate(nodes)}
    m = np.full((len(nodes), len(nodes)), np.nan)
    for pr in result.pairs.values():
        i, j = ix[pr.pair[0]], ix[pr.pair[1]]
        m[i, j] = m[j, i] = pr.estimates[metric].value
    return m


def markdown(result) -> str:
    lines = [f"### netslo {headline(result)}", ""]
    found = finding_lines(result)
    if found:
        lines += [f"- {x}" for x in found] + [""]
    nodes = result.plan.nodes
    checks = _checks_of(result)
    if len(nodes) <= MATRIX_NODES:
        for metric in ("rtt.p50", "rtt.p99"):
            m = _matrix(result, metric)
            lines += [f"{metric} (row, column: the pair's nodes; ❌ a failed pair)", "",
                      "| | " + " | ".join(f"`{n}`" for n in nodes) + " |", "|---|" + "---:|" * len(nodes)]
            for i, a in enumerate(nodes):
                cells = []
                for j, b in enumerate(nodes):
                    pair = tuple(sorted((a, b)))
                    bad = pair_verdict(checks.get(pair, [])) == "fail" if i != j else False
                    cells.append("·" if i == j else ("" if math.isnan(m[i, j]) else
                                                     ("❌ " if bad else "") + format_duration(m[i, j])))
                lines.append(f"| `{a}` | " + " | ".join(cells) + " |")
            lines.append("")
    else:
        worst = sorted(result.pairs.values(), key=lambda pr: -pr.estimates["rtt.p99"].value)[:WORST]
        lines += [f"worst {len(worst)} pairs by rtt.p99", "", "| pair | rtt.p50 | rtt.p99 | loss | verdict |",
                  "|---|---:|---:|---:|---|"]
        for pr in worst:
            v = pair_verdict(checks.get(pr.pair, []))
            lines.append(f"| `{pr.pair[0]}` – `{pr.pair[1]}` | {format_duration(pr.estimates['rtt.p50'].value)} | "
                         f"{format_duration(pr.estimates['rtt.p99'].value)} | {format_percent(pr.estimates['loss'].value)} "
                         f"| {MARK.get(v, '')} {v} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _blocks(result) -> list[tuple[str, list[int]]]:
    """Where the zone (else pool) value changes along the node order: boundaries to draw."""
    nodes = result.plan.nodes
    for group in ("zone", "pool"):
        value_of = result.plan.groups.get(group)
        if value_of and len(set(value_of.values())) > 1:
            return [(group, [i for i in range(1, len(nodes)) if value_of[nodes[i]] != value_of[nodes[i - 1]]])]
    return []


def heatmap_png(result) -> bytes:
    """Node × node heatmaps of the pairs' P50, P99 (log colour scale) and loss, in one PNG; failed
    pairs outlined, zone (or pool) blocks marked by lines."""
    nodes = result.plan.nodes
    n = len(nodes)
    fig = Figure(figsize=(min(6 + n * 0.45, 40), min(2.6 + n * 0.16, 14)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    failed = set(result.failed_pairs)
    blocks = _blocks(result)
    ix = {m: i for i, m in enumerate(nodes)}
    for ax, (metric, title) in zip(axes, (("rtt.p50", "RTT P50"), ("rtt.p99", "RTT P99"), ("loss", "loss"))):
        m = _matrix(result, metric)
        if metric == "loss":
            im = ax.imshow(m * 100, cmap="Reds", vmin=0, vmax=max(1.0, float(np.nanmax(m * 100)) if np.isfinite(m).any() else 1))
            label = "%"
        else:
            finite = m[np.isfinite(m) & (m > 0)]
            lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (1e-5, 1e-3)
            im = ax.imshow(m, cmap="viridis", norm=LogNorm(lo, max(hi, lo * 1.01)))
            label = ""
        bar = fig.colorbar(im, ax=ax, shrink=0.8, label=label)
        if metric != "loss":
            ticks = FuncFormatter(lambda v, _: format_duration(v))
            bar.ax.yaxis.set_major_formatter(ticks)
            # minor ticks labelled only within a decade (across decades their labels overlap)
            bar.ax.yaxis.set_minor_formatter(ticks if hi < 10 * lo else NullFormatter())
        ax.set_title(title)
        step = max(1, n // 16)
        ax.set_xticks(range(0, n, step), [nodes[i] for i in range(0, n, step)], rotation=90, fontsize=6)
        ax.set_yticks(range(0, n, step), [nodes[i] for i in range(0, n, step)], fontsize=6)
        for a, b in failed:
            for i, j in ((ix[a], ix[b]), (ix[b], ix[a])):
                ax.add_patch(_square(i, j))
        for _, cuts in blocks:
            for c in cuts:
                ax.axhline(c - 0.5, color="black", lw=1.0)
                ax.axvline(c - 0.5, color="black", lw=1.0)
    fig.suptitle(f"netslo mesh: {n} nodes, {len(result.pairs)} pairs — {result.verdict}"
                 + (f" ({blocks[0][0]} blocks marked)" if blocks else ""), fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _square(i: int, j: int) -> Rectangle:
    return Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.5)


def terminal_lines(result) -> list[str]:
    return [headline(result), *[f"  {x}" for x in finding_lines(result)],
            "  phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.phases.items())]


def write(result, directory) -> list[Path]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = [d / "mesh.json", d / "mesh.md", d / "mesh-heatmap.png"]
    out[0].write_text(json.dumps(to_json(result), indent=1))
    out[1].write_text(markdown(result))
    out[2].write_bytes(heatmap_png(result))
    return out
