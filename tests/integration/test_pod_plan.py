"""Pods at once: a session fixture that declares its pods (``plan_pods``) gets them from the gate's one
``add_pods`` batch when a selected test uses it, and only then (a real pytest session, embedded provider)."""

from __future__ import annotations

import subprocess
import sys

TESTS = '''
import pytest
from netslo.gate.plugin.cluster import PLANNED, plan_pods, planned_pod

pytestmark = pytest.mark.cni
BW = "kubernetes.io/egress-bandwidth"


@pytest.fixture(scope="session")
def extra_pod(netslo_cluster, netslo_gate_pods):
    return planned_pod(netslo_gate_pods, netslo_cluster, "extra", netslo_cluster.nodes[1])


@pytest.fixture(scope="session")
def shaped_pod(netslo_cluster, netslo_gate_pods):
    return netslo_gate_pods["shaped"]


plan_pods("extra_pod", ("extra", 1))
plan_pods("unused_pod", ("unused", 0))
# annotations known only once the session has its config (a file it reads): a function of the config
plan_pods("shaped_pod", lambda config: [("shaped", 0, {BW: config.getoption("--netslo-nodes") + "M"})])


def test_planned(request, netslo_gate_pods, extra_pod):
    assert request.config.stash[PLANNED] == [("extra", 1), ("shaped", 0, {BW: "2M"})]
    assert netslo_gate_pods["extra"] is extra_pod and extra_pod.node == "node1"
    assert "unused" not in netslo_gate_pods


def test_planned_with_annotations(shaped_pod):
    assert shaped_pod.node == "node0" and shaped_pod.annotations == {BW: "2M"}


def test_not_selected(extra_pod):
    pass
'''


def _run(tmp_path, name: str, text: str) -> subprocess.CompletedProcess:
    (tmp_path / name).write_text(text)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", name, "-m", "cni",
                           "--netslo-nodes", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_planned_pods_come_with_the_gate_pods(tmp_path):
    run = _run(tmp_path, "test_plan.py", TESTS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout


def test_a_fixture_no_selected_test_uses_plans_nothing(tmp_path):
    run = _run(tmp_path, "test_unused.py", (
        "import pytest\nfrom netslo.gate.plugin.cluster import PLANNED, plan_pods\npytestmark = pytest.mark.cni\n"
        "plan_pods('other_pod', ('other', 0))\n"
        "def test_plan(request, netslo_gate_pods):\n"
        "    assert request.config.stash[PLANNED] == [] and sorted(netslo_gate_pods) == "
        "['client-cross', 'client-same', 'server']\n"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]



def test_clients_and_senders_are_asked_for_without_responders(tmp_path):
    """Nothing is ever sent to the gate's clients, the QoS latency and bulk clients and the bandwidth
    tests' senders: they are asked for with no responders (on Kubernetes: an idle container, no
    interpreter, no startup probe); the server and the pods that receive keep theirs."""
    run = _run(tmp_path, "test_resp.py", (
        "import pytest\npytestmark = pytest.mark.cni\nASKED = []\n"
        "@pytest.fixture(scope='session')\ndef netslo_cluster(netslo_cluster):\n"
        "    real = netslo_cluster.add_pods\n"
        "    netslo_cluster.add_pods = lambda reqs: (ASKED.extend(reqs), real(reqs))[1]\n"
        "    return netslo_cluster\n"
        "def test_asked(netslo_gate_pods, netslo_bandwidth_pods):\n"
        "    got = {r['name']: r.get('responders') for r in ASKED}\n"
        "    assert got == {'server': None, 'client-same': (), 'client-cross': (), 'qos-lat': (), 'qos-bulk': (),\n"
        "                   'qos-bw-eg-same': (), 'qos-bw-eg-cros': (), 'qos-bw-in-same': ('tcp',),\n"
        "                   'qos-bw-in-cros': ('tcp',), 'qos-bw-src-same': (), 'qos-bw-wrong': ()}, got\n"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def test_the_node_agents_start_with_the_pods_only_when_a_selected_test_needs_them(tmp_path):
    (tmp_path / "test_needs.py").write_text(
        "import pytest\nfrom netslo.gate.plugin.cluster import NODE_AGENTS\npytestmark = pytest.mark.cni\n"
        "@pytest.fixture(scope='session')\ndef netslo_bandwidth_pods():\n    return None\n"
        "def test_needs(request, netslo_bandwidth_pods):\n    assert request.config.stash[NODE_AGENTS] is True\n"
        "def test_other(request):\n    assert request.config.stash[NODE_AGENTS] is False\n")
    for selected in ("test_needs", "test_other"):
        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                              f"test_needs.py::{selected}", "-m", "cni"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:]


WITH_PODS_TESTS = '''
import pytest
from netslo.core.errors import InfrastructureError
from netslo.gate.plugin.cluster import made_with_pods, make_with_pods

pytestmark = pytest.mark.cni
CALLS = []


def _make(cluster, pods):
    CALLS.append(sorted(pods))
    return ("made", pods["server"].name)


def _fails(cluster, pods):
    raise InfrastructureError("no Services here")


make_with_pods("early", _make)
make_with_pods("broken", _fails)
make_with_pods("unused", _make)


@pytest.fixture(scope="session")
def early(request, netslo_gate_pods):
    return made_with_pods(request.config, "early")


@pytest.fixture(scope="session")
def broken(request, netslo_gate_pods):
    return made_with_pods(request.config, "broken")


def test_made_right_after_the_pods(netslo_gate_pods, early):
    assert early == ("made", "server")
    assert CALLS == [["client-cross", "client-same", "server"]]    # once, and not for "unused"


def test_an_error_is_raised_where_the_object_is_taken(broken):
    pass


def test_the_gate_pods_are_unaffected(netslo_gate_pods):
    assert "server" in netslo_gate_pods
'''


def test_objects_made_with_the_pods(tmp_path):
    """``make_with_pods``: made once, right after the gate's pods, only for fixtures a selected test
    uses; a failure errors the tests that take the object, not every test that takes the pods."""
    run = _run(tmp_path, "test_with_pods.py", WITH_PODS_TESTS)
    assert "2 passed, 1 error" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    assert "ERROR test_with_pods.py::test_an_error_is_raised_where_the_object_is_taken" in run.stdout
    assert "no Services here" in run.stdout
