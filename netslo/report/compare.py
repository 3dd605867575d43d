"""The report of a comparison of two clusters (``netslo.studies.compare``): compare.json and
compare.md (a table per scenario: A and B side by side, B relative to A with its CI, the margin,
the Holm-adjusted p and the verdict), an ECDF plot per scenario with A's and B's RTTs in it
(compare-<scenario>.png), and the lines the command prints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from netslo.core.units import format_duration, format_percent

MARK = {"pass": "✅", "fail": "❌", "undecided": "⚠️", "inconclusive": "⚠️"}


def _num(x: float):
    return x if math.isfinite(x) else None


def _fmt(metric: str, v: float) -> str:
    return format_percent(v) if metric == "loss" else format_duration(v)


def to_json(result) -> dict:
    return {"a": result.a.describe(), "b": result.b.describe(), "seed": result.seed, "verdict": result.verdict,
            "confidence": result.confidence,
            "scenarios": [{
                "scenario": sc.scenario.id, "verdict": sc.verdict, "pairs": len(sc.pairs), "seconds": round(sc.seconds, 2),
                "order": "".join("BA" if p.b_first else "AB" for p in sc.pairs),
                "checks": [{"metric": c.relative.metric, "kind": c.relative.kind, "objective": c.margin.objective,
                            "margin": c.margin.text, "a": _num(c.relative.a), "b": _num(c.relative.b),
                            "value": _num(c.relative.value), "lo": _num(c.relative.lo), "hi": _num(c.relative.hi),
                            "upper": _num(c.relative.upper), "allowed": c.relative.margin,
                            "p_worse": c.relative.p_worse, "p_holm": c.p_adjusted, "verdict": c.verdict}
                           for c in sc.checks],
                "absolute": [{"metric": c.threshold.metric, "threshold": c.threshold.text, "value": _num(c.estimate.value),
                              "hi": _num(c.estimate.hi), "verdict": c.verdict} for c in sc.absolute],
            } for sc in result.scenarios],
            "not_gated": list(result.not_gated), "stopped": list(result.stopped)}


def markdown(result) -> str:
    lines = [f"### netslo comparison: {MARK.get(result.verdict, '')} {result.verdict}", "",
             f"A: {result.a.describe()}  ", f"B: {result.b.describe()}  ",
             f"interleaved pairs of blocks in random order (seed {result.seed}); "
             f"CIs {result.confidence:.0%}, paired block bootstrap; p Holm-adjusted over every check", "",
             "| scenario | metric | A | B | B vs A (CI) | allowed | p (Holm) | verdict |", "|---|---|---:|---:|---|---|---:|---|"]
    for sc in result.scenarios:
        for c in sc.checks:
            r = c.relative
            rel = (f"×{r.value:.3f} ({r.lo:.3f}–{r.hi:.3f})" if r.kind == "ratio"
                   else f"{r.value:+.3%} ({r.lo:+.3%}–{r.hi:+.3%})")
            lines.append(f"| `{sc.scenario.id}` | {r.metric} | {_fmt(r.metric, r.a)} | {_fmt(r.metric, r.b)} | {rel} | {c.margin.text} | "
                         f"{c.p_adjusted:.3g} | {MARK.get(c.verdict, '')} {c.verdict} |")
        bad = [c for c in sc.absolute if c.verdict != "pass"]
        if bad:
            lines.append(f"| `{sc.scenario.id}` | B's thresholds | | | " + "; ".join(c.line() for c in bad) + " | | | ❌ |")
    if result.not_gated:
        lines += ["", f"not gated (gate: selected-only; no objective's compare: selects them): "
                      f"{', '.join(f'`{s}`' for s in result.not_gated)}"]
    if result.stopped:
        lines += ["", f"undecided, not measured further once the comparison had failed: "
                      f"{', '.join(f'`{s}`' for s in result.stopped)}"]
    return "\n".join(lines) + "\n"


def scenario_lines(sc) -> list[str]:
    """One scenario's checks, a line each: every margin, then B's thresholds that did not pass."""
    return [c.line() for c in sc.checks] + [f"B's threshold: {c.line()}" for c in sc.absolute if c.verdict != "pass"]


def terminal_lines(result) -> list[str]:
    out = [f"A: {result.a.describe()}", f"B: {result.b.describe()}"]
    for sc in result.scenarios:
        out.append(f"{sc.scenario.id:<24} {sc.verdict:<9} {len(sc.pairs)} pairs, {sc.seconds:.1f} s")
        out += [f"  {line}" for line in scenario_lines(sc)]
    if result.not_gated:
        out.append(f"not gated (gate: selected-only): {', '.join(result.not_gated)}")
    if result.stopped:
        out.append(f"not measured further once the comparison had failed: {', '.join(result.stopped)}")
    out.append(f"netslo compare: {MARK.get(result.verdict, '')} {result.verdict}")
    return out


def plot_name(sc) -> str:
    return f"compare-{sc.scenario.id}.png"


def ecdf_png(result, sc) -> bytes:
    """A's and B's RTTs of scenario ``sc`` (every answered request of its blocks) in one ECDF plot,
    titled with B/A of each percentile checked and its CI."""
    from netslo.report import plots  # matplotlib: only when a report is drawn
    sides = {side: np.concatenate([getattr(p, side.lower()) for p in sc.pairs]) if sc.pairs else np.empty(0)
             for side in ("A", "B")}
    ratios = "; ".join(f"{c.relative.metric} B/A ×{c.relative.value:.3f} ({c.relative.lo:.3f}–{c.relative.hi:.3f})"
                       for c in sc.checks if c.relative.kind == "ratio")
    return plots.two_ecdf_png(sides, title=f"{sc.scenario.id}: {sc.verdict} after {len(sc.pairs)} pairs; {ratios}\n"
                                           f"A: {result.a.describe()}\nB: {result.b.describe()}")


def write(result, directory, plots: bool = True) -> list[Path]:
    """compare.json, compare.md and (``plots``) one ECDF plot of A and B per scenario; their paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "compare.json").write_text(json.dumps(to_json(result), indent=1))
    (d / "compare.md").write_text(markdown(result))
    paths = [d / "compare.json", d / "compare.md"]
    if plots:
        for sc in result.scenarios:
            (d / plot_name(sc)).write_bytes(ecdf_png(result, sc))
            paths.append(d / plot_name(sc))
    return paths
