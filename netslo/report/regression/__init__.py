"""SLO regression against a baseline: per test x metric, on raw samples.

For every test present in both runs and every metric (default rtt.p50, rtt.p99, loss):

  delta      = metric(current) - metric(baseline)   (nearest-rank percentile, or the loss fraction)
  allowed    = max(min_effect_rel x baseline, min_effect_abs)     the smallest change that matters
  p          = bootstrap probability that delta <= allowed  (one-sided: "no regression beyond allowed")
  regression = Holm-adjusted p < alpha over all comparisons of the session (family-wise error rate)

The bootstrap resamples non-overlapping **blocks** of consecutive requests spanning ``block_s`` of the
send schedule (default 0.2 s = 100 requests at a 2 ms interval), because delays on a shared host come in bursts: an i.i.d. bootstrap (and the
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

Modules: ``policy`` (settings, verdict names), ``runs`` (loading), ``blocks`` (block bootstrap),
``comparison`` (one test x metric, gate index, Holm), ``canaries`` (host noise), ``report`` (the whole
comparison, re-measurement), ``markdown`` (regression.md), ``cli``.
"""

from .blocks import BlockSide, block_requests, nearest_rank
from .canaries import host_noise, index_canary, spread_canary
from .cli import main
from .comparison import Comparison, compare_index, compare_metric, compare_spread, holm, run_value
from .markdown import markdown
from .policy import (BOOTSTRAP, DEFAULT_METRICS, GROUPS, HOST_NOISE, IMPROVED, INSUFFICIENT, MAX_BLOCKS,
                     MIN_TAIL, NOT_CONFIRMED, REGRESSED, SPREAD, UNCHANGED, Policy, policy_from_text)
from .report import Report, compare, confirm, suspected
from .runs import Run, load, results_files

__all__ = ["BOOTSTRAP", "DEFAULT_METRICS", "GROUPS", "HOST_NOISE", "IMPROVED", "INSUFFICIENT", "MAX_BLOCKS", "MIN_TAIL",
           "NOT_CONFIRMED", "REGRESSED", "SPREAD", "UNCHANGED", "BlockSide", "Comparison", "Policy", "Report", "Run",
           "block_requests", "compare", "compare_index", "compare_metric", "compare_spread", "confirm", "holm",
           "host_noise", "index_canary", "load", "main", "markdown", "nearest_rank", "policy_from_text",
           "results_files", "run_value", "spread_canary", "suspected"]
