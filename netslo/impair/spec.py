"""Impairment spec: what netem should do to one direction of a pod's traffic, as validated data.

YAML / dict form (units are mandatory, exactly as in the SLO file)::

    preset: wifi            # optional: start from a named preset, keys below override it
    direction: egress       # egress (pod side) | host-egress (node side of the veth) | ingress (ifb)
    delay: 10ms             # constant one-way delay added
    jitter: 2ms             # spread: standard deviation (normal/pareto/paretonormal), half-width (uniform)
    distribution: normal    # uniform (netem's default) | normal | pareto | paretonormal
    delay_correlation: 0%   # netem's correlated random generator for the delay
    loss: 1%                # random loss, or instead
    gilbert_elliott: {p: 1%, r: 30%, loss_in_bad: 100%, loss_in_good: 0%}   # bursty loss (2-state)
    loss_correlation: 0%
    corrupt: 0.1%           # one bit flipped (packet then fails its checksum: lost to the socket)
    corrupt_correlation: 0%
    duplicate: 1%
    duplicate_correlation: 0%
    reorder: 25%            # this share of packets skips the delay (needs delay > 0)
    reorder_correlation: 0%
    gap: 5                  # reorder only every gap-th eligible packet (whole number >= 1)
    rate: 20mbit            # serialisation rate of netem
    limit: 1000             # netem queue limit, packets

Directions (traffic of the pod the impairment is attached to):
  egress       netem root qdisc on the pod's eth0: packets the pod sends
  host-egress  netem root qdisc on the pod's host-side veth in its node: packets towards the pod
  ingress      ingress qdisc on the pod's eth0 redirects (mirred) to an ifb whose root is netem:
               packets the pod receives, impaired after they arrived (like ``tc ... ifb``)

Every error is a one-line ``SpecError`` naming the field, the value and the expected form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from netslo.core import units
from netslo.core.errors import SpecError

DIRECTIONS = ("egress", "host-egress", "ingress")
DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
MAX_DELAY_S = 10.0
MAX_LIMIT = 1_000_000
PERCENT_KEYS = ("delay_correlation", "loss", "loss_correlation", "corrupt", "corrupt_correlation",
                "duplicate", "duplicate_correlation", "reorder", "reorder_correlation")
KEYS = ("preset", "name", "direction", "delay", "jitter", "distribution", *PERCENT_KEYS,
        "gilbert_elliott", "gap", "rate", "limit")
GE_KEYS = ("p", "r", "loss_in_bad", "loss_in_good")


@dataclass(frozen=True)
class GilbertElliott:
    """Two-state bursty loss (netem ``loss gemodel``). All fields are probabilities 0..1.

    p: good -> bad per packet; r: bad -> good per packet; loss_in_bad (netem's 1-h) and
    loss_in_good (netem's 1-k): the loss probability in each state."""

    p: float
    r: float
    loss_in_bad: float = 1.0
    loss_in_good: float = 0.0

    @property
    def stationary_loss(self) -> float:
        """Long-run loss fraction: pi_bad * loss_in_bad + pi_good * loss_in_good."""
        if self.p + self.r == 0:
            return self.loss_in_good
        bad = self.p / (self.p + self.r)
        return bad * self.loss_in_bad + (1 - bad) * self.loss_in_good

    @property
    def state_correlation(self) -> float:
        """Lag-1 autocorrelation of the state chain, 1 - p - r (0 = memoryless)."""
        return 1.0 - self.p - self.r


@dataclass(frozen=True)
class Impairment:
    """A validated impairment. Times in seconds, fractions 0..1, rate in bit/s, limit in packets."""

    name: str = "custom"
    direction: str = "egress"
    delay: float = 0.0
    jitter: float = 0.0
    distribution: str = "uniform"
    delay_correlation: float = 0.0
    loss: float = 0.0
    loss_correlation: float = 0.0
    gilbert_elliott: GilbertElliott | None = None
    corrupt: float = 0.0
    corrupt_correlation: float = 0.0
    duplicate: float = 0.0
    duplicate_correlation: float = 0.0
    reorder: float = 0.0
    reorder_correlation: float = 0.0
    gap: int = 0
    rate: float = 0.0
    limit: int = 1000
    source: str = field(default="", compare=False)

    # ---- derived ------------------------------------------------------------------------------
    @property
    def expected_loss(self) -> float:
        """Loss fraction the spec asks for (stationary for Gilbert-Elliott)."""
        return self.gilbert_elliott.stationary_loss if self.gilbert_elliott else self.loss

    @property
    def reorder_share(self) -> float:
        """Share of packets that skip the delay: p / (p*(gap-1) + 1) for netem's gap counter."""
        if not self.reorder:
            return 0.0
        g = max(self.gap, 1)
        return self.reorder / (self.reorder * (g - 1) + 1)

    def with_direction(self, direction: str) -> "Impairment":
        if direction not in DIRECTIONS:
            raise SpecError("direction", direction, f"one of {', '.join(DIRECTIONS)}")
        return replace(self, direction=direction)

    def describe(self) -> str:
        """Short human text, e.g. 'delay 10ms ±2ms normal, loss 1%' (what tc would show)."""
        d, p = units.format_duration, units.format_percent
        parts = []
        if self.delay or self.jitter:
            s = f"delay {d(self.delay)}"
            if self.jitter:
                s += f" ±{d(self.jitter)} {self.distribution}"
            if self.delay_correlation:
                s += f" corr {p(self.delay_correlation)}"
            parts.append(s)
        if self.gilbert_elliott:
            g = self.gilbert_elliott
            parts.append(f"loss gilbert-elliott p={p(g.p)} r={p(g.r)} bad={p(g.loss_in_bad)} "
                         f"good={p(g.loss_in_good)} (~{p(g.stationary_loss)})")
        elif self.loss:
            parts.append(f"loss {p(self.loss)}" + (f" corr {p(self.loss_correlation)}" if self.loss_correlation else ""))
        if self.corrupt:
            parts.append(f"corrupt {p(self.corrupt)}")
        if self.duplicate:
            parts.append(f"duplicate {p(self.duplicate)}")
        if self.reorder:
            parts.append(f"reorder {p(self.reorder)}" + (f" gap {self.gap}" if self.gap > 1 else ""))
        if self.rate:
            parts.append(f"rate {self.rate / 1e6:g}mbit")
        if self.limit != 1000:
            parts.append(f"limit {self.limit}")
        return ", ".join(parts) or "none"

    def __str__(self) -> str:
        return f"{self.name} [{self.direction}: {self.describe()}]"

    def to_doc(self) -> dict:
        """The YAML/JSON form with units (``parse(to_doc())`` gives the same Impairment)."""
        doc: dict = {"name": self.name, "direction": self.direction}
        if self.delay or self.jitter:
            doc["delay"] = f"{self.delay * 1e3:.12g}ms"
        if self.jitter:
            doc["jitter"] = f"{self.jitter * 1e3:.12g}ms"
            doc["distribution"] = self.distribution
        for k in PERCENT_KEYS:
            v = getattr(self, k)
            if v:
                doc[k] = f"{v * 100:.10g}%"
        if self.gilbert_elliott:
            doc["gilbert_elliott"] = {k: f"{getattr(self.gilbert_elliott, k) * 100:.10g}%" for k in GE_KEYS}
        if self.gap:
            doc["gap"] = self.gap
        if self.rate:
            doc["rate"] = f"{self.rate:.0f}bit"
        if self.limit != 1000:
            doc["limit"] = self.limit
        return doc

    def as_dict(self) -> dict:
        """Plain SI values (for reports)."""
        d = asdict(self)
        d.pop("source")
        return d


# ---- parsing -----------------------------------------------------------------------------------

def _pct(doc: dict, key: str, where: str) -> float:
    return units.percent(doc[key], f"{where}{key}") if key in doc else 0.0


def _whole(value, field_name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise SpecError(field_name, value, f"a whole number {lo}..{hi}")
    return value


def parse(doc, where: str = "impairment", presets: dict | None = None) -> Impairment:
    """Validate a mapping (from YAML/JSON) into an Impairment; SpecError on the first problem."""
    w = f"{where}." if where else ""
    if isinstance(doc, str):
        doc = {"preset": doc}
    if not isinstance(doc, dict) or not doc:
        raise SpecError(where or "impairment", doc, "a mapping with at least one of " + ", ".join(KEYS[1:]))
    for key in doc:
        if key not in KEYS:
            raise SpecError(f"{w}{key}", doc[key], "a known key: one of " + ", ".join(KEYS))
    base: dict = {}
    name, source = doc.get("name", "custom"), ""
    if "preset" in doc:
        table = PRESETS if presets is None else presets
        if doc["preset"] not in table:
            raise SpecError(f"{w}preset", doc["preset"], "one of " + ", ".join(sorted(table)))
        p = table[doc["preset"]]
        base, name, source = dict(p.doc), doc.get("name", doc["preset"]), p.source
    merged = {**base, **{k: v for k, v in doc.items() if k != "preset"}}
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_." for c in name):
        raise SpecError(f"{w}name", name, "a name of letters, digits, '-', '_' or '.'")

    direction = merged.get("direction", "egress")
    if direction not in DIRECTIONS:
        raise SpecError(f"{w}direction", direction, f"one of {', '.join(DIRECTIONS)}")
    delay = units.duration(merged["delay"], f"{w}delay") if "delay" in merged else 0.0
    jitter = units.duration(merged["jitter"], f"{w}jitter") if "jitter" in merged else 0.0
    if delay > MAX_DELAY_S:
        raise SpecError(f"{w}delay", merged["delay"], f"a duration up to {MAX_DELAY_S:g}s")
    if jitter > delay:
        raise SpecError(f"{w}jitter", merged["jitter"],
                        f"a duration <= delay ({units.format_duration(delay)}); netem would clip delays at 0")
    distribution = merged.get("distribution", "uniform")
    if distribution not in DISTRIBUTIONS:
        raise SpecError(f"{w}distribution", distribution, f"one of {', '.join(DISTRIBUTIONS)}")
    if "distribution" in merged and not jitter:
        raise SpecError(f"{w}distribution", distribution, "no distribution without a jitter > 0")
    pct = {k: _pct(merged, k, w) for k in PERCENT_KEYS}
    for corr, base_key in (("delay_correlation", "jitter"), ("loss_correlation", "loss"),
                           ("corrupt_correlation", "corrupt"), ("duplicate_correlation", "duplicate"),
                           ("reorder_correlation", "reorder")):
        have = jitter if base_key == "jitter" else pct[base_key]
        if pct[corr] and not have:
            raise SpecError(f"{w}{corr}", merged[corr], f"no correlation without a {base_key} > 0")
    ge = None
    if "gilbert_elliott" in merged:
        g = merged["gilbert_elliott"]
        if not isinstance(g, dict):
            raise SpecError(f"{w}gilbert_elliott", g, "a mapping with p, r and optional loss_in_bad, loss_in_good")
        for key in g:
            if key not in GE_KEYS:
                raise SpecError(f"{w}gilbert_elliott.{key}", g[key], "one of " + ", ".join(GE_KEYS))
        for key in ("p", "r"):
            if key not in g:
                raise SpecError(f"{w}gilbert_elliott.{key}", None, "a percentage, e.g. '1%' (required)")
        vals = {k: units.percent(g[k], f"{w}gilbert_elliott.{k}") for k in g}
        if vals["r"] == 0:
            raise SpecError(f"{w}gilbert_elliott.r", g["r"], "a percentage > 0% (else the bad state never ends)")
        ge = GilbertElliott(vals["p"], vals["r"], vals.get("loss_in_bad", 1.0), vals.get("loss_in_good", 0.0))
        if pct["loss"] or pct["loss_correlation"]:
            raise SpecError(f"{w}loss", merged.get("loss", merged.get("loss_correlation")),
                            "no random loss together with gilbert_elliott (choose one loss model)")
    gap = 0
    if "gap" in merged:
        gap = _whole(merged["gap"], f"{w}gap", 1, 1_000_000)
        if not pct["reorder"]:
            raise SpecError(f"{w}gap", merged["gap"], "no gap without a reorder > 0")
    if pct["reorder"] and not delay:
        raise SpecError(f"{w}reorder", merged["reorder"], "a reorder only together with a delay > 0 "
                        "(netem reorders by letting packets skip the delay)")
    rate = units.rate(merged["rate"], f"{w}rate") if "rate" in merged else 0.0
    if "rate" in merged and not 8_000 <= rate <= 2**32 * 8 - 8:
        raise SpecError(f"{w}rate", merged["rate"], "a rate from 8kbit to 34gbit")
    limit = _whole(merged["limit"], f"{w}limit", 1, MAX_LIMIT) if "limit" in merged else 1000
    imp = Impairment(name=name, direction=direction, delay=delay, jitter=jitter, distribution=distribution,
                     gilbert_elliott=ge, gap=gap, rate=rate, limit=limit, source=source, **pct)
    if not (delay or ge or rate or any(pct[k] for k in ("loss", "corrupt", "duplicate", "reorder"))):
        raise SpecError(where or "impairment", doc, "at least one of delay, loss, gilbert_elliott, corrupt, "
                        "duplicate, reorder or rate")
    return imp


def json_schema() -> dict:
    """JSON Schema (draft 2020-12) of one impairment mapping (the semantic checks are in ``parse``)."""
    dur = {"type": "string", "pattern": r"^\s*[0-9]*\.?[0-9]+\s*(ns|us|µs|ms|s)\s*$"}
    pct = {"type": "string", "pattern": r"^\s*[0-9]*\.?[0-9]+\s*%\s*$"}
    props = {"preset": {"enum": sorted(PRESETS)}, "name": {"type": "string"},
             "direction": {"enum": list(DIRECTIONS)}, "delay": dur, "jitter": dur,
             "distribution": {"enum": list(DISTRIBUTIONS)},
             "gilbert_elliott": {"type": "object", "additionalProperties": False, "required": ["p", "r"],
                                 "properties": {k: pct for k in GE_KEYS}},
             "gap": {"type": "integer", "minimum": 1}, "rate": {"type": "string"},
             "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}}
    props.update({k: pct for k in PERCENT_KEYS})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "netslo impairment",
            "type": "object", "additionalProperties": False, "minProperties": 1, "properties": props}


# ---- presets -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Preset:
    """A named impairment with where its numbers come from. Values are ONE direction."""

    doc: dict
    source: str


PRESETS: dict[str, Preset] = {
    "wired-lan": Preset(
        {"delay": "250us", "jitter": "40us", "distribution": "normal"},
        "Campus 1 Gbit/s L3 network, 'When Latency Matters' §2 Fig. 2: ping RTT P50 0.47 ms, P99 0.62 ms "
        "-> about 0.24 ms one way with ~0.04 ms spread; bare-metal 1 GbE inter-node RTT 0.54-0.60 ms in the "
        "QoS-in-cloud-native study agrees."),
    "wifi": Preset(
        {"delay": "1200us", "jitter": "500us", "distribution": "paretonormal", "rate": "100mbit"},
        "802.11ac next to a home router, 'When Latency Matters' §4.3 Fig. 13: 1 kB FCT P50 1 ms wired vs "
        "3.4 ms Wi-Fi (+2.4 ms RTT = ~1.2 ms per direction), more dispersion and a heavier tail "
        "(paretonormal), ~100 Mbit/s measured with iperf3. Power management off, no loss reported."),
    "fttc-uplink": Preset(
        {"delay": "7500us", "jitter": "1ms", "distribution": "normal", "rate": "20mbit"},
        "Residential FTTC 100/20 Mbit/s access, 'When Latency Matters' §4.1 Fig. 10: 1 kB FCT P50 15.1 ms "
        "to the closest data-centre (~7.5 ms per direction, limited dispersion); upload 20 Mbit/s line rate "
        "(~14 Mbit/s achieved by 100 kB requests)."),
    "transcontinental-50ms": Preset(
        {"delay": "25ms", "jitter": "500us", "distribution": "normal"},
        "The BBR-vs-Cubic Kubernetes study's 50 ms path (netem ~50 ms RTT; measured RTT 50.1-51.3 ms with "
        "BBR): 25 ms per direction, small spread."),
    "bursty-loss": Preset(
        {"delay": "5ms", "gilbert_elliott": {"p": "0.5%", "r": "30%", "loss_in_bad": "50%",
                                              "loss_in_good": "0%"}},
        "Synthetic Gilbert-Elliott burst-loss channel (Gilbert 1960, Elliott 1963; netem 'loss gemodel'): "
        "stationary loss 0.82 %, mean bad-state sojourn 3.3 packets. Not taken from a measurement."),
}


def preset(name: str, **overrides) -> Impairment:
    """A preset as an Impairment, with optional key overrides in the YAML form."""
    return parse({"preset": name, **overrides}, where=f"preset {name}")
