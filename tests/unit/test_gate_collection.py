"""``pytest -m cni`` skips importing tests/unit and tests/integration (root conftest.py): that is right
only while none of their tests is a gate test. The gate itself is the package ``netslo.gate``."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collect(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode in (0, 5), p.stdout + p.stderr     # 5: nothing selected
    return p.stdout


def test_no_own_test_carries_the_gate_mark():
    out = _collect("-m", "cni", "tests/unit", "tests/integration")      # named paths: nothing is skipped
    assert "no tests collected" in out and "::" not in out, out


def test_the_gate_collects_the_same_tests_without_importing_the_own_ones():
    gate = [line for line in _collect("-m", "cni").splitlines() if "::" in line]
    named = [line for line in _collect("-m", "cni", "netslo/gate", "tests").splitlines() if "::" in line]
    assert gate and gate == named
    assert all(line.startswith("netslo/gate/") for line in gate)


def test_the_gate_is_the_importable_package_netslo_gate():
    """``pytest --pyargs netslo.gate`` (how a user's repository runs it) collects the same tests."""
    gate = [line.split("::", 1)[1] for line in _collect("-m", "cni").splitlines() if "::" in line]
    pyargs = [line.split("::", 1)[1] for line in _collect("-m", "cni", "--pyargs", "netslo.gate").splitlines()
              if "::" in line]
    assert gate and gate == pyargs


def test_ipv6_scenarios_are_collected_only_when_the_run_asks_for_ipv6():
    """netns defaults to dual (IPv6 rows collected); ``--netslo-ip-family ipv4`` deselects them, and a
    bad family stops the run at start-up with one line."""
    from netslo.gate.test_latency import SCENARIOS
    path = "netslo/gate/test_latency.py"
    v4 = [line.split("[")[1][:-1] for line in _collect("-m", "cni", "--netslo-ip-family", "ipv4", path).splitlines()
          if "::" in line]
    assert sorted(v4) == sorted(s.id for s in SCENARIOS if s.family == "ipv4")
    assert len([s for s in SCENARIOS if s.family == "ipv6"]) == 3      # what the default (dual) run adds
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "cni",
                        "--netslo-ip-family", "ip6", path], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 4 and "netslo: --netslo-ip-family: value 'ip6' — expected one of ipv4, ipv6, dual" in p.stderr
