"""The icmp probe without CAP_NET_RAW (as in netslo's Kubernetes agent pods: user nobody, no
capability): it falls back to a ping socket when the pod's net.ipv4.ping_group_range holds its group,
and otherwise says which two ways it needs, as a capability it lacks. Real kernel, real pods of the
embedded provider; the probe runs as uid/gid 65534 through setpriv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netslo.providers.netns.cluster import NETNS_DIR, NetnsCluster
from netslo.stats.samples import SampleSet

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

pytestmark = pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")


@pytest.fixture(scope="module")
def pods():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        server, client = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        yield c, server, client


def probe_as_nobody(c, client, server, tos: int = 0):
    argv = ["nsenter", f"--net={NETNS_DIR / c.netns_of(client)}", "setpriv", f"--reuid={NOBODY}",
            f"--regid={NOBODY}", "--clear-groups", sys.executable, "-m", "netslo.agent", "probe", "icmp",
            "--target", f"{server.ip}:7", "--count", "200", "--interval", "2ms", "--tos", f"0x{tos:02x}",
            "--wait", "500ms", "--out", "-"]
    return subprocess.run(argv, capture_output=True, timeout=60, cwd="/",
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def ping_group_range(c, pod, value: str) -> None:
    c.sysctl(c.netns_of(pod), {"net.ipv4.ping_group_range": value})


def test_without_raw_socket_a_ping_socket_measures_every_echo(pods):
    c, server, client = pods
    ping_group_range(c, client, f"{NOBODY} {NOBODY}")
    run = probe_as_nobody(c, client, server, tos=0xb8)
    assert run.returncode == 0, run.stderr.decode()
    s = SampleSet.from_bytes(run.stdout)
    recv, send = s.column("recv_ns"), s.column("send_ns")
    assert (recv >= 0).all(), f"{(recv < 0).sum()} of 200 echoes unanswered"
    rtt = (recv - send) * 1e-9
    assert 0 < rtt.min() and rtt.max() < 0.1
    assert set(s.column("tos_cli")) == {0xb8}          # the reply's TOS, read through IP_RECVTOS
    assert sorted(s.column("arrival")) == list(range(200))


def test_without_either_the_error_names_both_ways_and_the_range(pods):
    c, server, client = pods
    ping_group_range(c, client, "1 0")                 # the kernel's default: nobody may
    run = probe_as_nobody(c, client, server)
    err = run.stderr.decode()
    assert run.returncode != 0
    assert ("icmp probe needs a raw socket (CAP_NET_RAW) or a ping socket (group 65534 within "
            "net.ipv4.ping_group_range, here '1 0')") in err, err
