"""An SLO file from a baseline of your own runner: ``python -m netslo slo suggest RESULTS... > slo.yaml``.

Over the runs given (results directories, results.json files, or directories of past runs), every
check the gate's own SLO file judged is grouped by the scenario's labels (protocol, placement,
profile, family: what an objective selects). Each metric's threshold is the **worst upper bound of
its confidence interval over the runs** times ``margin``, rounded up to two significant digits
(a delay in the unit that keeps them, a fraction in percent). A check passes when its CI's upper
bound is at or below the threshold (docs/metrics.md, verdict), so the runs it came from pass it at
any margin >= 1: ``rejudge`` shows it on their saved samples. A metric whose CI has no upper bound
in some run (too few answered samples for that percentile) gets no threshold, and the file says so.

Records judged by another SLO file (the impairment presets, QoS) are not used: each record names
the file that judged it (``slo``), and results.json the session's own (``slo``).
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from netslo.core.errors import SpecError
from netslo.core.units import format_duration
from netslo.report.regression.runs import results_files
from netslo.slo import spec as slo_mod
from netslo.slo.runner import judge_all
from netslo.stats.analysis import analyze
from netslo.stats.samples import SampleSet

LABEL_KEYS = ("protocol", "placement", "profile", "family")   # what a suggested objective selects
DEFAULT_MARGIN = 1.5
STUDY_PREFIXES = tuple(f"{s}." for s in slo_mod.TRIAL_SERIES) + ("policy_cost.",)


@dataclass
class Bound:
    """One metric of one label set over the runs: CI upper bounds and sample counts as seen."""

    highs: list = field(default_factory=list)    # CI upper bound per check (s or fraction); inf = unbounded
    ns: list = field(default_factory=list)
    runs: set = field(default_factory=set)        # indices of the runs that judged it

    @property
    def worst(self) -> float:
        return max(self.highs)


def margin_of(text: str) -> float:
    """'1.5x' or '1.5' -> 1.5; a SpecError naming --margin unless it is a number >= 1."""
    try:
        value = float(str(text).strip().removesuffix("x").removesuffix("×"))
    except ValueError:
        value = float("nan")
    if not (value >= 1.0 and math.isfinite(value)):
        raise SpecError("--margin", text, "a factor >= 1, e.g. 1.5x (thresholds are never below the runs' bounds)")
    return value


def _round_up(value: float, digits: int = 2) -> float:
    """The smallest number >= ``value`` with ``digits`` significant digits."""
    if value <= 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(value)) - digits + 1)
    up = math.ceil(value / scale - 1e-9) * scale
    return float(f"{up:.{digits}g}")


def threshold_text(metric: str, value: float) -> str:
    """A threshold the SLO file accepts, >= ``value``: '0.23%' for a fraction, '1.3ms'/'88us' for a delay."""
    if metric in slo_mod.FRACTION_METRICS:
        pct = _round_up(value * 100) if value > 0 else 0.01   # a run without one loss: the smallest step
        return f"{pct:g}%"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale or unit == "us":
            return f"{_round_up(value / scale):g}{unit}"
    raise AssertionError("unreachable")


def _labels_key(labels: dict) -> tuple:
    return tuple((k, labels[k]) for k in LABEL_KEYS if labels.get(k) not in (None, ""))


def own_records(files: list[Path]):
    """(run index, results.json path, record) of every record of ``files`` the session's own SLO file
    judged (of results written before records named their file: every record)."""
    for run, f in enumerate(files):
        doc = json.loads(f.read_text())
        own = doc.get("slo")
        for rec in doc.get("results", []):
            if own is None or rec.get("slo") in (None, own):
                yield run, f, rec


def gather(paths) -> tuple[dict, list[Path]]:
    """({labels key: {metric: Bound}}, the results.json files read): every check of every record the
    session's own SLO file judged, over every run under ``paths``."""
    groups: dict = {}
    files = [f for p in paths for f in results_files(p, "RESULTS")]
    for run, _f, rec in own_records(files):
        key = _labels_key(rec.get("labels", {}))
        for c in rec.get("checks", []):
            if c["metric"].startswith(STUDY_PREFIXES):
                continue
            hi = c.get("hi")
            hi = float("inf") if hi in (None, "inf") else float(hi)
            b = groups.setdefault(key, {}).setdefault(c["metric"], Bound())
            b.highs.append(hi)
            b.ns.append(int(c.get("n", 0)))
            b.runs.add(run)
    return groups, files


def _name(key: tuple) -> str:
    d = dict(key)
    return "-".join(str(d[k]) for k in ("placement", "protocol", "profile", "family") if k in d) or "all"


def suggest(paths, margin: float = DEFAULT_MARGIN, extends: str | None = slo_mod.SHIPPED,
            today: str | None = None) -> str:
    """The SLO file's text (YAML with a comment on every threshold). ``extends``: the base the file
    extends (None: a file of its own, ``gate: selected-only``, with the shipped sampling defaults)."""
    groups, files = gather(paths)
    if not groups:
        raise SpecError("RESULTS", ", ".join(map(str, paths)),
                                "results of gate runs with judged scenarios (results.json with records)")
    today = today or datetime.date.today().isoformat()
    lines = [f"# netslo SLO file suggested on {today} by `python -m netslo slo suggest` from {len(files)} run(s):"]
    lines += [f"#   {f}" for f in files]
    lines += [f"# Each threshold: the worst upper bound of the metric's confidence interval over the runs x {margin:g},",
              "# rounded up to two significant digits; the comment says what it came from.",
              "version: 1"]
    if extends:
        lines.append(f"extends: {extends}")
    else:
        shipped = slo_mod.load(slo_mod.shipped_slo("slo.yaml")).sampling
        lines += ["gate: selected-only       # the scenarios these runs did not measure are not gated, and listed",
                  "defaults:                 # the shipped file's sampling: the runs' confidence intervals came from it",
                  f"  samples: {shipped.samples}", f"  max_samples: {shipped.max_samples}",
                  f"  interval: {format_duration(shipped.interval).replace('µs', 'us')}",
                  f"  confidence: {shipped.confidence:.0%}", f"  wait: {format_duration(shipped.wait)}"]
    lines.append("objectives:")
    for key in sorted(groups):
        metrics = groups[key]
        unbounded = [m for m, b in sorted(metrics.items()) if not math.isfinite(b.worst)]
        rows = []
        for metric, b in sorted(metrics.items()):
            if metric in unbounded:
                continue
            text = threshold_text(metric, b.worst * margin)
            worst = (f"{b.worst:.3%}" if metric in slo_mod.FRACTION_METRICS
                     else format_duration(b.worst).replace("µs", "us"))
            n = f"n {min(b.ns)}" if min(b.ns) == max(b.ns) else f"n {min(b.ns)}-{max(b.ns)}"
            rows.append(f"      {metric}: {text:<8} # worst CI upper bound {worst} over {len(b.runs)} run(s), "
                        f"{len(b.highs)} check(s), {n}; x {margin:g}")
        if not rows:
            lines.append(f"  # {_name(key)}: no threshold: {', '.join(unbounded)} had no CI upper bound in some run")
            continue
        select = ", ".join(f"{k}: {v}" for k, v in key)
        lines += [f"  - name: baseline-{_name(key)}", f"    select: {{{select}}}", "    thresholds:", *rows]
        if unbounded:
            lines.append(f"      # not set: {', '.join(unbounded)} (its CI had no upper bound in some run: too few samples)")
    return "\n".join(lines) + "\n"


def rejudge(path, spec: slo_mod.SloSpec, shift=None) -> list[tuple[str, str]]:
    """[(test, verdict)] of every record under ``path`` the session's own SLO file judged, judged
    again on its saved raw samples against ``spec``. ``shift(samples) -> samples`` alters them first
    (a test adds a delay). A record no objective of ``spec`` selects is 'not selected'."""
    out = []
    for _run, f, rec in own_records(results_files(path, "RESULTS")):
        if not rec.get("samples_file"):
            continue
        labels = {**rec.get("labels", {}), "datapath": rec.get("environment", {}).get("datapath", "")}
        thresholds = spec.thresholds_for(labels)
        if not thresholds:
            out.append((rec["test"], "not selected"))
            continue
        samples = SampleSet.load(f.parent / rec["samples_file"])
        if shift is not None:
            samples = shift(samples)
        checks = judge_all(analyze(samples, spec.sampling.confidence), thresholds, spec.sampling.confidence)
        verdict = (slo_mod.FAIL if any(c.verdict == slo_mod.FAIL for c in checks) else
                   slo_mod.INSUFFICIENT if any(c.verdict == slo_mod.INSUFFICIENT for c in checks) else slo_mod.PASS)
        out.append((rec["test"], verdict))
    return out
