"""Wall time per kind of work: outermost block wins, kinds never overlap, bad kinds refused."""

import threading
import time
from types import SimpleNamespace

import pytest

from netslo.core import phase_times
from netslo.gate.plugin import gate_time


@pytest.fixture(autouse=True)
def fresh():
    phase_times.reset()
    yield
    phase_times.reset()


def test_nested_blocks_count_once_for_the_outermost_kind():
    with phase_times.timed("impairment apply/verify/clear"):
        with phase_times.timed("probing"):
            time.sleep(0.05)
    with phase_times.timed("probing"):
        time.sleep(0.02)
    t = phase_times.totals()
    assert list(t) == ["impairment apply/verify/clear", "probing"]           # KINDS order
    assert t["impairment apply/verify/clear"]["calls"] == 1 and t["probing"]["calls"] == 1
    assert 0.05 <= t["impairment apply/verify/clear"]["seconds"] < 0.5
    assert 0.02 <= t["probing"]["seconds"] < t["impairment apply/verify/clear"]["seconds"]


def test_an_exception_still_counts_and_unwinds_the_depth():
    with pytest.raises(RuntimeError):
        with phase_times.timed("pods"):
            raise RuntimeError("x")
    with phase_times.timed("responders"):
        pass
    assert set(phase_times.totals()) == {"pods", "responders"}


def test_each_thread_has_its_own_outermost_block():
    def work():
        with phase_times.timed("bulk flows and pod commands"):
            time.sleep(0.01)
    with phase_times.timed("probing"):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert set(phase_times.totals()) == {"probing", "bulk flows and pod commands"}


def test_an_unknown_kind_is_refused_with_the_list():
    with pytest.raises(ValueError, match="phase kind: value 'probes' — expected one of provider up, "):
        with phase_times.timed("probes"):
            pass


def test_decorator_keeps_name_and_result():
    @phase_times.timed_call("analysis")
    def f(x):
        return x * 2
    assert f(3) == 6 and f.__name__ == "f" and phase_times.totals()["analysis"]["calls"] == 1


def test_summary_other_is_the_wall_time_no_kind_accounts_for_and_the_table_lists_modules():
    state = {"modules": {}}
    # running schedule sums as the plugin passes them: 0.5 s in a.py's set-up, 1.5 s in its call, 3 s in b.py
    for nodeid, when, s, sched in (("netslo/gate/a.py::t1", "setup", 1.0, 0.5), ("netslo/gate/a.py::t1", "call", 2.0, 2.0),
                                   ("netslo/gate/a.py::t1", "teardown", 0.5, 2.0),
                                   ("netslo/gate/b.py::t2", "setup", 4.0, 5.0)):
        gate_time.record(state, nodeid, when, s, sched)
    out = gate_time.summary(state, 10.0, {"probing": {"seconds": 6.0, "calls": 2}})
    assert out["other_s"] == 4.0
    assert out["modules"]["netslo/gate/a.py"] == {"tests": 1, "setup": 1.0, "call": 2.0, "teardown": 0.5,
                                                "scheduled": 2.0}
    assert out["modules"]["netslo/gate/b.py"]["scheduled"] == 3.0
    assert out["scheduled_s"] == 0.0
    lines = gate_time.table(out)
    assert lines[0] == "wall 10.0 s" and "probing" in lines[1] and "60%" in lines[1]
    assert lines[-2] == "  netslo/gate/b.py: 4.0 s for 1 tests (setup 4.0, call 0.0, teardown 0.0; 3.0 s scheduled)"
    assert lines[-1].startswith("  measurement schedule 0.0 s (0%;")


def test_schedule_counts_for_the_outermost_kind_or_the_given_one():
    with phase_times.timed("impairment apply/verify/clear"):
        with phase_times.timed("probing"):
            phase_times.scheduled(2.0, "probing")          # a calibration probe: impairment time
    with phase_times.timed("probing"):
        phase_times.scheduled(4.0, "probing")
    phase_times.scheduled(6.0, "bulk flows and pod commands")   # no timed block runs: the kind given
    t = phase_times.totals()
    assert t["impairment apply/verify/clear"]["scheduled"] == 2.0
    assert t["probing"]["scheduled"] == 4.0
    assert t["bulk flows and pod commands"] == {"seconds": 0.0, "calls": 0, "scheduled": 6.0}
    out = gate_time.summary({"modules": {}}, 20.0, t)
    assert out["scheduled_s"] == 12.0
    assert gate_time.table(out)[-1].startswith("  measurement schedule 12.0 s (60%;")
    with pytest.raises(ValueError, match="phase kind: value 'bulk'"):
        phase_times.scheduled(1.0, "bulk")


def test_a_probe_schedules_its_requests_times_the_period():
    from netslo.providers.base import Cluster
    from netslo.traffic.probes import ProbeSpec

    class Canned(Cluster):   # a cluster whose agent answers with no samples: only the bookkeeping is tested
        provider = "canned"

        def exec_agent(self, pod, args, timeout):
            from netslo.stats.samples import SampleSet, empty
            return SampleSet(empty(0), {}).to_bytes()
    Canned.__abstractmethods__ = frozenset()
    pod = SimpleNamespace(name="client", node="node0")
    Canned().probe(pod, ProbeSpec("udp", "10.0.0.1", 9, count=500, interval=0.004))
    assert phase_times.totals()["probing"]["scheduled"] == pytest.approx(2.0)


def test_time_left_leaves_out_the_once_per_session_cluster_set_up(monkeypatch):
    from netslo.gate.plugin.progress import TerminalProgress
    h = TerminalProgress(config=None)
    h.done, h.total, h.spent = 2, 10, 86.0              # the first test paid an 80 s provider up
    monkeypatch.setattr(phase_times, "totals", lambda: {"provider up": {"seconds": 80.0, "calls": 1}})
    assert h.left() == "24 s"                           # (86 - 80) / 2 per test x 8 tests left
    monkeypatch.setattr(phase_times, "totals", lambda: {})
    assert h.left() == "5.7 min"
