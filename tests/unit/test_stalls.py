"""Path freezes (netslo.stalls): a held-then-released run of requests is one, a slow path or a queue
that builds and drains is not."""

import numpy as np

from netslo import samples, stalls

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
    from netslo.stats import analyze
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
