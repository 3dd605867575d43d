"""Units: mandatory units, SI results, one-line errors naming field, value and expected form."""

import math

import pytest

from netslo.core import units
from netslo.core.errors import SpecError


@pytest.mark.parametrize("text,seconds", [("250us", 250e-6), ("5ms", 5e-3), ("1.5s", 1.5), ("2min", 120.0),
                                          ("100ns", 1e-7), (" 7 ms ", 7e-3), ("1e3us", 1e-3)])
def test_duration(text, seconds):
    assert math.isclose(units.duration(text), seconds)


@pytest.mark.parametrize("text,fraction", [("0.5%", 0.005), ("100%", 1.0), ("0%", 0.0)])
def test_percent(text, fraction):
    assert math.isclose(units.percent(text), fraction)


@pytest.mark.parametrize("text,bps", [("10mbit", 1e7), ("1gbit", 1e9), ("500kbit", 5e5), ("2MBps", 1.6e7)])
def test_rate(text, bps):
    assert math.isclose(units.rate(text), bps)


@pytest.mark.parametrize("text,n", [("64", 64), ("1k", 1000), ("10kB", 10_000), ("2KiB", 2048), ("1MiB", 1 << 20)])
def test_size(text, n):
    assert units.size(text) == n


@pytest.mark.parametrize("fn,text", [
    (units.duration, "5"), (units.duration, "5 parsecs"), (units.duration, "-1ms"), (units.duration, "nan ms"),
    (units.duration, "inf s"), (units.duration, True), (units.duration, None), (units.duration, [1]),
    (units.percent, "1.5"), (units.percent, "101%"), (units.percent, "-1%"),
    (units.rate, "10"), (units.rate, "10 furlongs"), (units.size, "1.5"), (units.size, "-3"), (units.size, "3 bananas"),
])
def test_bad_values_name_field_value_and_form(fn, text):
    with pytest.raises(SpecError) as e:
        fn(text, "thresholds.rtt.p99")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("thresholds.rtt.p99: value ")
    assert repr(text) in msg
    assert "expected" in msg


def test_format_round_trips_scale():
    assert units.format_duration(0.00123) == "1.23ms"
    assert units.format_duration(123e-6) == "123µs"
    assert units.format_percent(0.0123) == "1.23%"
