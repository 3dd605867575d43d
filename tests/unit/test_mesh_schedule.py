"""The node-pair mesh's schedule (netslo.studies.mesh.schedule) and its attribution of failures to nodes
(netslo.stats.mesh): the properties each promises, checked over many sizes."""

import itertools

import pytest

from netslo.core.errors import SpecError
from netslo.stats.mesh import culprits
from netslo.studies.mesh import schedule as mesh


def _nodes(n):
    return [f"n{i:03d}" for i in range(n)]


@pytest.mark.parametrize("n", range(2, 34))
def test_round_robin_covers_every_pair_once_in_rounds_no_node_is_twice_in(n):
    rounds = mesh.round_robin(_nodes(n))
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == sorted(itertools.combinations(_nodes(n), 2))       # every pair exactly once
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    for r in rounds:
        members = [m for p in r for m in p]
        assert len(members) == len(set(members)) and len(r) == n // 2


@pytest.mark.parametrize("n, k", [(10, 3), (50, 4), (101, 5), (200, 6), (12, 11), (13, 12)])
def test_a_sampled_design_gives_every_node_k_partners_and_is_the_same_for_the_same_seed(n, k):
    pairs = mesh.sampled(_nodes(n), k, seed=7)
    assert pairs == mesh.sampled(_nodes(n), k, seed=7) != mesh.sampled(_nodes(n), k, seed=8) or k == n - 1
    cov = mesh.coverage(_nodes(n), pairs)
    assert cov.least_partners >= k
    assert len(set(pairs)) == len(pairs) and all(a < b for a, b in pairs)
    assert cov.pairs <= n * (k + 1)          # O(n k), not O(n^2)


def test_every_zone_pair_and_pool_pair_is_covered_even_with_one_partner_per_node():
    nodes = _nodes(60)
    zones = {m: f"zone-{i % 5}" for i, m in enumerate(nodes)}          # 5 zones: 15 zone pairs
    pools = {m: "gpu" if i < 3 else "general" for i, m in enumerate(nodes)}
    groups = {"zone": zones, "pool": pools}
    pairs = mesh.sampled(nodes, 1, groups, seed=1)
    cov = mesh.coverage(nodes, pairs, groups)
    assert cov.groups == {"zone": (15, 15), "pool": (3, 3)}, cov.line()
    assert "zone pairs 15/15" in cov.line()


def test_any_pair_list_goes_into_rounds_without_a_node_twice():
    pairs = mesh.sampled(_nodes(40), 5, seed=3)
    rounds = mesh.rounds_of(pairs)
    assert sorted(p for r in rounds for p in r) == sorted(pairs)
    for r in rounds:
        members = [m for p in r for m in p]
        assert len(members) == len(set(members))
    degree = max(sum(m in p for p in pairs) for m in _nodes(40))
    assert len(rounds) <= 2 * degree - 1          # a greedy colouring of the pairs never needs more


def test_the_budget_sets_the_requests_or_names_the_least_it_needs():
    rounds = mesh.round_robin(_nodes(8))                   # 7 rounds
    assert mesh.requests_per_pair(rounds, 600, 0.01, 100) == 8471
    with pytest.raises(SpecError, match=r"--netslo-mesh-budget: value '10s' — expected at least 21s for 7 rounds "
                                        r"of 200 requests per pair every 10 ms"):
        mesh.requests_per_pair(rounds, 10, 0.01, 200)


def test_bad_sizes_are_one_line_naming_the_field():
    with pytest.raises(SpecError, match="nodes: value 1 — expected at least 2"):
        mesh.round_robin(["a"])
    with pytest.raises(SpecError, match=r"partners: value 0 — expected a whole number 1\.\.4"):
        mesh.sampled(_nodes(5), 0)
    with pytest.raises(SpecError, match=r"groups\.zone: value 'n004' — expected a zone value for every node"):
        mesh.sampled(_nodes(5), 1, {"zone": {m: "z" for m in _nodes(4)}})


def test_one_slow_node_reads_as_that_node_not_as_its_pairs():
    nodes = _nodes(8)
    pairs = [p for r in mesh.round_robin(nodes) for p in r]
    failed = [p for p in pairs if "n005" in p]
    a = culprits(failed, pairs)
    assert a.nodes == {"n005": (7, 7)} and a.pairs == []
    assert a.lines() == ["node n005: 7 of 7 of its pairs failed"]


def test_two_slow_nodes_are_two_nodes_and_a_lone_bad_pair_stays_a_pair():
    nodes = _nodes(8)
    pairs = [p for r in mesh.round_robin(nodes) for p in r]
    failed = sorted({p for p in pairs if "n001" in p or "n006" in p} | {("n002", "n003")})
    a = culprits(failed, pairs)
    assert set(a.nodes) == {"n001", "n006"} and a.pairs == [("n002", "n003")]


def test_scattered_failures_name_no_node():
    nodes = _nodes(8)
    pairs = [p for r in mesh.round_robin(nodes) for p in r]
    failed = [("n000", "n001"), ("n002", "n003"), ("n004", "n005"), ("n000", "n002")]
    a = culprits(failed, pairs)
    assert a.nodes == {} and a.pairs == sorted(failed)
