"""``python -m netslo.agent netem exec --pod-ip IP -- COMMAND``: the node agent runs COMMAND as its root
in the network namespace that holds IP (what ``exec_in`` does on ``existing`` clusters), here against
the embedded provider's pod namespaces (they live in /run/netns too). A sysctl written there is the
pod's and not the host's; COMMAND's exit code and stderr come back; a missing program is one error."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from netslo.providers.netns.cluster import NetnsCluster

KEY = "net.ipv4.tcp_slow_start_after_idle"


def agent_exec(ip: str, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netslo.agent", "netem", "exec", "--pod-ip", ip,
                           "--netns-dir", "/run/netns", "--", *command], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def pod():
    with NetnsCluster(nodes=1) as c:
        yield c.add_pod("client", c.nodes[0])


def test_a_sysctl_written_through_the_agent_is_the_pods_alone(pod):
    host = Path("/proc/sys", *KEY.split(".")).read_text().strip()
    flipped = "0" if host == "1" else "1"
    p = agent_exec(pod.ip, "sysctl", "-q", "-w", f"{KEY}={flipped}")
    assert p.returncode == 0, p.stderr
    assert agent_exec(pod.ip, "sysctl", "-n", KEY).stdout.strip() == flipped
    assert Path("/proc/sys", *KEY.split(".")).read_text().strip() == host       # the host's is untouched
    assert agent_exec(pod.ip, "ip", "-o", "addr", "show", "eth0").stdout.count(pod.ip) == 1


def test_the_commands_exit_code_and_stderr_come_back(pod):
    p = agent_exec(pod.ip, "sh", "-c", "echo oops >&2; exit 7")
    assert p.returncode == 7 and p.stderr.strip() == "oops"


def test_a_missing_program_or_address_is_one_error_line(pod):
    p = agent_exec(pod.ip, "no-such-program")
    err = json.loads(p.stderr.strip().splitlines()[-1])
    assert p.returncode == 1 and err["error"] == "infrastructure" and "'no-such-program'" in err["message"]
    p = agent_exec("198.18.255.254", "true")
    assert p.returncode == 1 and "198.18.255.254" in json.loads(p.stderr.strip().splitlines()[-1])["message"]
    p = agent_exec(pod.ip)
    assert p.returncode == 2 and json.loads(p.stderr.strip().splitlines()[-1])["error"] == "usage"
