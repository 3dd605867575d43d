"""netslo.core.netns_access against the kernel: what it opens, reads and writes happens in the namespace it
names, checked with ip(8) and sysctl(8) run there; the caller's own namespace never changes."""

from __future__ import annotations

import os
import secrets
import subprocess

import pytest

from netslo.core import netns_access


def _sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def ns():
    name = f"nsl-t-{secrets.token_hex(3)}"
    _sh("ip", "netns", "add", name)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def _own() -> str:
    return os.readlink("/proc/thread-self/ns/net")


def test_rtnl_changes_links_in_the_named_namespace_only(ns):
    before = _own()
    with netns_access.rtnl(ns) as ipr:
        ipr.link("add", ifname="nsla0", kind="veth", peer="nsla1")
        names = {link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
    assert {"lo", "nsla0", "nsla1"} <= names
    assert "nsla0" in _sh("ip", "-n", ns, "-o", "link", "show")
    assert "nsla0" not in _sh("ip", "-o", "link", "show")
    assert _own() == before


def test_rtnl_on_a_missing_namespace_raises_and_creates_nothing():
    name = f"nsl-t-gone-{secrets.token_hex(3)}"
    with pytest.raises(FileNotFoundError):
        netns_access.rtnl(name)
    assert name not in _sh("ip", "netns", "list")


def test_sysctl_reads_the_namespace_value(ns):
    _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0")
    assert netns_access.sysctl(ns, "net.ipv4.tcp_slow_start_after_idle") == "0"
    host = _sh("sysctl", "-n", "net.ipv4.tcp_slow_start_after_idle")
    assert netns_access.sysctl("/proc/self/ns/net", "net.ipv4.tcp_slow_start_after_idle") == host
    # a multi-value sysctl prints as sysctl -n prints it (single spaces)
    assert netns_access.sysctl(ns, "net.ipv4.ip_local_port_range") == \
        _sh("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.ip_local_port_range").replace("\t", " ")


def test_write_sysctls_writes_there_and_names_a_refused_key(ns):
    host = _sh("sysctl", "-n", "net.ipv4.ip_forward")
    netns_access.write_sysctls(ns, {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "0"})
    assert _sh("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.ip_forward") == "1"
    assert _sh("sysctl", "-n", "net.ipv4.ip_forward") == host
    with pytest.raises(OSError, match="net.ipv4.no_such_key=1"):
        netns_access.write_sysctls(ns, {"net.ipv4.no_such_key": "1"})


def test_run_in_returns_the_result_and_raises_the_error(ns):
    inode = netns_access.run_in(ns, lambda: os.readlink("/proc/thread-self/ns/net"))
    assert inode == f"net:[{os.stat(netns_access.path_of(ns)).st_ino}]" != _own()
    with pytest.raises(ZeroDivisionError):
        netns_access.run_in(ns, lambda: 1 / 0)
