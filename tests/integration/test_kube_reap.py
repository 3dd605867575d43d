"""Reaping on a real cluster (kube_target: kind, by scripts/ci-kind.sh): a run killed with SIGKILL leaves
its namespace and impairment DaemonSet behind; ``python -m netslo reap --kubeconfig`` or the next run's
start-up removes them. A live run and a young run of another host are left alone. Skips with the
reason when no cluster answers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from netslo.providers.kube import manifests as km
from netslo.providers.kube import reap as kube_reap
from netslo.providers.kube.api import KubeApi
from netslo.providers.kube.drain import uncordon
from netslo.providers.kube.wait import wait_deleted

from . import kube_target
from .test_kube_existing import leftovers, provider

pytestmark = pytest.mark.skipif(kube_target.why_not_up() is not None,
                                reason=str(kube_target.why_not_up()))

# A run that gets as far as the impairment DaemonSet, says so, and waits to be killed.
RUN = textwrap.dedent("""
    import sys, time
    from netslo.providers.existing import ExistingProvider
    from netslo.providers.kube.impair import KubeImpairer
    c = ExistingProvider(kubeconfig=sys.argv[1], pull_policy="Never").up()
    KubeImpairer(c).ensure()
    print(c.run_id, flush=True)
    time.sleep(600)
""")


@pytest.fixture
def killed_run():
    """(run id, api) of a run that was SIGKILLed after creating its namespace and DaemonSet."""
    proc = subprocess.Popen([sys.executable, "-c", RUN, kube_target.kubeconfig()], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        run_id = proc.stdout.readline().strip()
        assert run_id, f"the run did not start: {proc.stderr.read()[-2000:] if proc.poll() is not None else ''}"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    api = KubeApi(kube_target.kubeconfig())   # not a run: a run's start-up would reap it already
    left = leftovers(api, run_id)
    assert f"namespace/{km.namespace_name(run_id)}" in left and f"daemonsets/{km.IMPAIR_NAME}" in left, left
    yield run_id, api
    if leftovers(api, run_id):   # a failed test must not leave it behind
        api.delete("namespace", km.namespace_name(run_id))
        wait_deleted(api, "namespace", km.namespace_name(run_id), None, 120.0)


def _reap_cli(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "netslo", "reap", "--kubeconfig", kube_target.kubeconfig(), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_reap_command_removes_the_namespace_and_daemonset_of_a_killed_run(killed_run):
    run_id, api = killed_run
    ns = km.namespace_name(run_id)
    dry = _reap_cli("--dry-run")
    print(dry.stdout)
    assert dry.returncode == 0, dry.stderr
    assert f"would delete namespace {ns}" in dry.stdout and f"DaemonSet {km.IMPAIR_NAME}" in dry.stdout, dry.stdout
    assert "is gone" in dry.stdout, dry.stdout   # the owner record named the dead pid
    assert leftovers(api, run_id), "--dry-run must not delete"
    real = _reap_cli()
    print(real.stdout)
    assert real.returncode == 0, real.stderr
    assert f"deleted namespace {ns}" in real.stdout and f"DaemonSet {km.IMPAIR_NAME}" in real.stdout, real.stdout
    assert leftovers(api, run_id) == []
    assert "nothing to remove" in _reap_cli().stdout


def test_next_run_reaps_the_killed_run_at_start_up(killed_run):
    run_id, api = killed_run
    ns = km.namespace_name(run_id)
    c = provider().up()
    try:
        said = [ln for ln in c.reaped if ns in ln]
        assert said and f"DaemonSet {km.IMPAIR_NAME}" in said[0], said
        print(said[0])
        wait_deleted(api, "namespace", ns, None, 120)
        assert leftovers(api, run_id) == []
        assert leftovers(api, c.run_id), "the new run's own namespace stays"
    finally:
        c.close()


def test_a_live_run_and_a_young_run_of_another_host_are_not_reaped():
    c = provider().up()
    other = km.namespace_manifest("0ther0host0run", annotations={
        **kube_reap.owner_annotations(), "netslo.io/owner-host": "some-other-host"})
    c.api.create(other)
    try:
        dry = _reap_cli("--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert c.namespace not in dry.stdout and other["metadata"]["name"] not in dry.stdout, dry.stdout
        old = _reap_cli("--dry-run", "--max-age", "0s")   # another host's run counts as gone once old
        assert f"would delete namespace {other['metadata']['name']}" in old.stdout, old.stdout
        assert "owner on host some-other-host" in old.stdout and c.namespace not in old.stdout, old.stdout
    finally:
        c.api.delete("namespace", other["metadata"]["name"])
        wait_deleted(c.api, "namespace", other["metadata"]["name"], None, 120.0)
        c.close()


# A run that drains its first node of a Service backend (the node left cordoned), says so, and waits.
DRAIN = textwrap.dedent("""
    import sys, time
    from netslo.providers.existing import ExistingProvider
    from netslo.providers.kube.drain import Drain
    c = ExistingProvider(kubeconfig=sys.argv[1], pull_policy="Never").up()
    d = Drain(c, c.nodes[0])
    marks = d.move()
    print(c.run_id, marks["from_node"], marks["to_node"], flush=True)
    time.sleep(600)
""")


def _cordon_of(api, node: str) -> tuple:
    obj = api.get("node", node)
    return bool(obj["spec"].get("unschedulable")), (obj["metadata"].get("annotations") or {}).get(
        "netslo.io/cordoned-by")


def test_a_node_a_killed_run_left_cordoned_for_a_drain_is_uncordoned_by_the_reaper():
    """kill -9 of a run between a drain and its restore leaves the node cordoned (the next runs could
    not schedule there); ``netslo reap`` uncordons it once the run's namespace is gone with it."""
    api = KubeApi(kube_target.kubeconfig())
    if len(api.get("nodes")) < 2:
        pytest.skip("a drain needs two nodes")
    proc = subprocess.Popen([sys.executable, "-c", DRAIN, kube_target.kubeconfig()], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 3, f"the run did not drain: {proc.stderr.read()[-2000:] if proc.poll() is not None else ''}"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    run_id, node, to = line
    try:
        assert node != to and _cordon_of(api, node) == (True, run_id)
        real = _reap_cli()
        print(real.stdout)
        assert real.returncode == 0, real.stderr
        assert f"uncordoned node {node}" in real.stdout and run_id in real.stdout, real.stdout
        assert _cordon_of(api, node) == (False, None)
        again = _reap_cli("--dry-run").stdout
        assert "uncordon" not in again, again
    finally:
        if _cordon_of(api, node)[1] == run_id:   # a failed test must not leave the node cordoned
            uncordon(api, node)
        api.delete("namespace", km.namespace_name(run_id))
