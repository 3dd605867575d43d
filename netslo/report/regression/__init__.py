"""SLO regression against a baseline: per test x metric, on raw samples.

For every test present in both runs and every metric (default rtt.p50, rtt.p99, loss):

  delta      = metric(current) - metric(baseline)   (nearest-rank percentile, or the loss fraction)
  allowed    = max(min_effect_rel x baseline, min_effect_abs)     the smallest change that matters
  p          = bootstrap probability that delta <= allowed  (one-sided: "no regression beyond allowed")
  regression = Holm-adjusted p < alpha over all comparisons of the session (family-wise error rate)

The bootstrap resamples non-overlapping **blocks** of consecutive requests spanning ``block_s`` of the
send schedule (default 0.2 s = 100 requests at a 2 ms interval), because delays on a shared host come in
bursts: an i.i.d. bootstrap (and the
Mann-Whitney U test, which also assumes independent samples) treats one 50 ms scheduling stall as 25
independent slow requests and calls run-to-run noise significant. With a baseline of several runs the
blocks of all runs are pooled (a block never spans two runs). The Mann-Whitney U p-value (one-sided,
current > baseline) and its effect size A = P(current > baseline) are reported for the whole series
as context, not used for the verdict.

With a baseline of ``spread_min_runs`` (3) or more past runs, a test is judged instead by how much
its metrics move from run to run (``run_spread``: Student-t prediction from the baseline runs, plus
a gate index over all tests); the bootstrap is for a baseline of one or two runs, which cannot show
that spread and so only flags large effects.

``python -m netslo.report.regression --baseline B --current C`` compares two results directories
(or results.json files; B may be a directory of past runs) and exits 1 on a regression.

Modules: ``decision`` (the decision policy: settings, verdict names), ``runs`` (loading), ``blocks`` (block bootstrap),
``comparison`` (one test x metric, gate index, Holm), ``canaries`` (host noise), ``report`` (the whole
comparison, re-measurement), ``markdown`` (regression.md), ``cli``.
"""

from importlib import import_module

# name -> submodule, imported on first use (PEP 562): the pytest plugin needs only the decision policy and the
# run container until a baseline is given, so loading it does not import scipy. (``markdown`` is the
# submodule; its function is ``markdown.markdown``.)
_EXPORTS = {
    "blocks": ("BlockSide", "block_requests", "nearest_rank"),
    "canaries": ("host_noise", "index_canary", "spread_canary"),
    "cli": ("main",),
    "comparison": ("Comparison", "compare_index", "compare_metric", "compare_spread", "holm", "run_value"),
    "decision": ("BOOTSTRAP", "DEFAULT_METRICS", "GROUPS", "HOST_NOISE", "IMPROVED", "INSUFFICIENT", "MAX_BLOCKS",
               "MIN_TAIL", "NOT_CONFIRMED", "REGRESSED", "SPREAD", "UNCHANGED", "Policy", "policy_from_text"),
    "report": ("Report", "compare", "confirm", "suspected"),
    "runs": ("Run", "load", "results_files"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
