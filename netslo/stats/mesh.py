"""Verdicts of a node-pair mesh read as people state them (issue 53, first part): the pairs that broke
a threshold, and the nodes that explain them.

``culprits(failed, pairs)``: a node is named when the failing pairs are better explained by it than
pair by pair: it is in at least two failing pairs and in at least ``share`` of its own measured pairs
that failed. Nodes are taken greedily (the node in most failing pairs first, ties by name), each
explaining its failing pairs, until no node qualifies; the pairs no named node explains are listed as
pairs. So one slow node of n reads as that node, not as n - 1 failures; two slow nodes as two nodes
(their common pair explained by the first).
"""

from __future__ import annotations

from dataclasses import dataclass

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
