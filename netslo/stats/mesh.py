"""Verdicts of a node-pair mesh read as people state them: each pair against its thresholds with
family-wise control over the pairs, objectives over groups of pairs, and the nodes that explain the
pairs that broke.

``pair_pvalue(values, sent, lost, threshold)``: the one-sided p-value of "this pair breaks the
threshold". For ``rtt.pQ <= X`` over n answered RTTs of which k exceed X: if the pair's true P_Q were
at most X, an RTT would exceed X with probability at most 1 - Q/100, so p = P(Binomial(n, 1 - Q/100)
>= k) (an exact order-statistic test, no distribution assumed). For ``loss <= L`` with ``lost`` of
``sent``: p = P(Binomial(sent, L) >= lost).

``judge_pairs(pairs, alpha)``: Holm over every (pair, threshold) check of the mesh; a check **fails**
when its Holm-adjusted p is below ``alpha`` (so the chance that any pair of a healthy mesh fails is at
most ``alpha``, however many pairs), **passes** when its CI's upper bound meets the threshold, and is
**inconclusive** otherwise (the caller measures that pair again, then calls it undecided).

``over_pairs(values, lo, hi, q)``: an objective over the pairs an objective selects, in
clusterloader2's form "P_q over pairs of a per-pair statistic <= X": the nearest-rank P_q of the
pairs' point estimates, with the band from the same P_q of their CI lower and upper bounds.

``culprits(failed, pairs)``: a node is named when the failing pairs are better explained by it than
pair by pair: it is in at least two failing pairs and in at least ``share`` of its own measured pairs
that failed. Nodes are taken greedily (the node in most failing pairs first, ties by name), each
explaining its failing pairs, until no node qualifies; the pairs no named node explains are listed as
pairs. So one slow node of n reads as that node, not as n - 1 failures; two slow nodes as two nodes
(their common pair explained by the first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netslo.stats.analysis import Estimate
from netslo.stats.order_stats import point_rank
from netslo.stats.paired import FAIL, INCONCLUSIVE, PASS, holm

SHARE = 0.75     # a named node: at least this share of its measured pairs failed


@dataclass(frozen=True)
class Attribution:
    """Nodes named (node -> (its failing pairs, its measured pairs)) and the failing pairs left."""

    nodes: dict
    pairs: list

    def lines(self) -> list[str]:
        out = [f"node {n}: {f} of {m} of its pairs failed" for n, (f, m) in self.nodes.items()]
        return out + [f"pair {a} - {b} failed" for a, b in self.pairs]


def culprits(failed: list[tuple[str, str]], pairs: list[tuple[str, str]], share: float = SHARE) -> Attribution:
    """Attribution of the ``failed`` pairs among the measured ``pairs`` (module doc)."""
    measured: dict = {}
    for a, b in pairs:
        measured[a] = measured.get(a, 0) + 1
        measured[b] = measured.get(b, 0) + 1
    left = set(failed)
    named: dict = {}
    while left:
        count: dict = {}
        for a, b in left:
            count[a] = count.get(a, 0) + 1
            count[b] = count.get(b, 0) + 1
        # a node's share counts every failing pair it is in, also those an earlier node explained
        total = {n: sum(1 for p in failed if n in p) for n in count}
        best = sorted((n for n in count if count[n] >= 2 and total[n] >= share * measured[n]),
                      key=lambda n: (-count[n], n))
        if not best:
            break
        n = best[0]
        named[n] = (total[n], measured[n])
        left = {p for p in left if n not in p}
    return Attribution(named, sorted(left))


def pair_pvalue(rtts: np.ndarray, sent: int, lost: int, metric: str, limit: float) -> float:
    """One-sided p-value of "the pair breaks ``metric`` <= ``limit``" (module doc); ``metric`` is
    ``loss`` or ``rtt.pQ``; ``rtts`` the answered RTTs (s)."""
    from scipy import stats as sps  # (scipy loads on first use: the pytest plugin imports this module)
    if metric == "loss":
        return float(sps.binom.sf(lost - 1, sent, limit)) if sent else 1.0
    q = float(metric.partition(".p")[2])
    n = len(rtts)
    if not n:
        return 0.0 if sent else 1.0      # every request lost: no RTT met anything
    k = int(np.count_nonzero(rtts > limit))
    return float(sps.binom.sf(k - 1, n, 1.0 - q / 100.0))


@dataclass
class PairCheck:
    """One threshold of one pair: its estimate (CI), the p-value of a breach, Holm's, the verdict."""

    pair: tuple
    metric: str
    limit: float
    objective: str
    estimate: Estimate
    p: float
    p_adjusted: float = 1.0
    verdict: str = INCONCLUSIVE


def judge_pairs(checks: list[PairCheck], alpha: float) -> None:
    """Holm over ``checks``, then each one's verdict (module doc), in place."""
    for c, p in zip(checks, holm([c.p for c in checks])):
        c.p_adjusted = p
        if p < alpha:
            c.verdict = FAIL
        elif c.estimate.hi <= c.limit:
            c.verdict = PASS
        else:
            c.verdict = INCONCLUSIVE


def over_pairs(estimates: list[Estimate], q: float) -> Estimate:
    """P_q (nearest rank) over pairs of their point estimates, bounded by the same P_q of their
    lower and upper CI bounds (module doc); n: the pairs."""
    if not estimates:
        return Estimate(math.nan, -math.inf, math.inf, 0, "s")
    k = point_rank(len(estimates), q) - 1

    def at(xs):
        return float(np.sort(np.asarray(xs, dtype=float))[k])

    return Estimate(at([e.value for e in estimates]), at([e.lo for e in estimates]), at([e.hi for e in estimates]),
                    len(estimates), estimates[0].unit)
