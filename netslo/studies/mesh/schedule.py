"""Which node pairs a mesh measures, and when: the schedule of a node-pair mesh.

* ``round_robin(nodes)``: every unordered pair exactly once, in rounds of disjoint pairs, so no node is in
  two measurements at a time (the circle method of a round-robin tournament: n - 1 rounds of n/2 pairs
  for even n; for odd n one node sits out each round: n rounds of (n - 1)/2).
* ``sampled(nodes, k, groups, seed)``: for meshes too large for every pair, each node gets at least ``k``
  partners (rotations of one seeded permutation), and every pair of group values (zone pair, pool
  pair; ``groups``: label -> {node: value}) has at least one pair; the same seed gives the same pairs.
  ``coverage`` says what a design covers.
* ``rounds_of(pairs)``: any pair list in rounds of disjoint pairs (greedy, largest-degree nodes first).
* ``requests_per_pair(rounds, budget_s, interval_s, least)``: the requests each pair gets so that the
  rounds, one after another, fit ``budget_s``; a SpecError naming the least budget when ``least``
  requests per pair do not fit.

Pairs are tuples ``(a, b)`` of node names with ``a < b``; which end sends is the caller's choice.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from netslo.core.errors import SpecError


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def round_robin(nodes: list[str]) -> list[list[tuple[str, str]]]:
    """Rounds of disjoint pairs covering every unordered pair of ``nodes`` once (circle method)."""
    names = sorted(set(nodes))
    if len(names) < 2:
        raise SpecError("nodes", len(names), "at least 2 nodes for a mesh")
    ring = names + ([None] if len(names) % 2 else [])      # None: the round's bye
    n = len(ring)
    rounds = []
    for _ in range(n - 1):
        pairs = [_pair(ring[i], ring[n - 1 - i]) for i in range(n // 2) if None not in (ring[i], ring[n - 1 - i])]
        rounds.append(sorted(pairs))
        ring = [ring[0], ring[-1], *ring[1:-1]]            # the first stays, the others rotate
    return rounds


def sampled(nodes: list[str], k: int, groups: dict | None = None, seed: int = 0) -> list[tuple[str, str]]:
    """At least ``k`` partners per node and one pair per pair of values of each label in ``groups``
    (label -> {node: value}, e.g. zones), from a permutation seeded by ``seed``; sorted pairs."""
    names = sorted(set(nodes))
    n = len(names)
    if n < 2:
        raise SpecError("nodes", n, "at least 2 nodes for a mesh")
    if not 1 <= k <= n - 1:
        raise SpecError("partners", k, f"a whole number 1..{n - 1} (the other nodes)")
    order = names[:]
    random.Random(seed).shuffle(order)
    pairs = set()
    for step in range(1, math.ceil(k / 2) + 1):            # each rotation gives every node two partners
        for i, a in enumerate(order):
            b = order[(i + step) % n]
            if a != b:
                pairs.add(_pair(a, b))
    if k % 2 and n % 2 == 0 and k == n - 1:                # the opposite node, for a full odd k
        pairs.update(_pair(order[i], order[i + n // 2]) for i in range(n // 2))
    for label, value_of in (groups or {}).items():
        missing = [m for m in names if m not in value_of]
        if missing:
            raise SpecError(f"groups.{label}", missing[0], f"a {label} value for every node of the mesh")
        members: dict = {}
        for m in order:                                     # the permutation's order: seeded choice
            members.setdefault(value_of[m], []).append(m)
        have = {_pair(value_of[a], value_of[b]) if value_of[a] != value_of[b] else (value_of[a], value_of[a])
                for a, b in pairs}
        for x, y in itertools.combinations_with_replacement(sorted(members), 2):
            if (x, y) in have:
                continue
            if x == y and len(members[x]) < 2:
                continue                                    # one node of its value: no pair inside it
            a = members[x][0]
            b = members[y][1] if x == y else members[y][0]
            pairs.add(_pair(a, b))
    return sorted(pairs)


@dataclass(frozen=True)
class Coverage:
    """What a pair design covers: pairs, fewest partners of a node, and per label the value pairs
    covered of those that exist."""

    pairs: int
    of_all: int
    least_partners: int
    groups: dict        # label -> (covered value pairs, value pairs that can be covered)

    def line(self) -> str:
        g = "; ".join(f"{label} pairs {c}/{t}" for label, (c, t) in self.groups.items())
        return (f"{self.pairs} of {self.of_all} node pairs, every node with at least {self.least_partners} partners"
                + (f"; {g}" if g else ""))


def coverage(nodes: list[str], pairs: list[tuple[str, str]], groups: dict | None = None) -> Coverage:
    names = sorted(set(nodes))
    deg = {m: 0 for m in names}
    for a, b in pairs:
        deg[a] += 1
        deg[b] += 1
    out = {}
    for label, value_of in (groups or {}).items():
        counts: dict = {}
        for m in names:
            counts[value_of[m]] = counts.get(value_of[m], 0) + 1
        possible = {(x, y) for x, y in itertools.combinations_with_replacement(sorted(counts), 2)
                    if x != y or counts[x] >= 2}
        got = {tuple(sorted((value_of[a], value_of[b]))) for a, b in pairs}
        out[label] = (len(possible & got), len(possible))
    return Coverage(len(pairs), len(names) * (len(names) - 1) // 2, min(deg.values()), out)


def rounds_of(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """``pairs`` in rounds where no node is in two pairs, greedily: each pair into the first round
    that has neither of its nodes, pairs of the busiest nodes first."""
    deg: dict = {}
    for a, b in pairs:
        deg[a] = deg.get(a, 0) + 1
        deg[b] = deg.get(b, 0) + 1
    rounds: list[tuple[list, set]] = []
    for a, b in sorted(pairs, key=lambda p: (-max(deg[p[0]], deg[p[1]]), p)):
        for members, busy in rounds:
            if a not in busy and b not in busy:
                members.append((a, b))
                busy.update((a, b))
                break
        else:
            rounds.append(([(a, b)], {a, b}))
    return [sorted(m) for m, _ in rounds]


def requests_per_pair(rounds: list, budget_s: float, interval_s: float, least: int, overhead_s: float = 1.0,
                      option: str = "--netslo-mesh-budget") -> int:
    """Requests per pair so that the rounds fit ``budget_s`` (each round: its requests x ``interval_s``
    plus ``overhead_s`` to start and collect); SpecError naming the least budget that gives ``least``."""
    if budget_s <= 0 or interval_s <= 0 or least < 1:
        raise SpecError(option, budget_s, "a duration > 0 s")
    per_round = budget_s / len(rounds) - overhead_s
    n = math.floor(per_round / interval_s) if per_round > 0 else 0
    if n < least:
        need = len(rounds) * (least * interval_s + overhead_s)
        raise SpecError(option, f"{budget_s:g}s",
                        f"at least {math.ceil(need)}s for {len(rounds)} rounds of {least} requests per pair "
                        f"every {interval_s * 1e3:g} ms")
    return n
