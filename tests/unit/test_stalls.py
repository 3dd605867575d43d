"""Stalls (netslo.slo.stalls): a held-then-released run of requests is a path freeze, a slow path or a
queue that builds and drains is not; which requests a client's own stalls touched; and the verdict
after stalls (runner.settle_stalls): a failing run over a stall is measured again, twice at most; when
the last one still fails only because the client was descheduled it is an infrastructure error naming
that, and when the path breaks the threshold too it stays a failure. Prepared rows, no namespaces."""

import dataclasses

import numpy as np
import pytest

from netslo.core.errors import InfrastructureError
from netslo.providers.base import Pod
from netslo.slo import runner, stalls
from netslo.slo import spec as slo
from netslo.slo.scenario import Scenario
from netslo.stats import samples

MS = 1_000_000


def _run(recv_of_send, n=600, interval=3 * MS):
    rows = samples.empty(n)
    rows["sched_ns"] = rows["send_ns"] = np.arange(n, dtype=np.int64) * interval
    rows["recv_ns"] = recv_of_send(rows["send_ns"])
    return samples.SampleSet(rows, {})


def test_a_freeze_is_found_with_its_length_and_the_requests_it_held():
    start, end = 300 * MS, 358 * MS            # the path stops for 58 ms
    s = _run(lambda t: np.where((t >= start) & (t < end), end + (t - start) // 20, t + MS // 2))
    f = stalls.path_freeze(s)
    assert f is not None and 0.057 <= f.wait <= 0.059 and abs(f.at - 0.300) < 1e-9
    assert 17 <= f.held <= 20 and f.answered_within < 0.005
    assert "the path froze" in stalls.why_remeasure(_analysis(s), s)


def test_a_freeze_while_the_client_was_also_late_names_both_the_freeze_first():
    start, end = 300 * MS, 358 * MS
    s = _run(lambda t: np.where((t >= start) & (t < end), end + (t - start) // 20, t + MS // 2))
    s.rows["send_ns"][10] += 6 * MS            # one send 6 ms late: over a 5 ms stall level
    why = stalls.why_remeasure(_analysis(s), s, level=0.005)
    assert why.startswith("the path froze: ") and ", and the measuring host stalled (" in why, why
    assert stalls.why_remeasure(_analysis(s), s, level=0.010).count("stalled") == 0


def test_a_slow_path_is_not_a_freeze():
    s = _run(lambda t: t + 50 * MS)            # 50 ms on every request: answers as spread as sends
    assert stalls.path_freeze(s) is None


def test_a_queue_that_builds_and_drains_at_its_service_rate_is_not_a_freeze():
    # arrivals every 3 ms; a server taking 4 ms per request for 100 requests (queue grows to ~100 ms),
    # then 1 ms per request (drains): answers leave >= 1 ms apart, a third of the send spacing
    t_free, out = 0, []
    for i, t in enumerate(np.arange(600, dtype=np.int64) * 3 * MS):
        service = 4 * MS if 100 <= i < 200 else MS
        t_free = max(t_free, t) + service
        out.append(t_free)
    s = _run(lambda t: np.array(out, dtype=np.int64))
    assert (s.rows["recv_ns"] - s.rows["send_ns"]).max() > 90 * MS
    assert stalls.path_freeze(s) is None


def test_a_freeze_shorter_than_a_host_stall_is_not_reported():
    start, end = 300 * MS, 308 * MS
    s = _run(lambda t: np.where((t >= start) & (t < end), end, t + MS // 2))
    assert stalls.path_freeze(s) is None


def test_unanswered_requests_do_not_make_a_freeze():
    s = _run(lambda t: t + MS // 2)
    s.rows["recv_ns"][100:150] = -1            # lost, not held
    assert stalls.path_freeze(s) is None


def _analysis(s):
    from netslo.stats.analysis import analyze
    return analyze(s)


def test_a_compact_set_is_read_by_columns_and_parts_out_of_time_order_are_sorted():
    start, end = 300 * MS, 358 * MS
    s = _run(lambda t: np.where((t >= start) & (t < end), end + (t - start) // 20, t + MS // 2))
    compact = samples.SampleSet(meta={}, chunks=s.chunks())
    assert stalls.path_freeze(compact) is not None
    assert compact._rows is None                     # the structured rows were never built
    later = samples.SampleSet(s.rows[300:].copy(), {})
    earlier = samples.SampleSet(s.rows[:300].copy(), {})
    f = stalls.path_freeze(samples.SampleSet.concat([later, earlier]))   # an interleaved run's parts
    assert f is not None and 0.057 <= f.wait <= 0.059


def _starved(n=2000, interval=3 * MS, every=50, stall=40 * MS, rtt=MS // 2, path_extra=0):
    """A client that stops for ``stall`` after every ``every``-th send (the answer of that request is
    read only when it runs again) and then sends what it missed at once, 20 µs apart."""
    rows = samples.empty(n)
    sched = np.arange(n, dtype=np.int64) * interval
    send, recv = sched.copy(), sched + rtt + path_extra
    for k in range(0, n, every):
        resume = sched[k] + MS // 10 + stall
        recv[k] = max(recv[k], resume)                       # in flight: read after the stall
        missed = np.flatnonzero((sched > sched[k]) & (sched < resume))
        send[missed] = resume + 20_000 * np.arange(len(missed))
        recv[missed] = send[missed] + rtt + path_extra
    rows["sched_ns"], rows["send_ns"], rows["recv_ns"] = sched, send, recv
    return samples.SampleSet(rows, {})


def test_untouched_drops_the_late_sends_and_the_request_in_flight_when_the_client_stopped():
    s = _starved()
    keep = stalls.untouched(s)
    late = (s.rows["send_ns"] - s.rows["sched_ns"]) > stalls.HOST_STALL_S * 1e9
    assert not keep[late].any() and not keep[::50].any()                      # late sends, in-flight ones
    assert keep[~late & (np.arange(len(s)) % 50 != 0)].all()                  # nothing else
    assert (~keep).sum() < 0.25 * len(s)
    clean = _run(lambda t: t + MS // 2)
    assert stalls.untouched(clean).all()


def test_untouched_keeps_lost_requests_sent_on_time():
    s = _starved()
    s.rows["recv_ns"][20::50] = -1                           # lost, sent on time after each stall
    assert ((s.rows["send_ns"] - s.rows["sched_ns"])[20::50] == 0).all()
    assert stalls.untouched(s)[20::50].all()


SPEC = slo.parse({"version": 1, "defaults": {"samples": 2000, "max_samples": 2000, "interval": "3ms"},
                  "objectives": [{"name": "t", "thresholds": {"rtt.p99": "10ms"}}]})
SC = Scenario("cross-node", "udp", "64b")
SERVER = Pod("server", "node0", "10.0.0.1")


class Replay:
    """A cluster whose probe runs return ``runs`` in turn, and its short time-check runs (the
    runner's ``client_keeps_time``) ``checks`` in turn, then a clean one."""

    datapath, provider = "bridge", "replay"

    def __init__(self, *runs, checks=()):
        self.runs, self.checks = list(runs), list(checks)
        self.probes = self.check_runs = 0

    def probe(self, client, spec):
        if spec.count == runner.TIME_CHECK_REQUESTS:
            self.check_runs += 1
            return self.checks.pop(0) if self.checks else _run(lambda t: t + MS // 2, n=spec.count)
        self.probes += 1
        return self.runs.pop(0)

    def environment(self):
        return {"provider": self.provider}


def test_a_breach_made_only_by_the_clients_stalls_is_an_infrastructure_error_after_four_runs():
    c = Replay(_starved(), _starved(), _starved(), _starved())
    with pytest.raises(InfrastructureError) as e:
        runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    msg = str(e.value)
    assert c.probes == 4 and msg.count("re-measured") == 3
    assert msg.startswith("cross-node-udp-64b: not an SLO verdict: rtt.p99 = 40.1ms")
    assert "in measurement 4, but the measuring client itself was descheduled" in msg
    assert "stall level 5ms" in msg                                      # half the 10 ms threshold
    assert "1520 of 2000 requests its stalls did not touch no threshold fails (rtt.p99 = 500µs" in msg


def test_a_path_that_breaks_the_threshold_beside_the_stalls_still_fails():
    slow = lambda: _starved(path_extra=15 * MS)                                 # noqa: E731
    c = Replay(slow(), slow(), slow(), slow())
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    assert c.probes == 4 and out.verdict == "fail" and len(out.notes) == 3


def test_a_control_that_must_fail_keeps_a_breach_the_path_made_beside_the_stalls():
    """``expect_breach``: the same slow path beside stalls is kept at its first run (the test above
    takes four), its failure being the path's on the requests the stalls did not touch."""
    c = Replay(_starved(path_extra=15 * MS))
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC, expect_breach=True)
    assert c.probes == 1 and c.check_runs == 0 and out.verdict == "fail" and out.notes == []


def test_a_control_whose_breach_only_the_clients_stalls_made_is_measured_again():
    """``expect_breach`` does not let a stall stand in for the breach a control must show: measured
    again once the client keeps time, and the clean run passes (the control's test then fails)."""
    c = Replay(_starved(), _run(lambda t: t + MS // 2, n=2000))
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC, expect_breach=True)
    assert c.probes == 2 and c.check_runs == 3 and out.verdict == "pass"
    assert out.notes[0].startswith("re-measured: the previous run failed while the measuring client itself was "
                                   "descheduled"), out.notes


def test_a_clean_second_run_is_judged():
    c = Replay(_starved(), _run(lambda t: t + MS // 2, n=2000))
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    assert c.probes == 2 and c.check_runs == 3 and out.verdict == "pass"
    assert out.notes[0].startswith("re-measured: the previous run failed while the measuring host stalled")
    assert "; the client kept time in 3 check runs in a row (3 in all) of 100 requests" in out.notes[0]


def test_the_remeasurement_waits_until_the_clients_short_runs_keep_time_three_in_a_row():
    late = _starved(n=100, every=40)                                            # timer error up to 37 ms
    on_time = _run(lambda t: t + MS // 2, n=100)
    c = Replay(_starved(), _run(lambda t: t + MS // 2, n=2000), checks=[late, on_time, late, late])
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    assert c.check_runs == 7 and out.verdict == "pass"      # a quiet run between two late ones starts over
    assert "the client kept time in 3 check runs in a row (7 in all)" in out.notes[0]


def test_a_client_that_never_keeps_time_is_measured_again_when_the_wait_runs_out(monkeypatch):
    monkeypatch.setattr(runner, "QUIET_LIMIT_S", 0.0)
    late = _starved(n=100, every=40)
    c = Replay(_starved(), _run(lambda t: t + MS // 2, n=2000), checks=[late])
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    assert c.check_runs == 1 and out.verdict == "pass"
    assert "the client still did not keep time in 1 check run(s) of 100 requests" in out.notes[0]
    assert "last timer error max 37" in out.notes[0]


def test_the_stall_level_is_half_the_smallest_delay_threshold_broken_within_its_bounds():
    t = lambda metric, limit: slo.Threshold(metric, limit, "", "o")            # noqa: E731
    assert stalls.stall_level() == stalls.HOST_STALL_S
    assert stalls.stall_level([t("rtt.p99", 0.010)]) == 0.005
    assert stalls.stall_level([t("rtt.p99", 0.050), t("rtt.p50", 0.005)]) == 0.0025
    assert stalls.stall_level([t("rtt.p50", 0.100)]) == stalls.HOST_STALL_S     # never above it
    assert stalls.stall_level([t("rtt.p99", 200e-6)]) == stalls.STALL_FLOOR_S   # never below the floor
    assert stalls.stall_level([t("loss", 0.005)]) == stalls.HOST_STALL_S        # a fraction is no delay


# A sweep point as on a loaded CI machine (2026-11-27): 8 requests 1 s apart, P50 threshold 5 ms; the
# client woke ``late`` after its timer on every other request and the answer of each late one was read
# that much later too (the RTT the application saw).
_FILE = slo.parse({"version": 1, "defaults": {"interval": "1s"},
                   "objectives": [{"name": "ws", "thresholds": {"rtt.p50": "5ms"}}]})
SWEEP_SPEC = dataclasses.replace(_FILE, sampling=dataclasses.replace(_FILE.sampling, samples=8, max_samples=8))


def _woken_late(late, rtt=MS, n=8, every=2, path_extra=0):
    rows = samples.empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * 1000 * MS
    lateness = np.where(np.arange(n) % every == 0, late, 100_000)
    rows["send_ns"] = rows["sched_ns"] + lateness
    rows["recv_ns"] = rows["send_ns"] + rtt + path_extra + np.where(lateness > 100_000, late, 0)
    return samples.SampleSet(rows, {})


def test_a_breach_by_a_client_late_by_more_than_half_the_threshold_is_measured_again():
    """The CI failure of 2026-11-27 (P50 6.92 ms against 5 ms, sender timer error p99 7.38 ms: below
    the fixed 10 ms stall level, so it was judged as the network's) is measured again; a clean run
    then passes. With the fixed level it was an SLO failure (checked on the code before the change)."""
    c = Replay(_woken_late(7 * MS, every=1), _run(lambda t: t + MS, n=8, interval=1000 * MS))
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SWEEP_SPEC)
    assert c.probes == 2 and out.verdict == "pass", out.message()
    assert "stall level 2.5ms" in out.notes[0]


def test_a_breach_whose_every_request_a_stall_touched_is_not_an_slo_verdict():
    c = Replay(*[_woken_late(7 * MS, every=1) for _ in range(4)])
    with pytest.raises(InfrastructureError) as e:
        runner.run(c, None, SERVER, {"udp": 1}, SC, SWEEP_SPEC)
    assert c.probes == 4 and "around every one of the 8 requests: none is left" in str(e.value)


def test_a_slow_path_with_a_client_that_keeps_time_still_fails_at_once():
    c = Replay(_woken_late(200_000, path_extra=6 * MS))       # late 0.2 ms: no stall at 2.5 ms
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SWEEP_SPEC)
    assert c.probes == 1 and out.verdict == "fail" and out.notes == []


def test_a_slow_path_beside_a_late_client_fails_on_the_requests_the_stalls_did_not_touch():
    slow = lambda: _woken_late(3 * MS, path_extra=6 * MS)     # noqa: E731  late 3 ms on every other one
    c = Replay(slow(), slow(), slow(), slow())
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SWEEP_SPEC)
    assert c.probes == 4 and out.verdict == "fail" and len(out.notes) == 3


def _behind(n=2000, interval=3 * MS, lag=10 * MS):
    """A client whose every send left ``lag`` after its schedule (the kind + Cilium CI run of
    2026-11-27: median send-timer error 10.4 ms against a 4 ms interval, right after the cluster came up)."""
    rows = samples.empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * interval
    rows["send_ns"] = rows["sched_ns"] + lag
    rows["recv_ns"] = rows["send_ns"] + MS // 2
    return samples.SampleSet(rows, {})


def test_a_run_that_could_not_keep_its_schedule_is_taken_again_once_the_client_keeps_time():
    c = Replay(_behind(), _run(lambda t: t + MS // 2, n=2000), checks=[_behind(n=100, lag=12 * MS)])
    out = runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    assert c.probes == 2 and c.check_runs == 4 and out.verdict == "pass"
    assert out.notes[0].startswith("re-measured: the previous run's probe could not keep its schedule: "
                                   "median send-timer error 10.000 ms > 3.000 ms")
    assert "the client kept time in 3 check runs in a row (4 in all)" in out.notes[0]


def test_a_sender_that_never_keeps_its_schedule_is_an_infrastructure_error_not_a_verdict():
    c = Replay(_behind(), _behind(), _behind(), _behind())
    with pytest.raises(runner.OffPace) as e:
        runner.run(c, None, SERVER, {"udp": 1}, SC, SPEC)
    assert isinstance(e.value, InfrastructureError) and c.probes == 4
    msg = str(e.value)
    assert msg.startswith("cross-node-udp-64b: probe could not keep its schedule") and "(measurement 4)" in msg
    assert msg.count("re-measured: the previous run's probe could not keep its schedule") == 3


def test_a_check_run_is_short_whatever_the_scenarios_send_period():
    slow = Scenario("cross-node", "udp", "64b", interval=1.0)              # a sweep point at 1 s
    c = Replay(_starved(), _run(lambda t: t + MS // 2, n=2000))
    seen = []
    probe = c.probe
    c.probe = lambda client, spec: (seen.append(spec.interval), probe(client, spec))[1]
    runner.run(c, None, SERVER, {"udp": 1}, slow, SPEC)
    assert seen[1:4] == [runner.TIME_CHECK_INTERVAL_S] * 3 and seen[0] == 1.0
