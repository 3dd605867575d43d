"""The disruption metrics (netslo.stats.disruption) on requests whose fate is set here, and the
``disruption.*`` SLO keys (netslo.slo.spec): each value is the one the definition gives, and a bad
threshold is one line naming it."""

import math

import numpy as np
import pytest

from netslo.core.errors import SpecError
from netslo.slo import spec as slo
from netslo.stats import disruption as d
from netslo.stats.samples import SampleSet, empty

MS = 1_000_000


def _probe(n: int, interval_ms: float, lost=(), unseen=(), rtt_ms: float = 0.1, slow=None) -> SampleSet:
    """n requests ``interval_ms`` apart from t=0; ``lost``: indices not answered (of which ``unseen``
    the responder never got); ``slow``: index -> RTT (ms) of an answer that came late."""
    rows = empty(n)
    send = (np.arange(n) * interval_ms * MS).astype(np.int64)
    rows["send_ns"] = rows["send_app_ns"] = rows["sched_ns"] = send
    rtt = np.full(n, rtt_ms * MS, dtype=np.int64)
    for i, r in (slow or {}).items():
        rtt[i] = int(r * MS)
    rows["recv_ns"] = rows["recv_app_ns"] = send + rtt
    rows["srv_seen"] = 1
    lost = np.asarray(list(lost), dtype=np.int64)
    if len(lost):
        rows["recv_ns"][lost] = rows["recv_app_ns"][lost] = -1
    if len(unseen):
        rows["srv_seen"][np.asarray(list(unseen))] = 0
    return SampleSet(rows, {"protocol": "udp"})


def test_an_outage_up_is_its_lost_requests_times_the_interval_and_recovery_its_end():
    up = range(1500, 1700)                                   # 200 requests at 1 ms, the responder saw none
    udp = _probe(4000, 1.0, lost=up, unseen=up)
    v = d.window(udp, [], None, t0_ns=1000 * MS, window_s=2.5, before_s=0.5)
    assert v["outage"] == pytest.approx(0.200) and v["outage_up"] == pytest.approx(0.200)
    assert v["outage_down"] == 0.0
    assert v["recovery"] == pytest.approx(0.700)             # t0 + 0.5 s: the outage; + 0.2 s: clean again
    assert v["loss"] == pytest.approx(200 / 2500)
    assert v["rtt_before"] == pytest.approx(0.0001)


def test_answers_lost_on_the_way_back_are_the_down_outage_and_requests_not_seen_do_not_end_it():
    lost = list(range(1200, 1300))                           # seen, answer lost ...
    udp = _probe(4000, 1.0, lost=lost + [1300, 1301] + list(range(1302, 1350)), unseen=[1300, 1301])
    v = d.window(udp, [], None, t0_ns=1000 * MS, window_s=2.5, before_s=0.5)
    assert v["outage_up"] == pytest.approx(0.002)
    assert v["outage_down"] == pytest.approx(0.150)          # 1200..1349: two unseen inside do not end it
    assert v["outage"] == pytest.approx(0.150)


def test_an_outage_still_on_at_the_window_end_is_infinite_and_nothing_recovered():
    udp = _probe(3000, 1.0, lost=range(2000, 3000), unseen=range(2000, 3000))
    v = d.window(udp, [], None, t0_ns=1000 * MS, window_s=2.0, before_s=0.5)
    assert math.isinf(v["outage"]) and math.isinf(v["recovery"])


def test_no_loss_is_zero_outage_and_recovery_at_t0():
    v = d.window(_probe(3000, 1.0), [], None, t0_ns=1000 * MS, window_s=1.5, before_s=0.5)
    assert v["outage"] == v["outage_up"] == v["outage_down"] == v["recovery"] == v["loss"] == 0.0


def test_without_the_responders_report_the_directions_are_unknown_not_zero():
    udp = _probe(3000, 1.0, lost=range(1500, 1600))
    udp.rows["srv_seen"] = -1
    v = d.window(udp, [], None, t0_ns=1000 * MS, window_s=1.9, before_s=0.5)
    assert math.isnan(v["outage_up"]) and math.isnan(v["outage_down"])
    assert v["outage"] == pytest.approx(0.100)


def test_held_connections_give_the_longest_stall_and_count_a_connection_that_lost_a_request_as_reset():
    udp = _probe(3000, 1.0)
    stalled = _probe(150, 20.0, slow={60: 3140.0})                         # answered after 3.14 s
    reset = _probe(150, 20.0, lost=range(70, 150))                         # died at request 70
    fine = _probe(150, 20.0)
    new = _probe(300, 10.0, lost=range(110, 130))
    v = d.window(udp, [stalled, reset, fine], new, t0_ns=1000 * MS, window_s=1.9, before_s=0.5)
    assert v["stall"] == pytest.approx(3.140) and v["resets"] == 1.0 and v["conn_fail"] == 20.0


def test_dns_lookups_that_were_resent_or_not_answered_in_the_window_are_its_timeouts():
    udp = _probe(3000, 1.0)
    dns = _probe(150, 20.0, lost=[80])                       # 80: no answer; 60 and 61: answered after a resend
    n = len(dns.rows)
    dns.meta["per_row"] = {"dns_timeouts_a": [1 if i in (60, 61) else 0 for i in range(n)],
                           "dns_timeouts_aaaa": [1 if i == 61 else 0 for i in range(n)]}
    v = d.window(udp, [], None, t0_ns=1000 * MS, window_s=1.9, before_s=0.5, dns=dns)
    assert v["dns_timeouts"] == 3.0
    assert d.window(udp, [], None, t0_ns=1000 * MS, window_s=0.1, before_s=0.5, dns=dns)["dns_timeouts"] == 0.0
    assert "dns_timeouts" not in d.window(udp, [], None, t0_ns=1000 * MS, window_s=1.9, before_s=0.5)


def test_no_request_in_the_window_is_an_error_not_a_zero():
    with pytest.raises(ValueError, match="no UDP request sent"):
        d.window(_probe(100, 1.0), [], None, t0_ns=1000 * MS, window_s=1.0, before_s=0.5)


@pytest.mark.parametrize("metric, text, limit", [
    ("disruption.outage.max", "20ms", 0.020), ("disruption.recovery.p50", "1s", 1.0),
    ("disruption.loss.max", "2%", 0.02), ("disruption.resets.max", 0, 0.0), ("disruption.conn_fail.p50", 3, 3.0),
])
def test_disruption_keys_parse_with_their_units(metric, text, limit):
    spec = slo.parse({"version": 1, "objectives": [{"name": "d", "trials": 6, "thresholds": {metric: text}}]}, "t.yaml")
    (t,) = spec.objectives[0].thresholds
    assert t.limit == pytest.approx(limit) and t.trials == 6
    assert slo.STUDY_OF[metric.partition(".")[0]] == "disruption"


@pytest.mark.parametrize("metric, text, expect", [
    ("disruption.outage.max", 20, r"thresholds\.disruption\.outage\.max: value 20 — expected"),
    ("disruption.resets.max", "0ms", r"thresholds\.disruption\.resets\.max: value '0ms' — expected"),
    ("disruption.loss.max", "2ms", r"thresholds\.disruption\.loss\.max: value '2ms' — expected"),
    ("disruption.outage.mean", "1s", r"disruption\.outage\.mean"),
    ("disruption.outage.p99", "1s", r"P99 needs \d+ trials"),
])
def test_bad_disruption_thresholds_are_one_line_naming_the_key(metric, text, expect):
    with pytest.raises(SpecError, match=expect) as e:
        slo.parse({"version": 1, "objectives": [{"name": "d", "trials": 6, "thresholds": {metric: text}}]}, "t.yaml")
    assert "\n" not in str(e.value)


def _without(samples: SampleSet, lo: int, hi: int) -> SampleSet:
    """``samples`` without its requests ``lo`` to ``hi - 1``: a client that sent nothing then."""
    keep = np.ones(len(samples.rows), bool)
    keep[lo:hi] = False
    return SampleSet(samples.rows[keep], samples.meta)


INTERVALS = {"udp": 0.001, "new": 0.010, "dns": 0.020}


def test_a_held_back_client_is_judged_at_its_worst_with_the_gap_counted_as_lost():
    """1.5 s without a request sent (nothing lost as measured): at worst every UDP request of the gap
    lost (an outage of the gap), every new connection of it failed, each held answer the gap later."""
    udp = _without(_probe(5000, 1.0), 1500, 3000)
    new = _without(_probe(500, 10.0), 150, 300)
    held = [_probe(250, 20.0)]
    args = (udp, held, new, 1000 * MS, 3.0, 0.5, None)
    v = d.window(*args)
    assert v["outage"] == 0.0 and v["loss"] == 0.0 and v["conn_fail"] == 0.0
    assert v["send_gap"] == pytest.approx(1.501)
    w = d.held_back_bounds(*args, longer_than_s=1.0, intervals=INTERVALS)
    assert w["outage"] == pytest.approx(1.500) and w["outage_up"] == pytest.approx(1.500)
    assert w["loss"] == pytest.approx(1500 / 3000, abs=1e-3)
    assert w["recovery"] == pytest.approx(2.0)                # from t0 to the first send after the gap
    assert w["conn_fail"] == 150.0 and w["stall"] == pytest.approx(0.0001 + 1.501)
    assert w["resets"] == v["resets"] == 0.0


def test_gaps_within_the_resolution_leave_the_worst_case_as_measured():
    udp = _without(_probe(4000, 1.0), 1500, 2000)              # 0.5 s: below the 1 s the bound looks for
    args = (udp, [_probe(200, 20.0)], _probe(400, 10.0), 1000 * MS, 2.5, 0.5, None)
    v, w = d.window(*args), d.held_back_bounds(*args, longer_than_s=1.0, intervals=INTERVALS)
    assert {k: w[k] for k in d.SERIES if k in w} == {k: v[k] for k in d.SERIES if k in w}
