"""SLO spec: YAML -> validated model (JSON Schema exported), and the verdict policy.

File format (units are mandatory)::

    version: 1
    defaults:                 # how each scenario is sampled
      samples: 1000           # first batch of requests
      max_samples: 4000       # bound on extra sampling when a verdict is inconclusive
      interval: 2ms           # open-loop send period
      confidence: 95%         # CI level for every statistic
      wait: 1s                # how long to wait for answers after the last request
      udp_sender: python      # or native: udp requests from the compiled send loop (high rates)
      trials: 40              # trials of a change study (policy_enforce/policy_allow/svc_program/svc_endpoint)
    objectives:
      - name: udp-latency
        select: {protocol: [udp], placement: [same-node, cross-node], profile: [1k]}  # omitted = any
                              # also datapath, and family: ipv4 | ipv6 (the scenario's IP family)
        thresholds: {rtt.p50: 1ms, rtt.p99: 10ms, ipdv.p99: 5ms, loss: 1%}
      - name: policy-on-calico
        select: {datapath: calico}
        trials: 12            # a change study's trials for this objective (default: defaults.trials)
        thresholds: {policy_enforce.p50: 500ms}
      - name: cross-zone      # node pairs of a mesh (netslo.studies.mesh): zone/pool 'a' or 'a~b',
        select: {zones: cross}  # zones/pools same | cross; a scenario has none of these keys
        thresholds: {rtt.p99: 5ms, mesh.p99.rtt.p99: 2ms}   # per pair; P99 over pairs of per-pair P99

Every threshold is an upper bound (metric <= value). Verdict per threshold, from the metric's CI
[lo, hi]: **pass** when hi <= threshold, **fail** when lo > threshold, otherwise **inconclusive**:
the runner samples more (in batches of ``samples``, up to ``max_samples`` in total) and, if still
inconclusive, decides on the point estimate and says so in the message — but only where the CI has
both bounds: a percentile needs enough answered samples for that (two-sided 95 %: P50 6, P99 368,
P99.9 3688; ``samples_needed``), and a check that still lacks a bound when sampling runs out is
**insufficient**: the test errors, naming n and the n it needs. It never passes on a point estimate.
A metric with no data at all (every request lost) fails its check with the reason.

Change studies (``netslo.studies.enforcement``, ``netslo.studies.policy_cost``) have metrics of their own, judged on
``trials`` trials (a percentile those cannot bound is rejected at load) or on fixed interleaved rounds;
a scenario gets only the metrics of its ``study`` label (``STUDY_OF``).

``allow_skips: [CATEGORY, ...]`` declares skips of those categories expected (``netslo.slo.skips``).

Layers: ``extends: netslo`` starts from the objectives shipped with the gate (``extends: FILE``: from
another SLO file, relative to this one). The file's ``defaults`` keys replace the base's, an
objective of the same name replaces the base's objective in its place, a new one is added after
them; ``allow_skips`` and ``gate`` are the file's when it sets them, else the base's.

``gate: all`` (the default): every scenario the session collects must be selected by an objective,
else it is a configuration error. ``gate: selected-only``: the scenarios no objective selects are
not gated — deselected at collection and listed as such in every report (``SloSpec.selects``).
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from netslo.core import units, yamlfile
from netslo.core.errors import SpecError
from netslo.core.families import FAMILIES
from netslo.core.resources import shipped_slo
from netslo.slo import skips
from netslo.stats.analysis import Estimate
from netslo.traffic.probes import SENDERS

DELAY_SERIES = ("rtt", "rtt_app", "owd_up", "owd_down", "ipdv", "ipdv_app", "ipdv_up", "ipdv_down", "pdv",
                "server_time", "timer_error", "dns")   # dns: lookup time of the dns probe
DELAY_STATS = ("min", "mean", "p50", "p90", "p99", "p99.9", "max")
FRACTION_METRICS = ("loss", "loss_up", "loss_down", "dup", "reorder", "dns.fail", "dns.retry")
POINT_DELAY_METRICS = ("rfc3550",)
SELECT_KEYS = ("protocol", "placement", "profile", "datapath", "family", "zone", "zones", "pool", "pools")
# keys only a node pair of a mesh has (netslo.studies.mesh): its zone and pool ('a', or 'a~b' across
# two, sorted) and whether its nodes share them ('same' | 'cross'); a scenario without them never matches
MESH_SELECT_KEYS = ("zone", "zones", "pool", "pools")
SHIPPED = "netslo"                 # extends: the gate's own SLO file
GATE_ALL, GATE_SELECTED_ONLY = "all", "selected-only"
# Series of one value per trial of a change study (netslo.studies.enforcement), seconds; a percentile of them is
# bounded by ``defaults.trials`` trials, not by the probe's samples. Mean is not offered: a trial not
# done within its window is censored (+inf), and a mean of censored values means nothing.
# The disruption study's series (netslo.studies.disruption, docs/metrics.md "Disruption"): one value per
# action; durations (s) but for the loss (a fraction) and the counts of connections reset and of new
# connections that failed.
DISRUPTION_DURATIONS = ("disruption.outage", "disruption.outage_up", "disruption.outage_down",
                        "disruption.recovery", "disruption.stall")
DISRUPTION_FRACTIONS = ("disruption.loss",)
DISRUPTION_COUNTS = ("disruption.resets", "disruption.conn_fail", "disruption.dns_timeouts")
TRIAL_SERIES = ("policy_enforce", "policy_allow", "svc_program", "svc_endpoint",
                *DISRUPTION_DURATIONS, *DISRUPTION_FRACTIONS, *DISRUPTION_COUNTS)
TRIAL_STATS = ("min", "p50", "p90", "p99", "p99.9", "max")
SHIFT_METRICS = ("policy_cost.p50", "policy_cost.p99")   # RTT percentile shift, most decoy policies vs none
# the study a metric belongs to (a scenario's 'study' label); metrics absent here belong to probe scenarios
STUDY_OF = {"policy_enforce": "policy", "policy_allow": "policy", "policy_cost": "policy-cost",
            "svc_program": "service", "svc_endpoint": "service-endpoint", "disruption": "disruption",
            "mesh": "mesh"}
# what a mesh judges per pair (netslo.stats.mesh.pair_pvalue): other metrics of the objectives are left out
MESH_PAIR_METRIC_RE = r"^(rtt\.(p50|p90|p99|p99\.9)|loss)$"

_DURATION_RE = r"^\s*[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?\s*(ns|us|µs|ms|s|sec|min)\s*$"
_PERCENT_RE = r"^\s*[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?\s*%\s*$"
_DELAY_METRIC_RE = (r"^((" + "|".join(DELAY_SERIES) + r")\.(" + "|".join(s.replace(".", r"\.") for s in DELAY_STATS)
                    + r")|" + "|".join(POINT_DELAY_METRICS) + r")$")
COMPARE_METRIC_RE = r"^(rtt\.p(50|90|99|99\.9)|loss)$"   # compare: B/A of an RTT percentile, or loss B − A
_FRACTION_METRIC_RE = r"^(" + "|".join(m.replace(".", r"\.") for m in FRACTION_METRICS) + r")$"
_STATS_RE = r")\.(" + "|".join(s.replace(".", r"\.") for s in TRIAL_STATS) + r")"
_STUDY_METRIC_RE = (r"^((" + "|".join(m.replace(".", r"\.") for m in TRIAL_SERIES if m not in DISRUPTION_FRACTIONS + DISRUPTION_COUNTS)
                    + _STATS_RE + r"|" + "|".join(m.replace(".", r"\.") for m in SHIFT_METRICS) + r")$")
_STUDY_FRACTION_RE = r"^((" + "|".join(m.replace(".", r"\.") for m in DISRUPTION_FRACTIONS) + _STATS_RE + r")$"
_STUDY_COUNT_RE = r"^((" + "|".join(m.replace(".", r"\.") for m in DISRUPTION_COUNTS) + _STATS_RE + r")$"


def trial_series(metric: str) -> str | None:
    """The trial series of a study metric ('disruption.outage' of 'disruption.outage.p50'), else None."""
    for series in TRIAL_SERIES:
        if metric.startswith(series + ".") and metric[len(series) + 1:] in TRIAL_STATS:
            return series
    return None


def unit_of(metric: str) -> str:
    """'1' (a fraction), 'count' (a whole number) or 's' (a duration): how a threshold of ``metric``
    is written and its estimate printed."""
    if metric in FRACTION_METRICS or trial_series(metric) in DISRUPTION_FRACTIONS or \
            (metric.startswith("mesh.") and metric.endswith(".loss")):
        return "1"
    if trial_series(metric) in DISRUPTION_COUNTS:
        return "count"
    return "s"


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of an SLO file; ``python -m netslo slo-schema`` prints it."""
    selector = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://netslo.invalid/schema/slo-v1.json",
        "title": "netslo SLO file",
        "type": "object",
        "additionalProperties": False,
        "required": ["version"],
        "if": {"not": {"required": ["extends"]}},
        "then": {"required": ["objectives"]},
        "properties": {
            "version": {"const": 1},
            "extends": {"type": "string", "minLength": 1,
                        "description": f"'{SHIPPED}' (the objectives shipped with the gate) or the path of "
                                       "another SLO file, relative to this one"},
            "gate": {"enum": [GATE_ALL, GATE_SELECTED_ONLY],
                     "description": "all: every collected scenario needs an objective (default); "
                                    "selected-only: the ones no objective selects are not gated, and listed"},
            "defaults": {
                "type": "object", "additionalProperties": False,
                "properties": {
                    "samples": {"type": "integer", "minimum": 20, "maximum": 10_000_000},
                    "max_samples": {"type": "integer", "minimum": 20, "maximum": 10_000_000},
                    "interval": {"$ref": "#/$defs/duration"},
                    "confidence": {"$ref": "#/$defs/percent"},
                    "wait": {"$ref": "#/$defs/duration"},
                    "trials": {"type": "integer", "minimum": 5, "maximum": 100_000,
                               "description": "trials of a change study (policy enforcement, Service "
                                              "programming); bounds which percentiles of them can be judged"},
                    "udp_sender": {"enum": list(SENDERS),
                                   "description": "who sends udp requests: the Python loop or the compiled "
                                                  "one (high rates; built on first use with cc)"},
                },
            },
            "objectives": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/objective"}},
            "allow_skips": {"type": "array", "items": {"enum": sorted(skips.CATEGORIES)}, "uniqueItems": True,
                            "description": "skip categories this gate declares expected (netslo.slo.skips)"},
        },
        "$defs": {
            "duration": {"type": "string", "pattern": _DURATION_RE,
                         "description": "a duration with a unit, e.g. '250us', '5ms', '1.5s'"},
            "percent": {"type": "string", "pattern": _PERCENT_RE,
                        "description": "a percentage with '%', e.g. '0.5%'"},
            "margin": {"type": "string", "pattern": r"^\s*\+?[0-9]*\.?[0-9]+\s*%\s*$",
                       "description": "how much worse B may be than A: '+5%' (of A's percentile, or "
                                      "percentage points of loss)"},
            "objective": {
                "type": "object", "additionalProperties": False, "required": ["name"],
                "properties": {
                    "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
                    "trials": {"type": "integer", "minimum": 5, "maximum": 100_000,
                               "description": "trials of the change study this objective judges (default: "
                                              "defaults.trials), e.g. fewer on a cluster whose changes take seconds"},
                    "select": {"type": "object", "additionalProperties": False,
                               "properties": {k: selector for k in SELECT_KEYS}},
                    "compare": {
                        "type": "object", "minProperties": 1, "additionalProperties": False,
                        "description": "margins of a comparison of two clusters (python -m netslo compare)",
                        "patternProperties": {COMPARE_METRIC_RE: {"$ref": "#/$defs/margin"}},
                    },
                    "thresholds": {
                        "type": "object", "minProperties": 1, "additionalProperties": False,
                        "patternProperties": {_DELAY_METRIC_RE: {"$ref": "#/$defs/duration"},
                                              _FRACTION_METRIC_RE: {"$ref": "#/$defs/percent"},
                                              _STUDY_METRIC_RE: {"$ref": "#/$defs/duration"},
                                              _STUDY_FRACTION_RE: {"$ref": "#/$defs/percent"},
                                              # a mesh's objective over the pairs it selects (netslo.stats.mesh.over_pairs):
                                              # 'mesh.p99.rtt.p99', P99 over pairs of each pair's RTT P99 (clusterloader2's form)
                                              r"^mesh\.(p50|p90|p99|max)\.rtt\.(p50|p90|p99)$": {"$ref": "#/$defs/duration"},
                                              r"^mesh\.(p50|p90|p99|max)\.loss$": {"$ref": "#/$defs/percent"},
                                              _STUDY_COUNT_RE: {"type": "integer", "minimum": 0}},
                    },
                },
            },
        },
    }


def _path(err: jsonschema.ValidationError) -> str:
    out = ""
    for p in err.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _expected(err: jsonschema.ValidationError) -> tuple[str, object, str]:
    """(field, value, expected form) of a schema error, phrased for people."""
    where, v, schema = _path(err), err.instance, err.schema
    kind = err.validator
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(v) - set(allowed)) if isinstance(v, dict) else []
        if "patternProperties" in schema:
            form = ("a known metric: <series>.<stat> with series " + "/".join(DELAY_SERIES) + " and stat "
                    + "/".join(DELAY_STATS) + " (a duration), or " + "/".join(FRACTION_METRICS + POINT_DELAY_METRICS)
                    + ", or a study metric " + "/".join(TRIAL_SERIES) + " with stat " + "/".join(TRIAL_STATS)
                    + " or " + "/".join(SHIFT_METRICS) + " (a duration; " + "/".join(DISRUPTION_FRACTIONS)
                    + " a percentage, " + "/".join(DISRUPTION_COUNTS) + " a whole number)")
        else:
            form = "one of the keys " + ", ".join(allowed)
        key = extra[0] if extra else "?"
        return (f"{where}.{key}" if where != "(top level)" else key), key, form
    if kind == "required":
        missing = [r for r in schema["required"] if r not in (v or {})]
        if missing == ["objectives"]:
            return where, None, f"a mapping with the key 'objectives' (or 'extends: {SHIPPED}' to start from the shipped ones)"
        key = missing[0] if missing else "?"
        field = key if where == "(top level)" else f"{where}.{key}"
        if key == "version" and where == "(top level)":
            return field, None, "1 (the SLO file's schema version; every file starts with 'version: 1')"
        return field, None, f"a value: the key '{key}' is required here"
    if kind == "pattern" or (kind == "type" and "pattern" in schema):
        return where, v, schema.get("description", f"text matching {schema.get('pattern')}")
    if kind == "const":
        return where, v, f"{schema['const']!r}"
    if kind == "type":
        return where, v, f"a value of type {schema['type']}"
    if kind in ("minimum", "maximum"):
        return where, v, f"a number in {schema.get('minimum', '-inf')}..{schema.get('maximum', 'inf')}"
    if kind in ("minItems", "minProperties"):
        return where, v, "at least one entry"
    return where, v, err.message


# ---- the model -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Threshold:
    """metric <= limit. ``limit`` in seconds for delay metrics, a fraction 0..1 for loss-like ones."""

    metric: str
    limit: float
    text: str          # as written in the file, e.g. '5ms'
    objective: str
    trials: int = 0    # a change study's metric: the trials it is judged on (objective's, else defaults.trials)


@dataclass(frozen=True)
class Margin:
    """compare: B may be worse than A by ``limit`` (a fraction of A's percentile, or of loss)."""

    metric: str
    limit: float
    text: str
    objective: str


@dataclass(frozen=True)
class Objective:
    name: str
    select: dict       # key -> tuple of allowed values (glob patterns)
    thresholds: tuple  # of Threshold
    margins: tuple = ()   # of Margin: what a comparison of two clusters judges

    def matches(self, labels: dict) -> bool:
        return all(any(fnmatch.fnmatchcase(str(labels.get(k, "")), pat) for pat in pats)
                   for k, pats in self.select.items())


@dataclass(frozen=True)
class Sampling:
    samples: int = 1000
    max_samples: int = 4000
    interval: float = 0.002
    confidence: float = 0.95
    wait: float = 1.0
    udp_sender: str = "python"   # python | native (netslo.traffic.probes.udp_native)
    trials: int = 40             # trials of a change study (netslo.studies.enforcement)

    @property
    def most_batches(self) -> int:
        """Batches of ``samples`` a measurement takes at most: max_samples / samples, rounded up."""
        return -(-self.max_samples // self.samples)


@dataclass
class SloSpec:
    """A validated SLO file (its layers flattened: ``layers`` = their sources, base first)."""

    sampling: Sampling
    objectives: list
    source: str = "<memory>"
    allow_skips: frozenset = frozenset()
    gate: str = GATE_ALL
    layers: tuple = ()

    def thresholds_for(self, labels: dict) -> list[Threshold]:
        """Every threshold of every objective whose selector matches the scenario labels and whose
        metric the scenario measures (a study's metrics only for the labels' ``study``, ``STUDY_OF``)."""
        study = labels.get("study")
        return [t for o in self.objectives if o.matches(labels) for t in o.thresholds
                if STUDY_OF.get(t.metric.partition(".")[0]) == study]

    def margins_for(self, labels: dict) -> list[Margin]:
        """The comparison margins of every objective whose selector matches the labels (the first
        objective that sets a metric wins)."""
        out: dict = {}
        for o in self.objectives:
            if o.matches(labels):
                for mg in o.margins:
                    out.setdefault(mg.metric, mg)
        return list(out.values())

    def selects(self, labels: dict) -> bool:
        """Could an objective judge a scenario of these labels? A selector key the labels lack (the
        datapath, before the cluster is up) is taken to match."""
        study = labels.get("study")
        return any(all((k not in labels and k not in MESH_SELECT_KEYS)
                       or any(fnmatch.fnmatchcase(str(labels.get(k, "")), p) for p in pats)
                       for k, pats in o.select.items())
                   and any(STUDY_OF.get(t.metric.partition(".")[0]) == study for t in o.thresholds)
                   for o in self.objectives)

    def not_selected_hint(self) -> str:
        """How to fix a scenario no objective selects, for the configuration error."""
        if self.gate == GATE_SELECTED_ONLY:
            return ""
        return (f"; or give {self.source} 'extends: {SHIPPED}' to keep the shipped objectives beside yours, "
                f"or 'gate: {GATE_SELECTED_ONLY}' to gate only what it selects")


def parse(doc, source: str = "<memory>") -> SloSpec:
    """Validate a loaded YAML document and the files it extends (``extends``, resolved relative to
    ``source``); SpecError (one line, prefixed with the file it is in) when invalid."""
    layers = _layers(doc, source, frozenset({_key(source)}))
    defaults: dict = {}
    for layer, src in layers:   # each layer's defaults checked where they are written
        defaults.update(layer.get("defaults") or {})
        sampling = _sampling(defaults, src)
    objectives: dict = {}       # name -> Objective; a later layer's replaces it in its place
    for layer, src in layers:
        where = src if src == source else f"{src} (extended by {source})"
        for o in _objectives(layer.get("objectives") or [], sampling, where):
            objectives[o.name] = o
    last = {k: next((lay[k] for lay, _ in reversed(layers) if k in lay), None) for k in ("allow_skips", "gate")}
    gate = last["gate"] or GATE_ALL
    declared = frozenset(last["allow_skips"] or ()) | ({"not_gated"} if gate == GATE_SELECTED_ONLY else set())
    return SloSpec(sampling, list(objectives.values()), source, declared, gate, tuple(src for _, src in layers))


def _key(source: str) -> str:
    return str(Path(source).resolve()) if source and not source.startswith("<") else source


def _layers(doc, source: str, seen: frozenset) -> list[tuple[dict, str]]:
    """[(document, its source)] of ``doc`` and the files it extends, base first; each schema-checked."""
    validator = jsonschema.Draft202012Validator(json_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:   # an unknown key first: a misspelt one also makes its real one missing
        unknown = [e for e in errors if e.validator == "additionalProperties"]
        best = unknown[0] if unknown else jsonschema.exceptions.best_match(errors)
        raise SpecError(*_expected(best), where=source)
    ext = doc.get("extends")
    if ext is None:
        return [(doc, source)]
    if ext == SHIPPED:
        path = shipped_slo("slo.yaml")
    else:
        path = Path(ext).expanduser()
        if not path.is_absolute() and not source.startswith("<"):
            path = Path(source).parent / path
    if _key(str(path)) in seen:
        raise SpecError("extends", ext, "a file that does not extend this one again (a circle of extends)", where=source)
    base = yamlfile.read(path, f"{source}: extends")
    return _layers(base, str(path), seen | {_key(str(path))}) + [(doc, source)]


def _sampling(d: dict, source: str) -> Sampling:
    try:
        base = Sampling()
        sampling = Sampling(
            samples=d.get("samples", base.samples),
            max_samples=d.get("max_samples", max(base.max_samples, d.get("samples", base.samples))),
            interval=units.duration(d["interval"], "defaults.interval") if "interval" in d else base.interval,
            confidence=units.percent(d["confidence"], "defaults.confidence") if "confidence" in d else base.confidence,
            wait=units.duration(d["wait"], "defaults.wait") if "wait" in d else base.wait,
            udp_sender=d.get("udp_sender", base.udp_sender),
            trials=d.get("trials", base.trials))
        if sampling.max_samples < sampling.samples:
            raise SpecError("defaults.max_samples", sampling.max_samples, f"a number >= defaults.samples ({sampling.samples})")
        if not 0.5 <= sampling.confidence < 1.0:
            raise SpecError("defaults.confidence", d.get("confidence"), "a percentage from 50% to below 100%")
        if sampling.interval <= 0:
            raise SpecError("defaults.interval", d.get("interval"), "a duration > 0, e.g. '2ms'")
    except SpecError as e:
        raise e.located(source) from None
    return sampling


def _objectives(docs: list, sampling: Sampling, source: str) -> list[Objective]:
    try:
        objectives, names = [], set()
        for i, o in enumerate(docs):
            if o["name"] in names:
                raise SpecError(f"objectives[{i}].name", o["name"], "a name not used by another objective")
            names.add(o["name"])
            select = {k: tuple([v] if isinstance(v, str) else v) for k, v in (o.get("select") or {}).items()}
            for pat in select.get("family", ()):
                if not fnmatch.filter(FAMILIES, pat):   # a typo would match nothing and gate nothing
                    raise SpecError(f"objectives[{i}].select.family", pat, f"{' or '.join(FAMILIES)} (or a glob matching one)")
            if not o.get("thresholds") and not o.get("compare"):
                raise SpecError(f"objectives[{i}]", o["name"], "an objective with 'thresholds' or 'compare' (or both)")
            margins = tuple(Margin(metric, units.percent(text.replace("+", ""), f"objectives[{i}].compare.{metric}"), text,
                                   o["name"]) for metric, text in (o.get("compare") or {}).items())
            ths = []
            trials = o.get("trials", sampling.trials)
            for metric, text in (o.get("thresholds") or {}).items():
                field_name = f"objectives[{i}].thresholds.{metric}"
                unit = unit_of(metric)
                limit = (units.percent(text, field_name) if unit == "1" else
                         float(text) if unit == "count" else units.duration(text, field_name))
                study = trial_series(metric) is not None
                if study:
                    _check_trials(metric, text, field_name, trials, sampling.confidence,
                                  f"objectives[{i}].trials" if "trials" in o else "defaults.trials")
                ths.append(Threshold(metric, limit, str(text), o["name"], trials if study else 0))
            objectives.append(Objective(o["name"], select, tuple(ths), margins))
    except SpecError as e:
        raise e.located(source) from None
    return objectives


def _check_trials(metric: str, text: str, field_name: str, trials: int, confidence: float, source: str) -> None:
    """SpecError when ``metric`` is a percentile that ``trials`` trials (set by ``source``) cannot bound."""
    need = samples_needed(metric, confidence)
    if need > trials:
        raise SpecError(field_name, text, f"a statistic {trials} trials ({source}) bound at "
                        f"{confidence:.0%} confidence: P{percentile_of(metric):g} needs {need} trials "
                        f"(raise {source}, or use p50/p90/max)")


def load(path) -> SloSpec:
    """Read and validate an SLO YAML file; every problem is a one-line SpecError naming the file."""
    return parse(yamlfile.read(path, "--netslo-slo"), str(path))


# ---- verdicts ------------------------------------------------------------------------------------

PASS, FAIL, INCONCLUSIVE, INSUFFICIENT = "pass", "fail", "inconclusive", "insufficient"


def percentile_of(metric: str) -> float | None:
    """99.0 for 'rtt.p99', None for metrics that are not percentiles."""
    m = re.search(r"\.p([0-9]+(?:\.[0-9]+)?)$", metric)
    return float(m.group(1)) if m else None


def samples_needed(metric: str, confidence: float) -> int:
    """Fewest answered samples for which percentile ``metric`` has a CI with both bounds at
    ``confidence`` (two-sided): the upper bound of P_q exists once (q/100)^n <= (1-confidence)/2.
    1 for metrics that are not percentiles."""
    q = percentile_of(metric)
    if q is None:
        return 1
    from netslo.stats.analysis import percentile_ci_ranks
    p = max(q, 100.0 - q) / 100.0
    n = max(1, math.ceil(math.log((1.0 - confidence) / 2.0) / math.log(p)) - 2)
    while True:
        lo, hi = percentile_ci_ranks(n, q, confidence)
        if lo >= 1 and hi <= n:
            return n
        n += 1


@dataclass(frozen=True)
class Check:
    """One threshold judged against one estimate."""

    threshold: Threshold
    estimate: Estimate
    verdict: str               # pass | fail | inconclusive | insufficient
    by_point: bool = False     # decided on the point estimate after sampling ran out
    note: str = ""             # why the check has no data or no bound (missing data, too few samples)

    def line(self) -> str:
        fmt = {"1": units.format_percent, "count": _format_count}.get(self.estimate.unit, units.format_duration)
        e, t = self.estimate, self.threshold
        if self.note:
            return f"{t.metric}: {self.note} [{self.verdict}; threshold {t.text}, objective {t.objective}]"
        ci = f"{fmt(e.lo)}–{fmt(e.hi)}" if math.isfinite(e.lo) and math.isfinite(e.hi) else \
            f"{fmt(e.lo)}–{fmt(e.hi)} (too few samples to bound)"
        op = {PASS: "<=", FAIL: ">", INCONCLUSIVE: "~"}[self.verdict]
        note = " — inconclusive at max samples, decided on the point estimate" if self.by_point else ""
        return (f"{t.metric} = {fmt(e.value)} (CI {ci}, n={e.n}) {op} threshold {t.text} "
                f"[objective {t.objective}]{note}")


def judge(estimate: Estimate, threshold: Threshold) -> str:
    """pass if the whole CI meets the threshold, fail if the whole CI breaks it, else inconclusive."""
    if math.isnan(estimate.value):
        return FAIL
    if estimate.hi <= threshold.limit:
        return PASS
    if estimate.lo > threshold.limit:
        return FAIL
    return INCONCLUSIVE


def decide(estimate: Estimate, threshold: Threshold, confidence: float = 0.95) -> Check:
    """Final verdict when no more samples may be taken: CI first; then the point estimate, only
    when the CI has both bounds; else INSUFFICIENT, naming n and the n the percentile needs."""
    v = judge(estimate, threshold)
    if v != INCONCLUSIVE:
        return Check(threshold, estimate, v)
    if not (math.isfinite(estimate.lo) and math.isfinite(estimate.hi)):
        need = samples_needed(threshold.metric, confidence)
        q = percentile_of(threshold.metric)
        what = f"P{q:g}" if q is not None else threshold.metric
        return Check(threshold, estimate, INSUFFICIENT,
                     note=f"not enough samples: n={estimate.n} answered samples cannot bound {what} at "
                          f"{confidence:.0%} confidence; it needs at least {need}")
    return Check(threshold, estimate, PASS if estimate.value <= threshold.limit else FAIL, by_point=True)


def missing(threshold: Threshold, reason: str) -> Check:
    """The check of a measurable metric that has no data: it fails, and says why."""
    unit = unit_of(threshold.metric)
    return Check(threshold, Estimate(math.nan, -math.inf, math.inf, 0, unit), FAIL, note=reason)


def _format_count(x: float) -> str:
    """A count as printed in a check: a whole number, or inf/nan."""
    return f"{x:.0f}" if math.isfinite(x) else str(x)


def sample_warnings(spec: SloSpec) -> list[str]:
    """Thresholds that ``max_samples`` can never bound (percentiles needing more answered samples)."""
    out = []
    for o in spec.objectives:
        for t in o.thresholds:
            if STUDY_OF.get(t.metric.partition(".")[0]):
                continue   # judged on trials (checked at load) or on fixed interleaved rounds
            need = samples_needed(t.metric, spec.sampling.confidence)
            if need > spec.sampling.max_samples:
                out.append(f"{spec.source}: objective {o.name}: {t.metric} needs at least {need} answered "
                           f"samples at {spec.sampling.confidence:.0%} confidence, but max_samples is "
                           f"{spec.sampling.max_samples}: it will end as 'not enough samples'")
    return out


def schema_json() -> str:
    return json.dumps(json_schema(), indent=2)
