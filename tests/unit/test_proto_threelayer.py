"""The three-layer consistency check on synthetic numbers (what the integration test does for real)."""

import math

from netslo.stats import samples
from netslo.stats.analysis import Estimate
from netslo.studies import threelayer

T = threelayer.Transport(srtt_p50=300e-6, rttvar_p50=50e-6, min_rtt=40e-6, retrans=0, samples=500)


def test_application_above_transport_is_consistent():
    assert threelayer.check(Estimate(400e-6, 380e-6, 420e-6, 500), 150e-6, T) == []


def test_application_within_tolerance_below_transport_is_still_consistent():
    # 2·rttvar = 100 µs of tolerance: an upper CI bound of 210 µs is >= 300 - 100
    assert threelayer.check(Estimate(205e-6, 190e-6, 210e-6, 500), 100e-6, T) == []


def test_impossible_application_rtt_is_flagged_with_the_numbers():
    problems = threelayer.check(Estimate(0.4e-6, 0.38e-6, 0.42e-6, 500), 0.15e-6, T)
    assert len(problems) == 2 and "transport srtt P50 300.0 µs" in problems[0] and "min_rtt 40.0" in problems[1]
    tight = threelayer.Transport(srtt_p50=300e-6, rttvar_p50=10e-6, min_rtt=250e-6, retrans=0, samples=500)
    problems = threelayer.check(Estimate(400e-6, 380e-6, 420e-6, 500), 100e-6, tight)
    assert len(problems) == 1 and "min_rtt 250.0 µs" in problems[0]


def test_no_transport_series_means_nothing_to_check():
    s = samples.SampleSet(samples.empty(3), {})
    assert threelayer.transport_of(s) is None
    assert threelayer.check(Estimate(1e-6, 1e-6, 1e-6, 3), 1e-6, None) == []


def test_transport_series_drops_warmup_and_reads_columns():
    series = [[i, 250000 if i < 16 else 300, 250000 if i < 16 else 50, 40, 0, 1, 10] for i in range(100)]
    t = threelayer.transport_of(samples.SampleSet(samples.empty(1), {"tcp_info": series}))
    assert math.isclose(t.srtt_p50, 300e-6) and math.isclose(t.rttvar_p50, 50e-6)
    assert t.retrans == 1 and t.samples == 84
