"""``netslo.studies.compare.compare``'s sequential procedure on blocks drawn here with a known truth (the
two sides' probes replaced by lognormal RTTs; the bootstrap, Holm and the stopping rule are the real
ones): a scenario still inconclusive gets more pairs, unless another check has already failed the run."""

from types import SimpleNamespace

import numpy as np

from netslo.report import compare as report
from netslo.slo import spec as slo_mod
from netslo.slo.scenario import Scenario
from netslo.stats import samples as samples_mod
from netslo.studies import compare

SLO = {"version": 1, "objectives": [{"name": "udp", "select": {"protocol": ["udp"]},
                                     "compare": {"rtt.p50": "+10%"}}]}
CLEAR, CLOSE = Scenario("same-node", "udp", "1k"), Scenario("cross-node", "udp", "1k")


def _side(name):
    return SimpleNamespace(name=name, spec=SimpleNamespace(datapath="bridge", describe=lambda: f"side {name}"), cluster=SimpleNamespace(datapath="bridge"))


def _blocks(monkeypatch, factors: dict, seed=0):
    """Every block: lognormal RTTs around 100 µs (block-to-block spread 10 %), B's times ``factors[id]``."""
    rng = np.random.default_rng(seed)

    def measure_block(side, scenario, sampling, count):
        rows = samples_mod.empty(count)
        rtt = 1e5 * np.exp(rng.normal(0, 0.10)) * rng.lognormal(0, 0.3, count)
        if side.name == "B":
            rtt *= factors[scenario.id]
        rows["sched_ns"] = rows["send_ns"] = rows["send_app_ns"] = np.arange(count) * 2_000_000
        rows["recv_ns"] = rows["recv_app_ns"] = rows["send_ns"] + rtt.astype(np.int64)
        rows["req_bytes"] = rows["resp_bytes"] = 1000
        return samples_mod.SampleSet(rows, {"protocol": "udp"})
    monkeypatch.setattr(compare, "measure_block", measure_block)


def _run(monkeypatch, factors):
    _blocks(monkeypatch, factors)
    return compare.compare(_side("A"), _side("B"), slo_mod.parse(SLO, "slo.yaml"), [CLEAR, CLOSE],
                           pairs=16, more_pairs=16, max_pairs=128, seed=1)


def test_an_inconclusive_scenario_gets_more_pairs(monkeypatch):
    """B 9 % slower against a 10 % margin: not decided in 16 pairs, so measured on (to 128 at most)."""
    result = _run(monkeypatch, {CLEAR.id: 1.0, CLOSE.id: 1.09})
    close = next(sc for sc in result.scenarios if sc.scenario.id == CLOSE.id)
    assert len(close.pairs) > 16 and result.stopped == [], (len(close.pairs), result.stopped)


def test_a_failed_run_stops_measuring_its_inconclusive_scenarios(monkeypatch):
    """B twice as slow in one scenario fails it in 16 pairs; the other, still inconclusive, is not
    measured on: the run is a fail, and the report names what was left undecided."""
    result = _run(monkeypatch, {CLEAR.id: 2.0, CLOSE.id: 1.09})
    by_id = {sc.scenario.id: sc for sc in result.scenarios}
    assert by_id[CLEAR.id].verdict == "fail" and result.verdict == "fail"
    assert by_id[CLOSE.id].verdict == compare.UNDECIDED and len(by_id[CLOSE.id].pairs) == 16
    assert result.stopped == [CLOSE.id]
    assert f"once the comparison had failed: {CLOSE.id}" in "\n".join(report.terminal_lines(result))
    assert report.to_json(result)["stopped"] == [CLOSE.id]
