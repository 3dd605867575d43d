"""WebSocket/MQTT message headers and the random fill (no compression gains)."""

import zlib

import pytest

from netslo.traffic import payload


def test_ws_request_and_response_roundtrip_with_exact_sizes():
    req = payload.ws_request(7, 1000, 5000)
    assert len(req) == 1000 and payload.parse_ws_request(req) == (7, 5000)
    resp = payload.ws_response(7, 11, 22, 5000)
    assert len(resp) == 5000 and payload.parse_ws_response(resp) == (7, 11, 22)


def test_mqtt_message_roundtrip():
    m = payload.mqtt_message(0xDEADBEEF, 3, 123456789, 2000)
    assert len(m) == 2000 and payload.parse_mqtt_message(m) == (0xDEADBEEF, 3, 123456789)


@pytest.mark.parametrize("parse,data", [
    (payload.parse_ws_request, b"NSLw"),
    (payload.parse_ws_request, payload.ws_response(1, 2, 3, 100)),
    (payload.parse_ws_response, payload.ws_request(1, 100, 100)),
    (payload.parse_mqtt_message, b"x" * 40),
])
def test_foreign_or_short_messages_are_rejected(parse, data):
    with pytest.raises(payload.PayloadError):
        parse(data)


@pytest.mark.parametrize("n", [100, 10_000, 100_000, 3 * payload.POOL_BYTES // 4])
def test_fill_is_random_enough_that_compression_gains_nothing(n):
    data = payload.random_fill(n, salt=5)
    assert len(data) == n
    assert len(zlib.compress(data, 9)) >= 0.99 * n
    assert payload.random_fill(n, salt=6) != data
