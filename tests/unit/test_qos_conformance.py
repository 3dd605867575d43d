"""Rate conformance from bins: steady state with a CI, overshoot, time to conform."""

import numpy as np
import pytest

from netslo.studies.qos import conformance as cf


def _bins(rates, width=0.1):
    return [round(width * (i + 1), 4) for i in range(len(rates))], list(rates)


def test_payload_fraction():
    assert cf.tcp_payload_fraction(1500) == pytest.approx(1448 / 1514)
    assert cf.tcp_payload_fraction(1450) == pytest.approx(1398 / 1464)


def test_conform_with_initial_overshoot():
    rng = np.random.default_rng(1)
    rates = [900e6, 300e6] + list(10e6 + rng.normal(0, 2e5, 38))
    t, r = _bins(rates)
    c = cf.judge(t, r, 10e6, 0.1, 2.0)
    assert c.verdict == "conform" and not c.by_point and c.ok
    assert c.peak_bps == 900e6 and c.peak_ratio == pytest.approx(90)
    assert c.time_to_conform_s == pytest.approx(0.2)
    assert c.steady_bins == 20 and c.steady_lo < 10e6 < c.steady_hi
    assert "conform" in c.line() and "time to conform 0.20 s" in c.line()


def test_twice_the_limit_is_nonconform():
    t, r = _bins([20e6 + 1e5 * (-1) ** i for i in range(40)])
    c = cf.judge(t, r, 10e6, 0.1, 2.0)
    assert c.verdict == "nonconform" and not c.by_point
    assert c.time_to_conform_s == float("inf") and "time to conform never" in c.line()


def test_quantized_bins_average_out():
    """64 KiB GSO quanta: bins alternate 2 and 1 quanta; the steady mean is still right."""
    q = 65536 * 8 / 0.1
    rates = [q * (2 if i % 3 else 1) for i in range(60)]
    t, r = _bins(rates)
    expected = np.mean(rates[20:])
    c = cf.judge(t, r, expected, 0.1, 2.0)
    assert c.steady_bps == pytest.approx(expected)
    assert c.verdict == "conform"


def test_goodput_fraction_applies():
    t, r = _bins([9.56e6] * 30)
    assert cf.judge(t, r, 10e6, 0.02, 1.0, payload_fraction=1448 / 1514).ok
    assert not cf.judge(t, r, 10e6, 0.02, 1.0).ok  # judged on the wire rate it is 4 % low


def test_straddling_ci_is_decided_on_the_point_and_says_so():
    t, r = _bins([11.5e6, 9.3e6] * 3)
    c = cf.judge(t, r, 10e6, 0.1, 0.0)
    assert c.by_point and "point estimate" in c.line()


def test_rejects_empty():
    with pytest.raises(ValueError):
        cf.judge([], [], 1e6, 0.1, 0.0)
