"""``python -m netslo.agent netns-id``: what a pod tells about its network namespace and veth, which the
kind provider matches against this host's namespaces and interfaces (``KindCluster._pod_netns``).
Checked against the kernel: a namespace and a veth pair made here, the command run inside."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest


@pytest.fixture
def pod_like():
    """(namespace name, host-side veth name): a namespace whose eth0 is a veth peered with this host."""
    name, host = f"nsl-t-{secrets.token_hex(3)}", f"nslv{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", name], check=True)
        yield name, host
    finally:
        subprocess.run(["ip", "link", "del", host], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def _agent_in(ns: str, *args: str) -> subprocess.CompletedProcess:
    """The agent in ``ns`` with a /sys of that namespace, as in a container (ip netns exec mounts one)."""
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "netslo.agent", *args],
                          capture_output=True, text=True, timeout=60)


def test_a_pod_names_its_namespace_and_its_veth_peer_as_the_host_sees_them(pod_like):
    ns, host = pod_like
    run = _agent_in(ns, "netns-id")
    assert run.returncode == 0, run.stderr
    ids = json.loads(run.stdout)
    assert ids["inode"] == os.stat(f"/run/netns/{ns}").st_ino != os.stat("/proc/self/ns/net").st_ino
    with open(f"/sys/class/net/{host}/ifindex") as f:
        assert ids["iflink"] == int(f.read())


def test_a_missing_device_is_an_error_not_a_guess(pod_like):
    ns, _ = pod_like
    run = _agent_in(ns, "netns-id", "eth9")
    assert run.returncode != 0 and "eth9" in run.stderr
