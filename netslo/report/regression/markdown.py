"""regression.md: the verdict, the regressions table, notes, then every comparison."""

from __future__ import annotations

import math

import numpy as np

from netslo.core import units
from netslo.report import run_spread
from netslo.report.regression.comparison import Comparison
from netslo.report.regression.decision import (
    BOOTSTRAP,
    HOST_NOISE,
    IMPROVED,
    INSUFFICIENT,
    NOT_CONFIRMED,
    REGRESSED,
    SPREAD,
    UNCHANGED,
)


def _fmt(value: float, unit: str, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    text = units.format_percent(value) if unit == "1" else units.format_duration(value)
    return ("+" + text) if signed and value > 0 else text


def _p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "–"
    if p == 0.0:
        return "<1e-300"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _row(c: Comparison, with_verdict: bool) -> str:
    rel = f"{c.rel:+.0%}" if math.isfinite(c.rel) else "–"
    cells = [f"`{c.test}`", c.metric, _fmt(c.baseline, c.unit), _fmt(c.current, c.unit),
             f"{_fmt(c.delta, c.unit, True)} ({_fmt(c.delta_lo, c.unit, True)} … {_fmt(c.delta_hi, c.unit, True)})",
             rel, _fmt(c.allowed, c.unit), _p(c.p_adj), _p(c.p_mw), "–" if c.a12 is None else f"{c.a12:.2f}"]
    if with_verdict:
        cells.append({REGRESSED: "❌ regressed", IMPROVED: "✅ improved", UNCHANGED: "unchanged",
                      HOST_NOISE: "⚠️ host noise", NOT_CONFIRMED: "⚠️ not confirmed"}.get(c.verdict, c.verdict))
    return "| " + " | ".join(cells) + " |"


HEADER = ("| test | metric | baseline | current | Δ (95% CI) | Δ % | allowed Δ | p (Holm) | MW p | A |",
          "|---|---|---:|---:|---|---:|---:|---:|---:|---:|")


def _sharpness(family: list) -> list[str]:
    """'rtt.p99: median +35 % per test, +9 % gate index' per delay metric of run-spread comparisons."""
    out = []
    metrics = sorted({c.metric for c in family if c.prediction is not None})
    for m in metrics:
        per_test = [c.flag_above / c.baseline - 1 for c in family if c.metric == m and c.prediction is not None
                    and not c.test.startswith(run_spread.INDEX_TEST)]
        index = [c.flag_above / c.baseline - 1 for c in family if c.metric == m and c.prediction is not None
                 and c.test.startswith(run_spread.INDEX_TEST)]
        parts = []
        if per_test:
            parts.append(f"median {float(np.median(per_test)):+.0%} per test")
        if index:
            parts.append(f"{index[0]:+.0%} {run_spread.INDEX_TEST}")
        out.append(f"{m} {', '.join(parts)}")
    return out


def markdown(report) -> str:
    """regression.md of a ``Report``."""
    pol = report.policy
    regs = report.regressions
    family = [c for c in report.comparisons if c.verdict != INSUFFICIENT]
    tests = sorted({c.test for c in regs})
    head = (f"❌ {len(regs)} regression{'s' if len(regs) != 1 else ''} in {len(tests)} test{'s' if len(tests) != 1 else ''}"
            if regs else "✅ no regression")
    if report.missing:
        head += f"; ❌ {len(report.missing)} baseline test{'s' if len(report.missing) != 1 else ''} not measured"
    lines = [f"### netslo SLO regression vs baseline: {head}", ""]
    cur_env = report.current.environment[-1] if report.current.environment else {}
    lines.append(f"Baseline `{report.baseline_label or ', '.join(report.baseline.sources)}` "
                 f"({report.baseline.sessions} run{'s' if report.baseline.sessions != 1 else ''}); current run "
                 f"`{cur_env.get('run_id', '?')}`; {len(family)} comparisons of {', '.join(pol.metrics)}.")
    lines.append("")
    modes = {c.mode for c in family}
    if BOOTSTRAP in modes:
        lines.append(f"Block bootstrap (baseline of fewer than {pol.spread_min_runs} runs): a regression is a metric "
                     f"that grew by more than the allowed Δ = max({pol.min_effect_rel:.0%} of the baseline, "
                     f"{units.format_duration(pol.min_effect_abs)}) for delays or {units.format_percent(pol.min_loss_abs)} "
                     f"for loss, with a one-sided block-bootstrap p-value (blocks of {units.format_duration(pol.block_s)} "
                     f"of requests). One baseline run cannot show how much this runner moves between runs, so "
                     f"only large effects are flagged; a baseline of {pol.spread_min_runs}+ past runs is much sharper.")
        lines.append("")
    if SPREAD in modes:
        lines.append(f"Run spread (baseline of {pol.spread_min_runs}+ runs): each metric is judged against how much it "
                     f"moved between the baseline runs (one-sided Student-t prediction on the log scale); allowed Δ = "
                     f"max({pol.spread_min_effect_rel:.0%}, {units.format_duration(pol.spread_min_effect_abs)}) for delays, "
                     f"{units.format_percent(pol.spread_min_loss_abs)} for loss (exact binomial). The *{run_spread.INDEX_TEST}* "
                     f"rows judge the geometric mean over all tests, which catches a shift of every test that no "
                     f"single test can tell from noise.")
        lines.append("")
        sharp = _sharpness(family)
        if sharp:
            lines.append("Smallest increase this baseline can flag: " + "; ".join(sharp) + ".")
            lines.append("")
    lines.append(f"p (Holm) < {pol.alpha:.0%} over all {len(family)} comparisons fails the gate. MW p / A: "
                 f"Mann–Whitney U (current > baseline) and P(current > baseline), context only.")
    lines.append("")
    if regs:
        lines += ["#### Regressions", "", *HEADER]
        lines += [_row(c, False) for c in regs]
        lines.append("")
    noisy = [c for c in report.comparisons if c.verdict == HOST_NOISE]
    if noisy:
        lines += ["⚠️ Set aside as host noise (not failed; repeat on a quieter runner): " + "; ".join(
            f"`{c.test}` {c.metric} {_fmt(c.baseline, c.unit)} → {_fmt(c.current, c.unit)} while the sender's "
            f"timer error P99 went {_fmt(c.timer_p99[0], 's')} → {_fmt(c.timer_p99[1], 's')}" for c in noisy), ""]
    unconfirmed = [c for c in report.comparisons if c.verdict == NOT_CONFIRMED]
    if unconfirmed:
        lines += ["⚠️ Not confirmed (not failed; the re-measurement in this session did not regress): " + "; ".join(
            f"`{c.test}` {c.metric} {_fmt(c.baseline, c.unit)} → {_fmt(c.current, c.unit)}, re-measured "
            f"{_fmt(c.confirm[0], c.unit) if c.confirm else '?'}" for c in unconfirmed), ""]
    if report.rerun is not None:
        lines += [f"Re-measured in this session because they looked regressed ({len(report.rerun.samples)}): "
                  + ", ".join(f"`{t}`" for t in sorted(report.rerun.samples)), ""]
    if report.definitions:
        lines += ["⚠️ Baseline recorded at other clock points (`timestamps`, docs/metrics.md): " + "; ".join(
            f"`{t}` baseline {'/'.join(d['baseline'])}, current {'/'.join(d['current'])}: "
            + (f"converted {', '.join(d['converted'])} (compared as rtt_app / ipdv_app, user space to user space, "
               f"which both keep)" if d["converted"] else "nothing converted")
            + (f"; refused {', '.join(d['refused'])} (not compared: defined at one clock point only)"
               if d["refused"] else "") for t, d in sorted(report.definitions.items())), ""]
    changes = report.environment_changes()
    if changes:
        lines += ["⚠️ The environment differs from the baseline: " + "; ".join(changes), ""]
    if report.missing:
        lines += ["❌ Tests in the baseline but not measured in this run (fail the regression check): "
                  + ", ".join(f"`{t}`" for t in report.missing), ""]
    if report.excused:
        lines += ["Tests in the baseline left out on purpose: "
                  + ", ".join(f"`{t}` ({why})" for t, why in sorted(report.excused.items())), ""]
    if report.only_current:
        lines += ["New tests without a baseline: " + ", ".join(f"`{t}`" for t in report.only_current), ""]
    lines += [f"<details><summary>All {len(report.comparisons)} comparisons</summary>", "",
              HEADER[0][:-1] + "| verdict |", HEADER[1] + "---|"]
    lines += [_row(c, True) for c in report.comparisons]
    lines += ["", "</details>", ""]
    return "\n".join(lines)
