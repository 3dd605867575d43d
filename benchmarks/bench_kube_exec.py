"""Exec transport on a real cluster: ``kubectl exec`` vs the kubernetes client's exec stream (numbers
printed, nothing asserted on time; every output is checked byte for byte).

Same pod, same commands, N runs each: an empty command (``true``: the per-exec cost every probe,
netem call and responder start pays), a real probe's npz on stdout (2000 UDP samples, what every SLO
test returns), 16 MB of random bytes on stdout, and 200 kB on stdin with end of file. Wall time
median / P90 and CPU per exec of this process plus its children (kubectl is a child).
Run: ``python -m pytest benchmarks/bench_kube_exec.py -s`` with a cluster ($NETSLO_KUBECONFIG, else the
kind cluster scripts/ci-kind.sh keeps); $NETSLO_KUBECTL or the Kubernetes build's kubectl.
"""

import hashlib
import os
import resource
import statistics
import subprocess
import time

import pytest

from netslo.providers.existing import ExistingProvider
from tests.integration import kube_target

pytestmark = pytest.mark.skipif(kube_target.why_not_up() is not None or not kube_target.kubectl(),
                                reason=str(kube_target.why_not_up() or "no kubectl binary to compare with"))


@pytest.fixture(scope="module")
def cluster():
    c = ExistingProvider(kubeconfig=kube_target.kubeconfig(), pull_policy="Never").up()
    yield c
    c.close()


def _cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def test_kubectl_exec_vs_exec_stream(cluster):
    c = cluster
    server = c.add_pod("server", c.nodes[0])
    port = c.start_responders(server, ("udp",))["udp"]
    c.add_pod("client", c.nodes[0], responders=())
    kubectl = kube_target.kubectl()

    def via_kubectl(cmd, inp=None):
        argv = [kubectl, "--kubeconfig", kube_target.kubeconfig(), "exec", *(["-i"] if inp is not None else []),
                "-n", c.namespace, "client", "-c", "agent", "--", *cmd]
        p = subprocess.run(argv, input=inp, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stdout

    def via_stream(cmd, inp=None):
        return c.api.exec(c.namespace, "client", "agent", cmd, timeout=120, input=inp)

    want = via_stream(["sh", "-c", "head -c 16000000 /dev/urandom >/tmp/blob; sha256sum </tmp/blob"]).split()[0]
    stdin = os.urandom(200_000)
    probe = ["python", "-m", "netslo.agent", "probe", "udp", "--target", f"{server.ip}:{port}", "--count", "2000",
             "--interval", "500us", "--out", "-"]
    cases = [
        ("true", ["true"], None, 20, lambda out: out == b""),
        ("probe npz (2000 UDP samples)", probe, None, 5, lambda out: out[:2] == b"PK"),
        ("16 MB binary stdout", ["cat", "/tmp/blob"], None, 5, lambda out: hashlib.sha256(out).hexdigest().encode() == want),
        ("200 kB stdin + EOF", ["sh", "-c", "sha256sum | cut -d' ' -f1"], stdin, 10,
         lambda out: out.strip() == hashlib.sha256(stdin).hexdigest().encode()),
    ]
    print()
    print(f"{'command':30s} {'transport':13s} {'n':>3s} {'wall p50':>9s} {'wall p90':>9s} {'CPU/exec':>9s} {'bytes out':>10s}")
    for name, cmd, inp, n, ok in cases:
        for transport, run in (("kubectl exec", via_kubectl), ("exec stream", via_stream)):
            walls, size, cpu0 = [], 0, _cpu()
            for _ in range(n):
                t0 = time.monotonic()
                out = run(cmd, inp)
                walls.append(time.monotonic() - t0)
                assert ok(out), f"{name} via {transport}: output differs"
                size = len(out)
            cpu = (_cpu() - cpu0) / n
            walls.sort()
            print(f"{name:30s} {transport:13s} {n:3d} {statistics.median(walls) * 1e3:7.0f}ms "
                  f"{walls[max(0, int(0.9 * n) - 1)] * 1e3:7.0f}ms {cpu * 1e3:7.0f}ms {size:10d}")
