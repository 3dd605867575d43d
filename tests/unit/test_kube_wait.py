"""Readiness waits: deadline, last status in the error, hopeless states, object summaries."""

import pytest

from netslo.errors import InfrastructureError
from netslo.providers.kube_wait import (Hopeless, daemonset_ready, deployment_ready, node_ready,
                                        pod_ready, pod_summary, wait_until)


class FakeClock:
    """Virtual time for the wait loop (sleep advances it): no real waiting in unit tests."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_wait_returns_once_ready():
    states = iter([(False, "a"), (False, "b"), (True, "done")])
    clock = FakeClock()
    assert wait_until("thing", 10, lambda: next(states), clock=clock, sleep=clock.sleep) == "done"
    assert clock.t == pytest.approx(1.0)


def test_wait_times_out_naming_component_and_last_status():
    clock = FakeClock()
    n = iter(range(1000))
    with pytest.raises(InfrastructureError) as e:
        wait_until("CNI calico: DaemonSet kube-system/calico-node", 30,
                   lambda: (False, f"0/2 ready (poll {next(n)})"), clock=clock, sleep=clock.sleep)
    assert str(e.value) == ("CNI calico: DaemonSet kube-system/calico-node: not ready after 30s; "
                            "last status: 0/2 ready (poll 60)")
    assert 30 <= clock.t <= 30.5


def test_failed_polls_are_status_not_the_end():
    clock = FakeClock()
    calls = []

    def check():
        calls.append(1)
        if len(calls) < 3:
            raise InfrastructureError("kubectl get: connection refused")
        return True, "ok"
    assert wait_until("apiserver", 10, check, clock=clock, sleep=clock.sleep) == "ok"


def test_hopeless_state_fails_at_once():
    clock = FakeClock()

    def check():
        raise Hopeless("agent: waiting ErrImageNeverPull")
    with pytest.raises(InfrastructureError, match="^pod ns/p: cannot become ready: agent: waiting ErrImageNeverPull"):
        wait_until("pod ns/p", 100, check, clock=clock, sleep=clock.sleep)
    assert clock.t == 0


def _pod(phase, conditions=(), containers=()):
    return {"status": {"phase": phase, "conditions": list(conditions), "containerStatuses": list(containers)}}


def test_pod_summary_names_conditions_and_container_states():
    pod = _pod("Pending", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "message": "0/1 nodes are available: 1 node(s) didn't match affinity."}],
               [{"name": "udp", "state": {"waiting": {"reason": "ContainerCreating"}}, "restartCount": 2}])
    assert pod_summary(pod) == ("phase=Pending; PodScheduled=Unschedulable: 0/1 nodes are available: "
                                "1 node(s) didn't match affinity.; udp: waiting ContainerCreating restarts=2")


def test_pod_ready_and_hopeless_image():
    ready = _pod("Running", [{"type": "Ready", "status": "True"}],
                 [{"name": "agent", "ready": True, "started": True, "state": {"running": {}}}])
    assert pod_ready(ready) == (True, "phase=Running; agent: running")
    never = _pod("Pending", [], [{"name": "agent", "state": {"waiting": {
        "reason": "ErrImageNeverPull", "message": 'Container image "x" is not present with pull policy of Never'}}}])
    with pytest.raises(Hopeless, match='ErrImageNeverPull \\(Container image "x" is not present'):
        pod_ready(never)


def test_node_daemonset_deployment_readiness():
    node = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "container runtime network not ready: cni plugin not initialized"}]}}
    ok, status = node_ready(node)
    assert not ok and "cni plugin not initialized" in status
    assert daemonset_ready({"status": {"desiredNumberScheduled": 2, "numberReady": 1,
                                       "updatedNumberScheduled": 2}}) == (False, "1/2 ready, 2 updated")
    assert daemonset_ready({"status": {"desiredNumberScheduled": 0}})[0] is False  # nothing scheduled yet
    assert daemonset_ready({"status": {"desiredNumberScheduled": 2, "numberReady": 2,
                                       "updatedNumberScheduled": 2}})[0]
    assert deployment_ready({"spec": {"replicas": 1}, "status": {"availableReplicas": 1,
                                                                 "updatedReplicas": 1}}) == (True, "1/1 available, 1 updated")
