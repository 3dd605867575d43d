"""How a regression is decided: metrics, effect sizes, alpha, bootstrap and canary settings
(``Policy``), the verdict names, and ``policy_from_text`` for the CLI and the pytest plugin."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from netslo.core import units
from netslo.report.series import DELAY_SERIES, split_metric

DEFAULT_METRICS = ("rtt.p50", "rtt.p99", "loss")
GROUPS = 2000            # rank groups per side; exact when a side has at most this many samples
MAX_BLOCKS = 200         # blocks per side; longer blocks when a side has more than 200 x block samples
MIN_TAIL = 5             # a percentile needs this many samples above it (P99: n >= 500)

REGRESSED, IMPROVED, UNCHANGED, INSUFFICIENT = "regressed", "improved", "unchanged", "insufficient data"
HOST_NOISE = "host noise"   # would be a regression, but the sender's own timer error grew as much
NOT_CONFIRMED = "not confirmed"   # would be a regression, but a re-measurement of the test did not show it
BOOTSTRAP, SPREAD = "block bootstrap", "run spread"   # Comparison.mode


@dataclass(frozen=True)
class Policy:
    """How a regression is decided. Delays in seconds, loss and relative effects as fractions."""

    metrics: tuple = DEFAULT_METRICS
    min_effect_rel: float = 1.0        # of the baseline value (1.0 = the metric doubled)
    min_effect_abs: float = 200e-6     # seconds, for delay metrics
    min_loss_abs: float = 0.005        # fraction (0.5 percentage points), for loss
    alpha: float = 0.01                # family-wise over the whole comparison (Holm)
    block_s: float = 0.2               # bootstrap block length in seconds of the send schedule
    n_boot: int = 4000                 # at least; raised so that Holm can reach alpha (2 m / alpha)
    spread_min_runs: int = 3           # baseline runs of a test from which its run spread is used
    spread_min_effect_rel: float = 0.02   # allowed effects when the run spread is known ...
    spread_min_effect_abs: float = 5e-6   # ... (s) ...
    spread_min_loss_abs: float = 0.001    # ... and for loss (0.1 percentage points)
    gate_index: bool = True            # also judge the geometric mean over tests (run-spread mode)
    confidence: float = 0.95           # of the reported CI of delta
    seed: int = 0
    noise_guard: bool = True           # see host_noise()
    noise_ratio: float = 2.0           # timer-error P50/P99 growth that marks a run as noisier ...
    noise_abs_p50: float = 20e-6       # ... if the P50 also grew by at least this (s)
    noise_abs_p99: float = 0.5e-3      # ... or the P99 by at least this (s)

    def effects(self, metric: str, mode: str = BOOTSTRAP) -> tuple[float, float]:
        """(relative effect, absolute floor: s for delays, fraction for loss) of ``metric`` in ``mode``."""
        loss = split_metric(metric)[1] is None
        if mode == SPREAD:
            return self.spread_min_effect_rel, self.spread_min_loss_abs if loss else self.spread_min_effect_abs
        return self.min_effect_rel, self.min_loss_abs if loss else self.min_effect_abs

    def allowed(self, metric: str, base: float, mode: str = BOOTSTRAP) -> float:
        """Largest increase (s or fraction) that does not count as a regression (loss: the floor alone)."""
        rel, floor = self.effects(metric, mode)
        return floor if split_metric(metric)[1] is None else max(rel * abs(base), floor)

    def allowed_drop(self, metric: str, base: float, mode: str = BOOTSTRAP) -> float:
        """Largest decrease that is not reported as an improvement: the same ratio the other way
        (x(1+rel) up <-> /(1+rel) down), at least the absolute floor."""
        rel, floor = self.effects(metric, mode)
        return max(abs(base) * rel / (1.0 + rel), floor)


def policy_from_text(metrics: str | None = None, min_effect: str | None = None, min_abs: str | None = None,
                     min_loss: str | None = None, alpha: str | None = None, block: str | None = None,
                     n_boot: str | None = None) -> Policy:
    """Build a Policy from option strings ('20%', '100us', ...); SpecError names the bad option."""
    from netslo.core.errors import SpecError
    p = Policy()
    kw = {}
    if metrics:
        ms = tuple(m.strip() for m in metrics.split(",") if m.strip())
        for m in ms:
            try:
                name, q = split_metric(m)
                if name not in ("loss",) + DELAY_SERIES or (name == "loss") != (q is None) or (q is not None and not 0 < q < 100):
                    raise ValueError
            except ValueError:
                raise SpecError("--netslo-regression-metrics", m, "comma-separated metrics like rtt.p50,rtt.p99,"
                                "ipdv.p99,loss (series.pQ with 0<Q<100, or loss)") from None
        kw["metrics"] = ms
    if min_effect:   # an explicit effect applies in both modes
        kw["min_effect_rel"] = kw["spread_min_effect_rel"] = units.percent(min_effect, "--netslo-regression-min-effect")
    if min_abs:
        kw["min_effect_abs"] = kw["spread_min_effect_abs"] = units.duration(min_abs, "--netslo-regression-min-abs")
    if min_loss:
        kw["min_loss_abs"] = kw["spread_min_loss_abs"] = units.percent(min_loss, "--netslo-regression-min-loss")
    if alpha:
        kw["alpha"] = units.percent(alpha, "--netslo-regression-alpha")
        if not 0 < kw["alpha"] < 0.5:
            raise SpecError("--netslo-regression-alpha", alpha, "a percentage above 0% and below 50%, e.g. 5%")
    if block:
        kw["block_s"] = units.duration(block, "--netslo-regression-block")
        if kw["block_s"] <= 0:
            raise SpecError("--netslo-regression-block", block, "a duration > 0, e.g. '200ms'")
    if n_boot:
        if not str(n_boot).isdigit() or int(n_boot) < 200:
            raise SpecError("--netslo-regression-resamples", n_boot, "a whole number >= 200, e.g. 4000")
        kw["n_boot"] = int(n_boot)
    return Policy(**{**asdict(p), **kw})
