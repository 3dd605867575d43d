"""Nagle: the broker's setting is read back from its own sockets (so ``set_tcp_nodelay`` is proven,
not assumed), and the SLO check catches the classic Nagle x delayed-ACK stall of small split writes.

Not asserted: that mosquitto with Nagle on inflates MQTT latency here. On this kernel the
subscriber ACKs as soon as paho reads (it sends no data, so it is never in delayed-ACK interactive
mode) and the effect shows only in tails under load; see docs/protocols.md."""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netslo.core.procs import CHILD_CWD
from netslo.core.resources import IMPORT_ROOT, shipped_slo
from netslo.providers.netns.cluster import NETNS_DIR, NetnsCluster, pids_in_netns
from netslo.slo import spec as slo
from netslo.slo.idle_guard import IdleGuard, guarded
from netslo.slo.scenario import Scenario
from netslo.stats.samples import SampleSet
from netslo.studies.interleave import judge, p50_shift
from netslo.traffic import tcpinfo
from netslo.traffic.probes import ProbeSpec

pytestmark = pytest.mark.skipif(shutil.which("mosquitto") is None and not os.path.exists("/usr/sbin/mosquitto"),
                                reason="needs mosquitto (Debian package mosquitto)")
SLO = slo.load(shipped_slo())
INTERVAL = 0.005
SPLIT_INTERVAL = 0.1  # longer than the delayed-ACK stall, so the closed-loop client keeps its schedule


def _broker(c, pod, nodelay: bool, tmp_path):
    ready = tmp_path / f"ready-{pod.name}"
    argv = ["nsenter", f"--net={NETNS_DIR / c.netns_of(pod)}", sys.executable, "-m", "netslo.agent", "serve", "mqtt",
            "--port", "1883", "--ready-file", str(ready)] + ([] if nodelay else ["--no-nodelay"])
    env = dict(os.environ, PYTHONPATH=str(IMPORT_ROOT))
    proc = subprocess.Popen(argv, env=env, cwd=CHILD_CWD, start_new_session=True)
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "broker did not start"
        time.sleep(0.02)
    return proc


def _mosquitto(c, pod):
    pids = [p for p in pids_in_netns(c.netns_of(pod)) if Path(f"/proc/{p}/comm").read_text().strip() == "mosquitto"]
    assert len(pids) == 1, pids
    return pids[0]


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("brokers")
    with NetnsCluster(nodes=2) as c:
        good, nagle = c.add_pod("broker-nodelay", "node0"), c.add_pod("broker-nagle", "node0")
        client = c.add_pod("client", "node1")
        procs = [_broker(c, good, True, tmp), _broker(c, nagle, False, tmp)]
        try:
            yield c, good, nagle, client
        finally:
            for p in procs:
                p.terminate()
                p.wait(5)


def _sockets_while_probing(c, client, pod):
    pid, seen = _mosquitto(c, pod), {}
    spec = ProbeSpec("mqtt-qos0", pod.ip, 1883, count=200, interval=INTERVAL)
    t = threading.Thread(target=c.probe, args=(client, spec), daemon=True)
    t.start()
    while t.is_alive() and len(seen) < 2:
        seen = {k: v for k, v in tcpinfo.nodelay_of_process(pid).items() if k[0][1] == 1883}
        t.join(0.05)
    t.join(30)
    return seen


def test_broker_sockets_show_the_configured_nagle_setting(two_brokers):
    c, good, nagle, client = two_brokers
    on, off = _sockets_while_probing(c, client, good), _sockets_while_probing(c, client, nagle)
    assert len(on) >= 2 and all(on.values()), on
    assert len(off) >= 2 and not any(off.values()), off


def _split_writes(c, client, server, port, nodelay: bool, count=25, interval=SPLIT_INTERVAL):
    """One run of the split-write client; under the runner's ``IdleGuard`` (sends 100 ms apart leave
    the vCPUs idle long enough to wake milliseconds late on a loaded VM, as in a CI run of 2026-12-03:
    P50 5.1 ms with TCP_NODELAY, sender timer error P99 4.8 ms)."""
    assert guarded(interval), interval
    with IdleGuard():
        out = c.exec_in(client, [sys.executable, "-m", "tests.integration.splitwrite_client", server.ip, str(port),
                                 str(count), str(interval), "100", "1" if nodelay else "0"], timeout=60)
    s = SampleSet.from_bytes(out)
    s.meta["shared_clock"] = True
    return s


def test_nagle_with_small_split_writes_behind_a_delayed_ack_peer_breaks_the_slo(two_brokers):
    """Nagle on + a request written as header then body + a peer that delays its ACK: every request
    stalls for the delayed-ACK timer; the shipped tcp-persistent SLO (P50 <= 2 ms) catches it, and
    the same client with TCP_NODELAY meets it. Measured in alternating rounds."""
    c, good, _nagle, client = two_brokers
    port = c.start_responders(good, ("tcp",))["tcp"]
    runs = {"nodelay": [], "nagle": []}
    for _ in range(2):
        for name in runs:
            runs[name].append(_split_writes(c, client, good, port, nodelay=name == "nodelay"))
    runs = {k: SampleSet.concat(v) for k, v in runs.items()}
    scenario = Scenario("cross-node", "tcp-rr", "64b", interval=SPLIT_INTERVAL)

    def again():   # TCP_NODELAY measured afresh when its run failed over a host stall (runner.settle_stalls)
        return SampleSet.concat([_split_writes(c, client, good, port, nodelay=True) for _ in range(2)])
    verdict = {"nodelay": judge(c, scenario, runs["nodelay"], SLO, SPLIT_INTERVAL, remeasure=again),
               "nagle": judge(c, scenario, runs["nagle"], SLO, SPLIT_INTERVAL)}
    shift = p50_shift(runs["nodelay"], runs["nagle"])
    assert shift.lo > 0, shift
    print(f"split writes: P50 nodelay {verdict['nodelay'].analysis.metrics['rtt.p50'].value * 1e3:.2f} ms, "
          f"Nagle {verdict['nagle'].analysis.metrics['rtt.p50'].value * 1e3:.2f} ms")
    assert not verdict["nodelay"].failed, verdict["nodelay"].message()
    assert "rtt.p50" in {ch.threshold.metric for ch in verdict["nagle"].failed}, verdict["nagle"].message()
