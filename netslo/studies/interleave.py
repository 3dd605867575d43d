"""A/B comparisons on a host whose load drifts: measure the alternatives in alternating rounds.

Measuring A for a minute and then B for a minute confounds A-vs-B with whatever the host did in
between (on a shared 2-core runner the P50 of one path moved by 30 % between consecutive runs).
``interleaved`` runs round 1 of every alternative, then round 2, ... (each round starting with the
next alternative, so none is always first), and concatenates each one's rounds: slow drifts and
position effects hit all alternatives alike. ``p50_shift`` is then the P50 difference with a
bootstrap CI, and ``judge`` applies the SLO file to such fixed-size samples (no extra sampling).
"""

from __future__ import annotations

import numpy as np

from netslo.core import progress
from netslo.slo import runner
from netslo.slo import spec as slo_mod
from netslo.slo.runner import Outcome, check_pace, judge_all, require_measurable
from netslo.stats.analysis import Estimate, analyze, bootstrap_quantile_diff
from netslo.stats.delays import series_seconds
from netslo.stats.samples import SampleSet


def interleaved(cluster, client, specs: dict, rounds: int = 3, between=None, before=None) -> dict[str, SampleSet]:
    """{name: ProbeSpec} -> {name: SampleSet of ``rounds`` runs of spec.count requests each}.

    ``before(name)`` is called before each run (e.g. to set up that alternative's state),
    ``between(name, samples)`` after each run (e.g. to read rule counters)."""
    if rounds < 1:
        raise ValueError(f"rounds: value {rounds!r} — expected a whole number >= 1")
    parts: dict[str, list] = {name: [] for name in specs}
    names = list(specs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate: no alternative always first
            if before:
                before(name)
            s = cluster.probe(client, specs[name])
            parts[name].append(s)
            if between:
                between(name, s)
    return {name: SampleSet.concat(p) if len(p) > 1 else p[0] for name, p in parts.items()}


def rtt(samples: SampleSet) -> np.ndarray:
    """RTTs (s) of the answered requests: the ``rtt`` series (docs/metrics.md)."""
    return series_seconds(samples, "rtt")


def p50_shift(a: SampleSet, b: SampleSet, confidence: float = 0.95) -> Estimate:
    """P50(b) - P50(a) in seconds, with a percentile-bootstrap CI."""
    return bootstrap_quantile_diff(rtt(a), rtt(b), 50.0, confidence)


def judge(cluster, scenario, samples: SampleSet, spec: slo_mod.SloSpec, interval: float,
          remeasure=None) -> Outcome:
    """The SLO verdict of fixed-size samples (what ``runner.run`` does, without extra sampling).

    As in ``runner.run``, a failing verdict on samples taken over a host stall or a path freeze
    (``netslo.slo.stalls``) is judged again on fresh samples from ``remeasure()`` (if given;
    ``runner.REMEASURE_AFTER_STALL`` times at most, ``runner.settle_stalls``), and so are samples
    whose sender could not keep its schedule (``runner.OffPace``), once this host keeps time again;
    the notes say so. Without ``remeasure``, or when the last samples were off pace too, OffPace is
    raised naming every attempt."""
    notes = []
    attempt = 0 if remeasure is not None else runner.REMEASURE_AFTER_STALL   # without: the last
    while True:
        try:
            out = _judge(cluster, scenario, samples, spec, interval)
        except runner.OffPace as e:
            if attempt >= runner.REMEASURE_AFTER_STALL:
                raise runner.OffPace(f"{scenario.id}: {e} (measurement {len(notes) + 1})"
                                     + (". Before: " + "; ".join(notes) if notes else "")) from None
            notes.append(f"re-measured: in the previous samples the {e}; {runner.this_host_keeps_time()}")
        else:
            if not runner.settle_stalls(out, attempt, notes, spec.sampling.confidence):
                break
        samples = remeasure()
        attempt += 1
    out.notes.extend(notes)
    progress.note(out.summary_line())
    return out


def _judge(cluster, scenario, samples: SampleSet, spec: slo_mod.SloSpec, interval: float) -> Outcome:
    analysis = analyze(samples, spec.sampling.confidence)
    check_pace(analysis, interval)
    thresholds = spec.thresholds_for({**scenario.labels(), "datapath": cluster.datapath})
    require_measurable(thresholds, scenario, cluster)
    checks = judge_all(analysis, thresholds, spec.sampling.confidence)
    samples.meta.update(scenario=scenario.id)
    return Outcome(scenario, samples, analysis, checks, cluster.environment(), batches=int(samples.meta.get("runs", 1)),
                   slo_source=spec.source)
