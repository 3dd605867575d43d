"""scripts/kind-offline.sh leaves the host's network configuration exactly as it found it.

dockerd 20.10 left to itself sets the iptables FORWARD policy to DROP, adds its chains and NAT rules and
turns on net.ipv4.ip_forward; the offline engine runs with --iptables=false --ip-forward=false
--ip-masq=false --bridge=none. This test snapshots the host's iptables/ip6tables/nft rulesets, the
FORWARD policy, ip_forward and the bridge-nf sysctls before the engine starts, starts a container on kind's network
(what a kind node does), and compares after ``down``; it also checks that ``down`` leaves no engine
process, mount, cgroup or bridge behind. Needs root; it starts only the engine (``scripts/kind-offline.sh
engine``: Debian's engine packages, fetched once into /var/cache/netslo/kind-offline) and builds nothing,
so a cold cache costs seconds, not the toolchain's build. The container check runs when a node image is
already built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "kind-offline.sh"
CACHE = Path(os.environ.get("NETSLO_KIND_CACHE", "/var/cache/netslo/kind-offline"))
STATE = Path(os.environ.get("NETSLO_KIND_STATE", "/run/netslo-kind"))
SYSCTLS = ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/forwarding",
           "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
           "net/bridge/bridge-nf-call-arptables")


def _cannot_run() -> str | None:
    if os.geteuid() != 0:
        return "needs root (docker engine, mounts, cgroups)"
    if (STATE / "dockerd.pid").exists():
        return "the kind-offline engine is running (in use): this test would stop it"
    return None


pytestmark = pytest.mark.skipif(_cannot_run() is not None, reason=_cannot_run() or "")


def _run(*argv: str, check: bool = True) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if check and proc.returncode:
        raise AssertionError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def host_network_state() -> dict[str, str]:
    """Everything of the host's packet filter and forwarding that a docker engine could change."""
    state = {}
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool):   # comments carry timestamps, brackets carry counters
            state[tool] = "\n".join(line.split(" [")[0] for line in _run(tool).splitlines()
                                    if not line.startswith("#"))
    if shutil.which("nft"):
        state["nft"] = _run("nft", "list", "ruleset")
    state["FORWARD"] = _run("iptables", "-S", "FORWARD").splitlines()[0]
    for s in SYSCTLS:
        p = Path("/proc/sys") / s
        if p.exists():
            state[s] = p.read_text().strip()
    return state


def _engine_leftovers() -> list[str]:
    left = []
    root = str(CACHE / "engine" / "root")
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "exe").startswith(root):
                    left.append(f"process {p.name} ({os.readlink(p / 'exe')})")
            except OSError:
                pass
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mnt = line.split()[4]
        if mnt.startswith((str(STATE), str(CACHE / "docker"))):
            left.append(f"mount {mnt}")
    left += [f"cgroup {c}" for c in Path("/sys/fs/cgroup").glob("*/netslo-kind")]
    if Path("/sys/class/net/nslo-kind0").exists():
        left.append("bridge nslo-kind0")
    return left


def _host_cgroup_version() -> int:
    """2 when /sys/fs/cgroup is the unified hierarchy (cgroup2), else 1 (legacy or hybrid)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mnt, fstype = line.split()[:3]
        if mnt == "/sys/fs/cgroup":
            return 2 if fstype == "cgroup2" else 1
    return 1


def test_up_and_down_leave_the_host_firewall_forwarding_and_sysctls_as_they_were(monkeypatch):
    from netslo.providers.kind.host import engine_cgroup_version
    before = host_network_state()
    try:
        _run("bash", str(SCRIPT), "engine")
        env = dict(os.environ, DOCKER_HOST=f"unix://{STATE / 'docker.sock'}")
        docker = str(CACHE / "bin" / "docker")   # the engine's own client, linked by engine
        image = subprocess.run([docker, "images", "-q", "localhost/netslo-kind-node"], env=env,
                               capture_output=True, text=True).stdout.split()
        if image:   # a container on kind's network, privileged like a kind node
            subprocess.run([docker, "run", "-d", "--privileged", "--network", "kind", "--name",
                            "netslo-hostcheck", "--entrypoint", "sleep", image[0], "300"],
                           env=env, check=True, capture_output=True)
        during = host_network_state()
        # what the kind and minikube providers ask before they tell kubelet failCgroupV1: false
        monkeypatch.setenv("DOCKER_HOST", env["DOCKER_HOST"])
        assert engine_cgroup_version(docker) == _host_cgroup_version()
    finally:
        _run("bash", str(SCRIPT), "down")
    after = host_network_state()
    assert during == before, "the engine changed the host while running"
    assert after == before
    assert before["net/ipv4/ip_forward"] == after["net/ipv4/ip_forward"]
    assert _engine_leftovers() == []
