"""Faults under the disruption study, on the embedded pod network (real kernel, real processes): each
ends as the right result within the bound its ``timeout`` mark sets (pytest-timeout fails a test that
hangs past it), never as a hang and never as a clean run.

* a partition of the server's node (its underlay link dropped for 1 s) is measured loss on the
  cross-node path, within the drop's own clock marks, and nothing on the same-node path;
* the client's agent killed under the study (every process in its namespace, SIGKILL) is an
  InfrastructureError naming the probe that failed;
* the server's responders killed (the endpoint gone) is measured: an outage to the window's end, every
  held connection reset, new connections failing;
* the server's processes paused for 1 s (a frozen node) reads as a stall of the held connections, with
  no connection reset;
* the client's processes paused for 2 s (its node frozen: the open-loop sender sends nothing, then
  everything at once) is judged as measured and at its worst over the gap: against a 50 ms outage
  objective an InfrastructureError naming the send gap, never a clean trial; against a 10 s one a
  pass; paused in the first run only (a client held back once), the study is measured once more and
  judged on that;
* an action that takes longer than its window is an InfrastructureError, not a shorter outage.
"""

import dataclasses
import math
import os
import signal
import time

import pytest

from netslo.core.errors import InfrastructureError
from netslo.providers.disruption import Action
from netslo.providers.netns.cluster import NetnsCluster, pids_in_netns
from netslo.slo import spec as slo
from netslo.studies import disruption

from .disruption_checks import assert_partition_measured, check_partition, pause_action


@pytest.fixture
def cl():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        server = c.add_pod("server", "node0")
        cross, same = c.add_pod("client", "node1"), c.add_pod("client-same", "node0")
        ports = c.start_responders(server, ("udp", "tcp"))
        yield c, server, cross, same, ports


def _signal(cluster, pod, sig) -> int:
    pids = pids_in_netns(cluster.netns_of(pod))
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass
    return len(pids)


def _paused(cluster, pod, seconds):
    """An action pausing every process of ``pod`` (SIGSTOP) for ``seconds``."""
    return pause_action(f"pause-{pod.name}", lambda: _signal(cluster, pod, signal.SIGSTOP),
                        lambda: _signal(cluster, pod, signal.SIGCONT), seconds, f"pod {pod.name} paused {seconds:g} s", 1.5)


@pytest.mark.timeout(120)
def test_a_partition_is_measured_loss_across_nodes_and_nothing_on_the_same_node(cl):
    c, server, cross, same, ports = cl
    check_partition(c, server, cross, same, ports, min_loss=0.3)


@pytest.mark.timeout(120)
def test_a_partition_measured_by_detached_probes_reads_as_by_attached_ones(cl):
    """The study's other way to run its probes (``Action.detached_probes``: for actions that break this
    process's streams to the pods) measures the same outage within the drop's marks."""
    c, server, cross, _, ports = cl
    with c.disruptions() as acts:
        action = dataclasses.replace(acts.action("partition-1s", cross, server), detached_probes=True)
        study = disruption.run(c, cross, server, ports, action, trials=1)
    assert_partition_measured(study, min_loss=0.3)


@pytest.mark.timeout(120)
def test_the_clients_agent_killed_under_the_study_is_an_infrastructure_error_naming_the_probe(cl):
    c, server, cross, _, ports = cl
    killed = []
    kill = Action("kill-client-agent", lambda: killed.append(_signal(c, cross, signal.SIGKILL)) or {},
                  "every process in the client pod's namespace killed", window=1.0)
    with pytest.raises(InfrastructureError, match=r"the (udp|held-\d|new) probe of the disruption study failed: "):
        disruption.run(c, cross, server, ports, kill, trials=1)
    assert killed and killed[0] >= 1, "nothing was killed: the test did not test"


@pytest.mark.timeout(120)
def test_a_server_whose_responders_died_is_an_endless_outage_with_every_held_connection_reset(cl):
    c, server, cross, _, ports = cl
    gone = Action("kill-server", lambda: {"killed": _signal(c, server, signal.SIGKILL)},
                  "every process in the server pod's namespace killed", window=1.5)
    study = disruption.run(c, cross, server, ports, gone, trials=1)
    v = study.trials[0].values
    assert study.trials[0].marks["killed"] >= 1
    assert math.isinf(v["outage"]) and math.isinf(v["recovery"]), study.summary()
    assert v["resets"] == disruption.HELD and v["conn_fail"] >= 100, study.summary()


@pytest.mark.timeout(120)
def test_a_paused_server_reads_as_a_stall_of_the_held_connections_not_a_reset(cl):
    c, server, cross, _, ports = cl
    study = disruption.run(c, cross, server, ports, _paused(c, server, 1.0), trials=1)
    v, m = study.trials[0].values, study.trials[0].marks
    assert m["stopped"] >= 1
    assert v["stall"] >= (m["off_start"] - m["on_end"]) * 1e-9 - 0.05, study.summary()
    assert v["resets"] == 0, study.summary()


def _objective(outage: str, limit: float) -> list:
    """The thresholds of a disruption objective allowing ``outage`` (``limit`` s) and no reset."""
    return [slo.Threshold("disruption.outage.max", limit, outage, "t", trials=1),
            slo.Threshold("disruption.resets.max", 0.0, "0", "t", trials=1)]


@pytest.mark.timeout(120)
def test_a_paused_client_is_an_infrastructure_error_naming_its_send_gap_not_a_clean_trial(cl):
    """As measured the 2 s pause hid everything (no request sent, none lost: outage 0, a pass); judged
    at its worst too, the 50 ms objective cannot be decided."""
    c, server, cross, _, ports = cl
    study = disruption.run(c, cross, server, ports, _paused(c, cross, 2.0), trials=1)
    assert study.trials[0].values["outage"] < 0.05, study.summary()     # what a judge of the values alone passed
    with pytest.raises(InfrastructureError, match=r"the client pod client on node node1 sent no UDP request for "
                                                  r"(19\d\d|2\d\d\d) ms in trial 1 of pause-client.*could hide a breach: "
                                                  r"disruption\.outage\.max = "):
        study.judge(_objective("50ms", 0.05), 0.95)


@pytest.mark.timeout(120)
def test_a_paused_client_is_judged_at_its_worst_where_the_objective_allows_the_gap(cl):
    """An objective that allows a 10 s outage is met whatever the 2 s pause hid: a pass, on the worst
    case (the gap counted as lost)."""
    c, server, cross, _, ports = cl
    study = disruption.run(c, cross, server, ports, _paused(c, cross, 2.0), trials=1)
    checks = study.judge(_objective("10s", 10.0), 0.95)
    assert [ch.verdict for ch in checks] == [slo.PASS, slo.PASS], study.summary()
    worst = study.trials[0].bounds
    assert worst["outage"] >= 1.9 and worst["loss"] > study.trials[0].values["loss"], study.summary()
    assert checks[0].estimate.value >= 1.9, checks[0].line()       # judged at the worst, not as measured


@pytest.mark.timeout(120)
def test_a_client_held_back_once_is_measured_once_more_and_judged_on_that(cl):
    """Without the second run this study was an InfrastructureError (the first run's 2 s send gap)."""
    c, server, cross, _, ports = cl
    pause, calls = _paused(c, cross, 2.0), []

    def first_only() -> dict:
        calls.append(1)
        return pause.run() if len(calls) == 1 else {}
    study = disruption.run(c, cross, server, ports, dataclasses.replace(pause, run=first_only), trials=1)
    assert len(calls) == 2, calls
    v = study.trials[0].values
    assert v["send_gap"] <= disruption.MAX_SEND_GAP_S and v["outage"] == 0.0 and v["resets"] == 0, study.summary()


@pytest.mark.timeout(120)
def test_an_action_that_overruns_its_window_is_an_infrastructure_error_not_a_shorter_outage(cl):
    c, server, cross, _, ports = cl
    slow = Action("slow", lambda: time.sleep(1.5) or {}, "sleeps past its window", window=1.0)
    with pytest.raises(InfrastructureError, match=r"action slow took 1\.\d s, longer than its 1 s window \(trial 1\)"):
        disruption.run(c, cross, server, ports, slow, trials=2)


@pytest.mark.timeout(120)
def test_an_actions_restore_runs_between_trials_outside_every_window(cl):
    """``Action.restore`` (a drain moves its backend home) runs after each window: here a real 300 ms
    DROP, lost by the UDP probe (so it happened) yet in no trial's window. ``one_responder=False``
    leaves the per-direction outage unmeasured (NaN)."""
    c, server, cross, _, ports = cl
    with c.disruptions() as acts:
        drop = acts.action("drop-300ms", cross, server)
        act = Action("still", lambda: {"on_start": time.monotonic_ns()}, "nothing, then a 300 ms drop as its restore",
                     window=1.5, restore=drop.run, restore_s=1.0, one_responder=False)
        study = disruption.run(c, cross, server, ports, act, trials=2)
    lost = int((study.samples["udp"].rows["recv_ns"] < 0).sum())
    assert lost >= 250, f"{lost} UDP requests lost: the restore's drop did not happen"
    for t in study.trials:
        assert t.values["outage"] == 0 and t.values["loss"] == 0, t.values
        assert math.isnan(t.values["outage_up"]) and "on_end" in t.marks["restore"], t


@pytest.mark.timeout(120)
def test_a_restore_that_overruns_its_budget_is_an_infrastructure_error(cl):
    c, server, cross, _, ports = cl
    act = Action("still", dict, "nothing", window=1.0, restore=lambda: time.sleep(1.5) or {}, restore_s=1.0)
    with pytest.raises(InfrastructureError, match=r"action still's restore took 1\.\d s, longer than its 1 s \(trial 1\)"):
        disruption.run(c, cross, server, ports, act, trials=2)
