"""``python -m netslo.report.regression --baseline B --current C``: the comparison offline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netslo.core import units
from netslo.core.helptext import help_text
from netslo.report.regression.decision import DEFAULT_METRICS, Policy, policy_from_text
from netslo.report.regression.report import compare
from netslo.report.regression.runs import load, results_files


def main(argv=None) -> int:
    from netslo.report.regression import __doc__ as package_doc
    ap = argparse.ArgumentParser(prog="python -m netslo.report.regression", description=package_doc.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="results.json, results dir, or a dir of past runs")
    ap.add_argument("--current", required=True, help="results.json or results dir of the run to judge")
    ap.add_argument("--out", default=None, help="where to write regression.md/json (default: the current dir)")
    ap.add_argument("--metrics", default=None, help=f"default {','.join(DEFAULT_METRICS)}")
    ap.add_argument("--min-effect", default=None, help=help_text(f"relative, default {Policy.min_effect_rel:.0%} "
                    f"({Policy.spread_min_effect_rel:.0%} with a baseline of {Policy.spread_min_runs}+ runs)"))
    ap.add_argument("--min-abs", default=None, help=f"delay floor, default {units.format_duration(Policy.min_effect_abs)} "
                    f"({units.format_duration(Policy.spread_min_effect_abs)} with {Policy.spread_min_runs}+ runs)")
    ap.add_argument("--min-loss", default=None, help=help_text(f"loss floor, default {units.format_percent(Policy.min_loss_abs)} "
                    f"({units.format_percent(Policy.spread_min_loss_abs)} with {Policy.spread_min_runs}+ runs)"))
    ap.add_argument("--alpha", default=None, help=help_text(f"family-wise, default {Policy.alpha:.0%}"))
    ap.add_argument("--block", default=None, help=f"bootstrap block length, default {units.format_duration(Policy.block_s)}")
    ap.add_argument("--resamples", default=None, help=f"bootstrap resamples, default {Policy.n_boot}")
    ap.add_argument("--quiet", action="store_true", help="print only the verdict line")
    a = ap.parse_args(argv)
    from netslo.core.errors import SpecError
    try:
        policy = policy_from_text(a.metrics, a.min_effect, a.min_abs, a.min_loss, a.alpha, a.block, a.resamples)
        base, cur = load(a.baseline), load(a.current)
    except (SpecError, FileNotFoundError) as e:
        print(f"netslo regression: {e}", file=sys.stderr)
        return 2
    report = compare(base, cur, policy, a.baseline)
    out = Path(a.out) if a.out else Path(results_files(a.current)[0]).parent
    _, md = report.write(out)
    print(md.read_text() if not a.quiet else
          f"{'REGRESSION' if report.failed else 'no regression'}: {len(report.regressions)} of "
          f"{len(report.comparisons)} comparisons ({md})")
    return 1 if report.failed else 0
