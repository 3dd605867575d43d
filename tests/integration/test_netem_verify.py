"""netem through pyroute2 on a real sch_netem (host kernel or user-mode-linux): what the kernel holds
equals the spec for every option and direction; verification passes what is realized and fails
what is not; a failed verification ends a pytest test as an ERROR, never a pass or an SLO failure."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from netslo.core.errors import InfrastructureError
from netslo.impair import capability, netem, verify
from netslo.impair.spec import PRESETS, parse, preset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env():
    """(cluster, impairer, server, client, ports): host netns if it has netem, else UML."""
    if capability.detect().netem:
        from netslo.providers.netns.cluster import NetnsCluster
        c = NetnsCluster(nodes=2)
        imp = netem.NetemController(c)
    else:
        ok, why = capability.uml_available()
        if not ok:
            pytest.skip(f"no netem on the host and no user-mode-linux: {why}")
        from netslo.providers.netns.uml import UmlCluster
        c = UmlCluster(nodes=2)
        imp = c.impairer
    try:
        server = c.add_pod("server", "node0")
        client = c.add_pod("client", "node1")
        ports = c.start_responders(server, ("udp", "tcp"))
        yield c, imp, server, client, ports
    finally:
        c.close()


def test_host_capability_is_detected_not_assumed():
    caps = capability.detect()
    assert caps.kernel
    if not caps.netem:
        assert "netem" in caps.reasons and caps.reasons["netem"]
        with pytest.raises(Exception, match="lacks netem"):
            caps.require("netem")


def _host_network() -> tuple:
    """What the capability probe could leave behind in this namespace: links and lo's qdiscs."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    qdiscs = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split(":")[1].strip() for line in links.splitlines()), qdiscs


def test_capability_probe_runs_in_a_namespace_of_its_own_and_answers_as_a_fresh_process():
    """detect() tries netem, ifb, ingress redirect and congestion controls in a thread that unshared a
    network namespace: this namespace is as it was, and the findings equal those of the same probe
    run as a fresh process (``python -m netslo.impair.capability``)."""
    before = _host_network()
    capability.detect.cache_clear()
    found = capability.detect().as_dict()
    assert _host_network() == before
    fresh = subprocess.run([sys.executable, "-m", "netslo.impair.capability"], capture_output=True, text=True,
                           cwd=str(ROOT), check=True)
    expected = json.loads(fresh.stdout)
    assert {k: found[k] for k in expected} == expected and found["congestion_controls"]


@pytest.mark.parametrize("doc", [
    {"delay": "10ms", "jitter": "2ms", "distribution": "normal", "delay_correlation": "10%"},
    {"delay": "5ms", "jitter": "1ms", "distribution": "pareto"},
    {"delay": "5ms", "jitter": "1ms", "distribution": "paretonormal", "rate": "20mbit", "limit": 500},
    {"delay": "1ms", "jitter": "1ms", "distribution": "uniform"},
    {"loss": "2%", "loss_correlation": "25%", "duplicate": "1%", "corrupt": "0.1%"},
    {"delay": "10ms", "reorder": "25%", "reorder_correlation": "50%", "gap": 5},
    {"preset": "bursty-loss"},
    {"delay": "3ms", "direction": "ingress"},
    {"delay": "3ms", "direction": "host-egress"},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_kernel_holds_the_spec(env, doc):
    c, imp, server, client, ports = env
    spec = parse(doc)
    try:
        held = imp.apply(client, spec)
        assert held["kind"] == "netem"
        assert netem.mismatches(spec, held) == []
        assert imp.read(client, spec.direction) == held
    finally:
        imp.clear()
    assert imp.read(client, spec.direction) == {}


@pytest.mark.parametrize("direction", ["egress", "ingress", "host-egress"])
def test_every_direction_is_realized_and_verified(env, direction):
    c, imp, server, client, ports = env
    base = verify.measure(c, client, server, ports, count=800)
    spec = parse({"delay": "5ms", "loss": "2%", "direction": direction})
    try:
        imp.apply(client, spec)
        v = verify.verify(c, client, server, ports, [(client, spec)], base, count=800)
    finally:
        imp.clear()
    v.raise_if_not_realized()
    assert any(verify.affected_direction(True, direction) in ch.name for ch in v.checks)


def test_verification_fails_when_nothing_is_applied(env):
    c, imp, server, client, ports = env
    base = verify.measure(c, client, server, ports, count=500)
    v = verify.verify(c, client, server, ports, [(client, preset("fttc-uplink"))], base, count=500)
    assert not v.ok and v.first is not None and not v.first.ok, "both calibrations must miss"
    both = r"impairment not realized: fttc-uplink up one-way delay.*\(first calibration: fttc-uplink up one-way"
    with pytest.raises(InfrastructureError, match=both + r" delay.*measured again\)"):
        v.raise_if_not_realized()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_verified_against_nothing_applied_is_never_verified(env, name):
    """Each preset's verification, as the gate runs it (both directions of the client), on the path with
    nothing applied: "not realized" or "cannot be verified here", and not one check [ok]."""
    c, imp, server, client, ports = env
    base = verify.measure(c, client, server, ports)
    spec = preset(name)
    v = verify.verify(c, client, server, ports, [(client, spec.with_direction(d)) for d in ("egress", "ingress")],
                      base)
    print(v.message())
    assert v.checks and not v.ok
    assert not [ch.line() for ch in v.checks if ch.verified or "[ok]" in ch.line()]
    with pytest.raises(InfrastructureError, match="impairment (not realized|cannot be verified here)"):
        v.raise_if_not_realized()


def test_a_missed_first_calibration_is_measured_again_before_concluding(env, monkeypatch):
    """What a host stall during the calibration does (a burst of replies lost, or delayed), played with
    real samples: the first calibration is a real measurement of the path taken before the impairment
    was applied (so it misses), the second is measured live with it in place. The verdict is the
    second's; the first is kept and named."""
    c, imp, server, client, ports = env
    base = verify.measure(c, client, server, ports, count=800)
    missed = verify.measure(c, client, server, ports, count=800)    # no impairment yet: a real miss
    calls = []
    real_measure = verify.measure

    def measure(*args, **kw):
        calls.append(kw.get("wait"))
        return missed if len(calls) == 1 else real_measure(*args, **kw)

    monkeypatch.setattr(verify, "measure", measure)
    spec = parse({"delay": "5ms", "loss": "2%"})
    try:
        imp.apply(client, spec)
        v = verify.verify(c, client, server, ports, [(client, spec)], base, count=800)
    finally:
        imp.clear()
    assert len(calls) == 2, calls
    assert v.first is not None and not v.first.ok, v.first and v.first.message()
    assert v.ok, v.message()
    assert "measured again" in v.message() and "up one-way delay" in v.message(), v.message()
    off = verify.verify(c, client, server, ports, [(client, spec)], base, samples=missed)
    assert not off.ok and off.first is None, "given samples are judged as they are, never re-measured"


MISMATCH_TEST = '''
import pytest
pytestmark = pytest.mark.needs_netem

@pytest.mark.parametrize("netslo_impaired", [{"spec": {"delay": "5ms"}, "check": {"delay": "15ms"}, "count": 300}],
                         indirect=True)
def test_mismatch(netslo_impaired):
    raise AssertionError("must not run: the impairment was not what the test expects")
'''


def test_not_realized_ends_as_error_not_pass_or_slo_failure():
    """A real pytest run (root conftest plugins) of a test whose impairment is not what it expects."""
    if not (capability.detect().netem or capability.uml_available()[0]):
        pytest.skip("no netem anywhere")
    work = Path(tempfile.mkdtemp(prefix="_tmp_mismatch_", dir=ROOT / "tests" / "integration"))
    try:
        (work / "test_mismatch.py").write_text(MISMATCH_TEST)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              f"--netslo-results={work / 'res'}", str(work / "test_mismatch.py")],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = run.stdout + run.stderr
    assert "1 error" in out and "passed" not in out and "failed" not in out, out[-3000:]
    assert "impairment not realized" in out and "configured 15" in out, out[-3000:]
