"""Parse human quantities with mandatory units into SI numbers.

- durations  -> seconds (float): "250us", "5ms", "1.5s", "2m" is rejected (ambiguous), "1min" accepted
- fractions  -> 0..1 (float):    "0.5%", "1.5%"   (a percent sign is required)
- rates      -> bits per second: "10mbit", "1gbit", "500kbit", "100bps" (bytes/s), "2MBps"
- sizes      -> bytes (int):     "64", "1k"/"1kB" (1000), "2KiB" (2048), "1MB", "1MiB"
- whole numbers of an option (int): "16", within bounds

Every error is a ``SpecError`` naming the field, the value and the expected form.
"""

from __future__ import annotations

import math
import re

from netslo.core.errors import SpecError

_NUM = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0}
_RATE_UNITS = {
    "bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
    "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3,
}

DURATION_FORM = "a duration with a unit, e.g. '250us', '5ms', '1.5s'"
PERCENT_FORM = "a percentage with '%', e.g. '0.5%'"
RATE_FORM = "a rate with a unit, e.g. '10mbit', '1gbit', '2MBps'"
SIZE_FORM = "a size in bytes, e.g. '64', '1k', '10kB', '2KiB'"


def _split(text, field: str, expected: str) -> tuple[float, str]:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise SpecError(field, text, expected)
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ%]*)", str(text).strip())
    if not m:
        raise SpecError(field, text, expected)
    number = float(m.group(1))
    if not math.isfinite(number):
        raise SpecError(field, text, expected)
    return number, m.group(2)


def _non_negative(number: float, text, field: str, expected: str) -> None:
    if number < 0:
        raise SpecError(field, text, expected + " (not negative)")


def whole(text, field: str, lo: int, hi: int | None = None, note: str = "") -> int:
    """A command-line whole number lo..hi (hi None: no upper bound), written in digits; ``note`` is
    added to the expected form, e.g. '(the nodes)'."""
    if not str(text).isdigit() or int(text) < lo or (hi is not None and int(text) > hi):
        form = f"a whole number {lo}..{hi}" if hi is not None else f"a whole number >= {lo}"
        raise SpecError(field, text, f"{form} {note}".rstrip())
    return int(text)


def duration(text, field: str = "duration") -> float:
    """'5ms' -> 0.005 seconds. A bare number is rejected: the unit is mandatory."""
    number, unit = _split(text, field, DURATION_FORM)
    if unit not in _DURATION_UNITS:
        raise SpecError(field, text, DURATION_FORM)
    _non_negative(number, text, field, DURATION_FORM)
    return number * _DURATION_UNITS[unit]


def percent(text, field: str = "fraction") -> float:
    """'1.5%' -> 0.015. Must lie in 0%..100%."""
    number, unit = _split(text, field, PERCENT_FORM)
    if unit != "%":
        raise SpecError(field, text, PERCENT_FORM)
    if not 0.0 <= number <= 100.0:
        raise SpecError(field, text, PERCENT_FORM + " between 0% and 100%")
    return number / 100.0


def rate(text, field: str = "rate") -> float:
    """'10mbit' -> 1e7 bits per second ('MBps' means megabytes per second)."""
    number, unit = _split(text, field, RATE_FORM)
    key = unit.lower()
    if key not in _RATE_UNITS or unit == "":
        raise SpecError(field, text, RATE_FORM)
    _non_negative(number, text, field, RATE_FORM)
    return number * _RATE_UNITS[key]


def size(text, field: str = "size") -> int:
    """'1k' -> 1000, '2KiB' -> 2048 bytes; a bare integer means bytes."""
    number, unit = _split(text, field, SIZE_FORM)
    key = unit.lower()
    if key not in _SIZE_UNITS:
        raise SpecError(field, text, SIZE_FORM)
    _non_negative(number, text, field, SIZE_FORM)
    value = number * _SIZE_UNITS[key]
    if value != int(value):
        raise SpecError(field, text, SIZE_FORM + " (a whole number of bytes)")
    return int(value)


def format_duration(seconds: float) -> str:
    """Seconds -> a short human string with a unit chosen for 3 significant digits."""
    if seconds is None or not math.isfinite(seconds):
        return str(seconds)
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.3g}s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.3g}ms"
    return f"{seconds * 1e6:.3g}µs"


def format_percent(fraction: float) -> str:
    """0.0123 -> '1.23%'."""
    if fraction is None or not math.isfinite(fraction):
        return str(fraction)
    return f"{fraction * 100:.3g}%"
