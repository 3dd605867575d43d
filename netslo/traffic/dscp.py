"""DSCP names and TOS bytes: 'EF' -> DSCP 46 -> TOS 0xb8. TOS = DSCP << 2 | ECN (ECN left 0)."""

from __future__ import annotations

from netslo.core.errors import SpecError

DSCP_NAMES = {
    "CS0": 0, "BE": 0, "DF": 0, "CS1": 8, "AF11": 10, "AF12": 12, "AF13": 14, "CS2": 16, "AF21": 18,
    "AF22": 20, "AF23": 22, "CS3": 24, "AF31": 26, "AF32": 28, "AF33": 30, "CS4": 32, "AF41": 34,
    "AF42": 36, "AF43": 38, "CS5": 40, "VA": 44, "EF": 46, "CS6": 48, "CS7": 56, "LE": 1,
}
FORM = "a DSCP name (EF, AF41, CS1...), a DSCP number 0..63, or a TOS byte as hex (0xb8)"


def tos_byte(text, field: str = "dscp") -> int:
    """'EF' or '46' -> 0xb8 (TOS byte); '0xb8' is taken as a TOS byte as is."""
    s = str(text).strip()
    if s.upper() in DSCP_NAMES:
        return DSCP_NAMES[s.upper()] << 2
    try:
        if s.lower().startswith("0x"):
            value = int(s, 16)
            if 0 <= value <= 255:
                return value
        elif s.isdigit() and 0 <= int(s) <= 63:
            return int(s) << 2
    except ValueError:
        pass
    raise SpecError(field, text, FORM)


def dscp_of(tos: int) -> int:
    return (int(tos) >> 2) & 0x3F
