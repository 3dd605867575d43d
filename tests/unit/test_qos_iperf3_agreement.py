"""The iperf3 cross-check's decision (``experiments.iperf3_agreement``), on scripted pairs: the
measurements themselves are the gate's (netslo/gate/test_qos.py), this is what it does with them."""

from netslo.studies.qos import experiments

SEC = {"tolerance": 0.10}


def pairs(*bps):
    """A stand-in for ``iperf3_pair`` returning (netslo, iperf3) receiver bit/s in turn; counts calls."""
    seq = list(bps)

    def pair(pods, sec):
        pair.calls += 1
        netslo, iperf3 = seq.pop(0)
        return {"netslo_bps": netslo, "iperf3_bps": iperf3}
    pair.calls = 0
    return pair


def test_an_agreeing_pair_is_measured_once():
    p = pairs((45.8e6, 46.0e6))
    r = experiments.iperf3_agreement(None, SEC, p)
    assert p.calls == 1 and "earlier" not in r and experiments.iperf3_difference(r) < 0.01


def test_a_pair_apart_is_measured_again_and_the_second_is_judged():
    p = pairs((38.5e6, 44.1e6), (45.8e6, 46.0e6))      # q6 of 2026-11-29, then a quiet pair
    r = experiments.iperf3_agreement(None, SEC, p)
    assert p.calls == 2 and r["netslo_bps"] == 45.8e6 and r["earlier"]["netslo_bps"] == 38.5e6


def test_a_disagreement_that_repeats_stays_a_disagreement():
    p = pairs((38.5e6, 44.1e6), (38.0e6, 44.0e6))
    r = experiments.iperf3_agreement(None, SEC, p)
    assert p.calls == 2 and experiments.iperf3_difference(r) > SEC["tolerance"]
