"""Readiness waits: deadline, last status in the error, hopeless states, object summaries."""

import pytest

from netslo.core.errors import InfrastructureError
from netslo.providers.kube.wait import (
    Hopeless,
    daemonset_ready,
    deployment_ready,
    node_ready,
    pod_ready,
    pod_summary,
    wait_until,
)


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


# ---- watch_until: list, then watch from the list's resourceVersion --------------------------------

class FakeApi:
    """In-memory stand-in for KubeApi.list/watch: a list answer, then scripted watch streams.

    ``streams``: one list of (type, object) per watch call; an exception instance in it is raised
    there. Records every call so tests can check which resourceVersion each watch started from."""

    def __init__(self, listed, list_rv, streams, clock=None):
        self.listed, self.list_rv, self.streams, self.clock = listed, list_rv, list(streams), clock
        self.calls = []

    def list(self, kind, namespace=None, *, name=None, selector=None):
        self.calls.append(("list", kind, name))
        return [o for o in self.listed if name is None or o["metadata"]["name"] == name], self.list_rv

    def watch(self, kind, namespace=None, *, name=None, selector=None, resource_version, timeout):
        self.calls.append(("watch", kind, resource_version))
        events = self.streams.pop(0) if self.streams else []
        for ev in events:
            if isinstance(ev, Exception):
                raise ev
            yield ev
        if self.clock is not None:   # a watch that saw nothing ends at its server-side timeout
            self.clock.t += timeout if not events else 0

    def events(self, namespace, name=None, limit=3):
        return ["FailedScheduling: 0/1 nodes are available"]


def _obj(name, rv, **status):
    return {"metadata": {"name": name, "resourceVersion": rv}, "status": status}


def _running(objs):
    o = objs.get("p")
    return (o is not None and o["status"].get("phase") == "Running"), (o or {}).get("status", {}).get("phase", "absent")


def test_watch_until_starts_at_the_lists_resource_version_and_follows_events():
    from netslo.providers.kube.wait import watch_until
    api = FakeApi([_obj("p", "10", phase="Pending")], "10",
                  [[("MODIFIED", _obj("p", "11", phase="Pending")), ("MODIFIED", _obj("p", "12", phase="Running"))]])
    assert watch_until(api, "pod", "pod ns/p", 30, _running, namespace="ns", name="p") == "Running"
    assert api.calls == [("list", "pod", "p"), ("watch", "pod", "10")]


def test_watch_until_rewatches_from_the_last_version_and_relists_when_expired():
    from netslo.providers.kube.api import Expired
    from netslo.providers.kube.wait import watch_until
    api = FakeApi([_obj("p", "10", phase="Pending")], "10", [
        [("MODIFIED", _obj("p", "15", phase="Pending")), ("BOOKMARK", {"metadata": {"resourceVersion": "20"}})],
        [Expired("gone")],
        [("MODIFIED", _obj("p", "31", phase="Running"))]])
    watch_until(api, "pod", "pod ns/p", 30, _running, namespace="ns", name="p")
    assert api.calls == [("list", "pod", "p"), ("watch", "pod", "10"), ("watch", "pod", "20"),
                         ("list", "pod", "p"), ("watch", "pod", "10")]


def test_watch_until_deleted_objects_leave_the_view():
    from netslo.providers.kube.wait import watch_until
    api = FakeApi([_obj("ns1", "5", phase="Terminating")], "5", [[("DELETED", _obj("ns1", "6"))]])
    status = watch_until(api, "namespace", "deletion of ns1", 30,
                         lambda objs: ("ns1" not in objs, "deleted" if "ns1" not in objs else "there"),
                         name="ns1", verb="gone")
    assert status == "deleted"


def test_watch_until_deadline_names_component_status_and_explanation():
    from netslo.providers.kube.wait import watch_until
    clock = FakeClock()
    api = FakeApi([_obj("p", "1", phase="Pending")], "1", [], clock=clock)
    with pytest.raises(InfrastructureError) as e:
        watch_until(api, "pod", "pod ns/p", 8, _running, namespace="ns", name="p", clock=clock,
                    explain=lambda objs: [f"events of p: {' | '.join(api.events('ns', 'p'))}"])
    assert str(e.value) == ("pod ns/p: not ready after 8s; last status: Pending; "
                            "events of p: FailedScheduling: 0/1 nodes are available")
    assert [c[0] for c in api.calls] == ["list", "watch"]   # one watch covered the whole wait


def test_watch_until_hopeless_state_ends_at_once_with_events():
    from netslo.providers.kube.wait import wait_pods
    never = {"metadata": {"name": "p", "resourceVersion": "3"}, "status": {"phase": "Pending", "containerStatuses": [
        {"name": "agent", "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "not present"}}}]}}
    api = FakeApi([_obj("p", "2", phase="Pending")], "2", [[("MODIFIED", never)]])
    with pytest.raises(InfrastructureError, match=r"^pod ns/p: cannot become ready: phase=Pending; agent: waiting "
                                                  r"ErrImageNeverPull \(not present\); events of p: FailedScheduling"):
        wait_pods(api, "ns", ["p"], "run=r", 100)


def test_nodes_wait_reports_each_node_not_ready():
    from netslo.providers.kube.wait import wait_nodes_ready
    clock = FakeClock()
    node = {"metadata": {"name": "netslo-worker", "resourceVersion": "1"},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "container runtime network not ready: cni plugin not initialized"}]}}
    api = FakeApi([node], "1", [], clock=clock)
    import netslo.providers.kube.wait as kw
    with pytest.raises(InfrastructureError) as e:
        kw.watch_until(api, "node", "cluster nodes", 2, lambda objs: (False, kw.node_ready(objs["netslo-worker"])[1]),
                       clock=clock)
    assert str(e.value).startswith("cluster nodes: not ready after 2s; last status: Ready=False (KubeletNotReady: "
                                   "container runtime network not ready")
    assert callable(wait_nodes_ready)


def _ready_pod(name, rv, ready):
    return {"metadata": {"name": name, "resourceVersion": rv},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pods_created_together_are_awaited_with_one_watch():
    from netslo.providers.kube.wait import wait_pods
    api = FakeApi([_ready_pod("a", "1", False), _ready_pod("b", "1", True)], "1",
                  [[("MODIFIED", _ready_pod("c", "2", True)), ("MODIFIED", _ready_pod("a", "3", True))]])
    objs = wait_pods(api, "ns", ["a", "b"], "run=r", 60)
    assert [o["metadata"]["name"] for o in objs] == ["a", "b"] and objs[0]["metadata"]["resourceVersion"] == "3"
    assert [c[0] for c in api.calls] == ["list", "watch"]


def test_each_pod_is_told_once_as_soon_as_its_containers_run():
    """``on_running`` (the kube provider opens a pod's warm session there) hears of a pod once, when
    its container runs and before it is Ready; a pod still creating is not told."""
    from netslo.providers.kube.wait import wait_pods

    def pod(name, rv, state, ready=False):
        p = _ready_pod(name, rv, ready)
        p["status"]["containerStatuses"] = [{"name": "agent", "state": {state: {}}}]
        return p
    api = FakeApi([pod("a", "1", "waiting"), pod("b", "1", "running")], "1",
                  [[("MODIFIED", pod("a", "2", "running")), ("MODIFIED", pod("b", "3", "running", ready=True)),
                    ("MODIFIED", pod("a", "4", "running", ready=True))]])
    told = []
    wait_pods(api, "ns", ["a", "b"], "run=r", 60, on_running=told.append)
    assert told == ["b", "a"]


def test_pods_not_ready_in_time_are_named_with_their_status():
    from netslo.providers.kube.wait import wait_pods
    clock = FakeClock()
    api = FakeApi([_ready_pod("a", "1", True), _ready_pod("b", "1", False)], "1", [], clock=clock)
    with pytest.raises(InfrastructureError, match=r"^pods a, b, c in ns: not ready after 5s; last status: pod b: .*; "
                                                  r"pod c: not created; events of b: FailedScheduling"):
        wait_pods(api, "ns", ["a", "b", "c"], "run=r", 5, clock=clock)


def test_a_node_is_not_ready_while_it_carries_a_start_up_taint():
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}]}}
    cp = {**ready, "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}
    cilium = {**ready, "spec": {"taints": cp["spec"]["taints"] + [
        {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}]}}
    assert node_ready(ready)[0] and node_ready(cp)[0]          # the control plane's own taint is no start-up
    ok, why = node_ready(cilium)
    assert not ok and why.endswith("; start-up taint node.cilium.io/agent-not-ready")


def _slice(rv, *ready):
    return {"metadata": {"name": "kube-dns-abc", "resourceVersion": rv},
            "endpoints": [{"addresses": [f"10.0.0.{i}"], "conditions": {"ready": r}} for i, r in enumerate(ready)]}


def test_endpoints_wait_for_one_or_for_every_listed_endpoint():
    """The cluster DNS wait: one ready endpoint ends the plain wait at the list; ``every`` follows the
    slice until the second replica is ready too."""
    from netslo.providers.kube.wait import wait_endpoints
    one_of_two = [_slice("5", True, False)]
    assert wait_endpoints(FakeApi(one_of_two, "5", []), "kube-system", "kube-dns", "dns", 30) == "1 of 2 endpoints ready"
    api = FakeApi(one_of_two, "5", [[("MODIFIED", _slice("6", True, True))]])
    assert wait_endpoints(api, "kube-system", "kube-dns", "dns", 30, every=True) == "2 of 2 endpoints ready"
