"""benchmarks/gate_power.py on synthetic runs: the replay with re-measurement (--confirm) and runs
shaped like real ones (--shape-from) count what they should."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gate_power  # noqa: E402

from netslo.report.series import received, rtt_by_seq, series  # noqa: E402


def test_shaped_runs_keep_each_tests_median_and_tail_ratio():
    real = gate_power.synthetic_runs(3, 0.0, n=4000, tests=2)
    shaped = gate_power.shaped_runs(4, 0.0, real, n=4000)
    for t in real[0].samples:
        r = rtt_by_seq(real[0].samples[t][0])
        for run in shaped:
            s = rtt_by_seq(run.samples[t][0])
            assert np.all(received(run.samples[t][0])) and len(s) == 4000
            assert abs(np.median(s) / np.median(r) - 1) < 0.1
            assert abs(np.percentile(s, 99) / np.median(s) - np.percentile(r, 99) / np.median(r)) < 0.6


def test_the_replay_with_re_measurement_stays_quiet_and_still_catches_one_millisecond():
    runs = gate_power.synthetic_runs(14, 0.03, n=1000, tests=6)
    out = gate_power.study([runs], 10, gate_power.reg.Policy(), ["add1ms"], confirm=True)
    fails, cases = out["none"][:2]
    assert cases == 3 and fails == 0                  # the last run only serves as a re-measurement
    assert out["add1ms"][:2] == (3, 3)


def test_the_old_definition_judges_the_round_trip_and_shifts_scale_the_judged_rtt():
    """--definition round_trip: the same samples' rtt becomes the round trip with the responder in it;
    scale10 then scales that, and without it the rtt less the responder's residence."""
    run = gate_power.synthetic_runs(1, 0.0, n=500, tests=1)[0]
    t = next(iter(run.samples))
    s = run.samples[t][0]
    s.rows["srv_rx_ns"] = s.rows["send_ns"] + 10_000
    s.rows["srv_tx_ns"] = s.rows["srv_rx_ns"] + 40_000        # a 40 µs responder
    old = gate_power.as_round_trip(run).samples[t][0]
    assert np.array_equal(series(old, "rtt"), series(s, "round_trip"))
    assert np.allclose(series(s, "rtt"), series(s, "round_trip") - 40e-6)
    rng = np.random.default_rng(0)
    for judged in (s, old):
        up = gate_power.shifted(judged, "scale10", rng)
        assert np.allclose(series(up, "rtt"), 1.1 * series(judged, "rtt"), rtol=0, atol=1e-9)
