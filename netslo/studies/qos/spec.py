"""slo-qos.yaml: an SLO file (same format as slo.yaml) plus a validated ``qos:`` section.

``load(path)`` splits the file: everything but ``qos`` is an ordinary SLO file (``netslo.slo.spec``, same
schema and verdict policy); ``qos`` holds the scenario data of the QoS tests, every value with its
unit (rates 'mbit', Kubernetes quantities '50M' for annotations, durations, percentages, sizes).
Objectives are picked by name prefix: ``for_prefix('priority')`` keeps ``priority.*``.
Every problem is one line naming file, field, value and expected form.
"""

from __future__ import annotations

from dataclasses import dataclass

from netslo.core import units, yamlfile
from netslo.core.errors import SpecError
from netslo.impair.shaping import bandwidth, priority
from netslo.slo import spec as slo_mod
from netslo.traffic.dscp import tos_byte

CCS = ("cubic", "bbr", "reno")


def _int(lo: int, hi: int):
    def parse(v, f):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise SpecError(f, v, f"a whole number {lo}..{hi}")
        return v
    return parse


def _factor(v, f):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1.0 < v <= 100.0:
        raise SpecError(f, v, "a number above 1 and at most 100")
    return float(v)


def _positive(parse):
    def p(v, f):
        x = parse(v, f)
        if x <= 0:
            raise SpecError(f, v, "a value > 0")
        return x
    return p


def _list(parse, allowed=None):
    def p(v, f):
        if not isinstance(v, list) or not v:
            raise SpecError(f, v, "a non-empty list")
        out = [parse(x, f"{f}[{i}]") for i, x in enumerate(v)]
        return tuple(out)
    return p


def _cc(v, f):
    if v not in CCS:
        raise SpecError(f, v, f"one of {', '.join(CCS)}")
    return v


def _loss(v, f):
    x = units.percent(v, f)
    if not 0 < x < 0.5:
        raise SpecError(f, v, "a percentage above 0% and below 50%")
    return x


def _tolerance(v, f):
    x = units.percent(v, f)
    if not 0 < x < 1:
        raise SpecError(f, v, "a percentage above 0% and below 100%")
    return x


RATE = _positive(lambda v, f: units.rate(v, f))
DUR = _positive(lambda v, f: units.duration(v, f))
SIZE = _positive(lambda v, f: units.size(v, f))
QUANTITY = bandwidth.quantity
MARK = lambda v, f: tos_byte(v, f) >> 2  # noqa: E731

SCHEMA = {
    "dscp": {"marks": (_list(MARK), ("EF", "AF41", "CS1")), "packets": (_int(1, 50), 3),
             "rewrite_to": (MARK, "AF11")},
    "priority": {"link": (None, None), "queue": (None, None), "burst": (None, None), "classes": (None, None),
                 "bulk_cc": (_cc, "cubic"), "settle": (DUR, "1s")},
    "bandwidth": {"egress": (QUANTITY, "50M"), "ingress": (QUANTITY, "50M"), "wrong_factor": (_factor, 2),
                  "duration": (DUR, "3s"), "steady_from": (DUR, "1s"), "bin": (DUR, "100ms"),
                  "tolerance": (_tolerance, "10%"), "cc": (_cc, "cubic")},
    "congestion": {"bottleneck": (RATE, "50mbit"), "queue": (DUR, "25ms"), "loss": (_list(_loss), ("1%", "3%")),
                   "algorithms": (_list(_cc), CCS), "duration": (DUR, "2s"), "bbr_vs_cubic_loss": (_loss, "3%"),
                   "tolerance": (_tolerance, "15%")},
    "netem": {"delay": (DUR, "25ms"), "loss": (_loss, "1%"), "rate": (RATE, "50mbit"),
              "duration": (DUR, "6s"), "bbr_duration": (DUR, "3s"), "omit": (DUR, "1s")},
    "iperf3": {"bottleneck": (RATE, "50mbit"), "duration": (DUR, "3s"), "tolerance": (_tolerance, "10%")},
    "slow_start_after_idle": {"size": (SIZE, "100kB"), "interval": (DUR, "1s"), "count": (_int(3, 100), 5),
                              "delay": (DUR, "10ms"), "min_ratio": (_factor, 2.0)},
    "bufferbloat": {"bottleneck": (RATE, "20mbit"), "queue": (DUR, "50ms"), "interval": (DUR, "10ms"),
                    "count": (_int(50, 100_000), 300), "algorithms": (_list(_cc), CCS), "settle": (DUR, "500ms")},
}


def _section(name: str, doc) -> dict:
    where = f"qos.{name}"
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise SpecError(where, doc, f"a mapping with the keys {', '.join(SCHEMA[name])}")
    extra = sorted(set(doc) - set(SCHEMA[name]))
    if extra:
        raise SpecError(f"{where}.{extra[0]}", doc[extra[0]], f"one of the keys {', '.join(SCHEMA[name])}")
    out = {}
    for key, (parse, default) in SCHEMA[name].items():
        if parse is None:
            continue
        raw = doc.get(key, default)
        out[key] = parse(list(raw) if isinstance(raw, tuple) else raw, f"{where}.{key}")
    return out


DEFAULT_POLICY = {"link": "20mbit", "queue": "50ms", "burst": "16KiB",
                  "classes": [{"name": "ef", "dscp": ["EF"], "rate": "4mbit", "prio": 0},
                              {"name": "be", "default": True, "rate": "16mbit", "prio": 1}]}


@dataclass
class QosSpec:
    """The validated file: ``slo`` (objectives + sampling) and one dict per ``qos`` section."""

    slo: slo_mod.SloSpec
    sections: dict
    policy: priority.QosPolicy

    def __getitem__(self, name: str) -> dict:
        return self.sections[name]

    def for_prefix(self, prefix: str) -> slo_mod.SloSpec:
        objs = [o for o in self.slo.objectives if o.name.startswith(prefix + ".")]
        if not objs:
            raise SpecError(f"{self.slo.source}: objectives", prefix, f"at least one objective named '{prefix}.<...>'")
        return slo_mod.SloSpec(self.slo.sampling, objs, self.slo.source)


def parse(doc, source: str = "<memory>") -> QosSpec:
    if not isinstance(doc, dict):
        raise SpecError("(top level)", doc, "a mapping with version, objectives and qos", where=source)
    rest = {k: v for k, v in doc.items() if k != "qos"}
    spec = slo_mod.parse(rest, source)
    q = doc.get("qos") or {}
    try:
        if not isinstance(q, dict):
            raise SpecError("qos", q, f"a mapping with the sections {', '.join(SCHEMA)}")
        extra = sorted(set(q) - set(SCHEMA))
        if extra:
            raise SpecError(f"qos.{extra[0]}", q[extra[0]], f"one of the sections {', '.join(SCHEMA)}")
        sections = {name: _section(name, q.get(name)) for name in SCHEMA}
        pdoc = dict(DEFAULT_POLICY)
        pdoc.update({k: v for k, v in (q.get("priority") or {}).items() if k in ("link", "queue", "burst", "classes")})
        policy = priority.parse_policy(pdoc, "qos.priority")
        b = sections["bandwidth"]
        if b["steady_from"] >= b["duration"] or b["bin"] * 5 > b["duration"] - b["steady_from"]:
            raise SpecError("qos.bandwidth.steady_from", (q.get("bandwidth") or {}).get("steady_from", "1s"),
                            "a duration below qos.bandwidth.duration leaving at least 5 bins of steady state")
        n = sections["netem"]
        for key in ("duration", "bbr_duration"):
            if n[key] <= n["omit"]:
                raise SpecError(f"qos.netem.{key}", (q.get("netem") or {}).get(key, SCHEMA["netem"][key][1]),
                                "a duration above qos.netem.omit")
    except SpecError as e:
        raise e.located(source) from None
    return QosSpec(spec, sections, policy)


def load(path) -> QosSpec:
    return parse(yamlfile.read(path, "--qos-slo-file"), str(path))
