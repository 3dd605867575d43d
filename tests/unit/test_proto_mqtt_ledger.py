"""MQTT accounting per QoS: acknowledgements, deliveries, duplicates, foreign messages, loss split."""

import pytest

from netslo.stats import analysis as stats
from netslo.stats import samples
from netslo.traffic import payload
from netslo.traffic.probes.mqtt import WARMUP_SEQ, Ledger, qos_of


def _ledger(n=4, qos=1, run=42):
    return Ledger(samples.empty(n), run, qos)


def test_qos_from_protocol_name():
    assert [qos_of(f"mqtt-qos{q}") for q in (0, 1, 2)] == [0, 1, 2]
    with pytest.raises(ValueError, match="protocol"):
        qos_of("mqtt-qos3")


def test_acks_deliveries_and_duplicates_are_counted_once_each():
    led = _ledger()
    for seq, mid in ((0, 10), (1, 11), (2, 12), (3, 13)):
        led.published(seq, mid)
        led.rows[seq]["send_ns"] = 1000 * seq
    led.acknowledged(10)
    led.acknowledged(11)
    led.acknowledged(11)  # a second ack for the same mid is ignored
    led.delivered(payload.mqtt_message(42, 0, 0, 100), 5000)
    led.delivered(payload.mqtt_message(42, 0, 0, 100), 6000)   # duplicate (QoS 1 redelivery)
    led.delivered(payload.mqtt_message(42, 2, 0, 100), 7000)
    assert led.summary() == {"qos": 1, "delivered": 2, "acked": 2, "duplicates": 1, "foreign": 0}
    assert led.rows[0]["recv_ns"] == 5000 and led.rows[0]["dups"] == 1
    assert not led.complete(4)
    a = stats.analyze(samples.SampleSet(led.rows))
    # seq 1: acked but not delivered -> lost downstream; seq 3: never acked -> direction unknown
    assert a.counts["lost"] == 2 and a.counts["lost_down"] == 1 and a.counts["lost_unknown_direction"] == 1


def test_foreign_runs_warmup_and_out_of_range_seqs_are_not_samples():
    led = _ledger(run=1)
    led.delivered(payload.mqtt_message(2, 0, 0, 50), 1)           # another run's message
    led.delivered(b"not ours at all, long enough to parse", 1)
    led.delivered(payload.mqtt_message(1, 99, 0, 50), 1)          # seq beyond the run
    led.delivered(payload.mqtt_message(1, WARMUP_SEQ, 0, 50), 1)
    assert led.warm and led.foreign == 3 and (led.rows["recv_ns"] < 0).all()


def test_qos0_is_complete_without_acks():
    led = _ledger(n=1, qos=0)
    led.published(0, 1)
    led.delivered(payload.mqtt_message(42, 0, 0, 64), 10)
    assert led.complete(1) and led.rows[0]["srv_seen"] == -1
