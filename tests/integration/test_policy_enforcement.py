"""Change studies on the embedded provider: emulated policies and Services are measured, a change that
does nothing is reported as not in effect (a failed check, never a pass), and nothing is left behind."""

import subprocess

import numpy as np
import pytest

from netslo.core.errors import InfrastructureError
from netslo.providers.netns.cluster import NetnsCluster
from netslo.providers.policy import Policies
from netslo.slo import spec as slo
from netslo.studies import enforcement as en
from netslo.studies import policy_cost

TRIALS, WINDOW = 6, 0.1   # windows well above the ~3-6 ms the emulation takes: margin for a loaded host
SVC_WINDOW = 0.15   # the emulated Service takes ~20 ms (iptables and a conntrack flush on every node): margin for load
P50 = slo.Threshold("policy_enforce.p50", 0.03, "30ms", "t")


@pytest.fixture(scope="module")
def cluster():
    with NetnsCluster(nodes=2) as c:
        server, client = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        port = c.start_responders(server, ("tcp",))["tcp"]
        yield c, server, client, port


def _rules(c, pod, table="filter", ns=None):
    out = subprocess.run(["nsenter", f"--net=/run/netns/{ns or c.netns_of(pod)}", "iptables-save", "-t", table],
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "NETSLO" in line or "netslo:" in line]


def _policy_steps(pol, client, server, port):
    return [en.Step("policy_enforce", en.STOP, lambda: pol.deny(client, server, port)),
            en.Step("policy_allow", en.RESUME, lambda: pol.allow(client, server, port))]


def test_emulated_policy_is_measured_and_removed(cluster):
    """With no lead-in the probe starts after the first change: the study sees it and runs again."""
    c, server, client, port = cluster
    with c.policies() as pol:
        trials = en.run(c, client, server.ip, port, _policy_steps(pol, client, server, port), TRIALS, WINDOW,
                        lead_in=0.001)
        assert _rules(c, server)
    assert not _rules(c, server)
    for series in ("policy_enforce", "policy_allow"):
        v = trials.values[series]
        assert len(v) == TRIALS and np.isfinite(v).all() and (v >= 0).all() and (v < WINDOW).all(), (series, v)
    assert [ch.verdict for ch in trials.judge([P50], 0.95)] == [slo.PASS]


def test_a_study_probe_gives_up_on_dropped_syns_and_leaves_no_time_wait(cluster):
    """tcp-crr with give_up: a request whose SYN is dropped is lost after give_up (not answered by the
    SYN the kernel would resend 1 s later), and connections end with RST (no TIME_WAIT at the client)."""
    from netslo.traffic.probes import ProbeSpec
    c, server, client, port = cluster
    spec = ProbeSpec("tcp-crr", server.ip, port, count=200, interval=0.002, req_bytes=64, resp_bytes=64,
                     wait=0.3, give_up=0.1)
    with c.policies() as pol:
        pol.deny(client, server, port)
        denied = c.probe(client, spec)
        pol.allow(client, server, port)
        admitted = c.probe(client, spec)
    assert (denied.rows["recv_ns"] < 0).all() and denied.meta["give_up"] == pytest.approx(0.1)
    assert (admitted.rows["recv_ns"] >= 0).all()
    ss = subprocess.run(["nsenter", f"--net=/run/netns/{c.netns_of(client)}", "ss", "-Htan", "state", "time-wait"],
                        capture_output=True, text=True, check=True).stdout
    assert ss.strip() == "", ss


def test_a_stateful_policy_is_measured_on_new_flows(cluster, monkeypatch):
    """A CNI that accepts ESTABLISHED traffic before any policy (Calico) still shows its deny: every
    request is a new connection. A probe on one long flow would see nothing: shown with tcp-rr."""
    from netslo.providers.netns import policy as netns_policy
    stateless = netns_policy.chain_rules
    monkeypatch.setattr(netns_policy, "chain_rules", lambda p: ["-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"]
                        + stateless(p))
    c, server, client, port = cluster
    with c.policies() as pol:
        trials = en.run(c, client, server.ip, port, _policy_steps(pol, client, server, port), TRIALS, WINDOW)
        assert any("ESTABLISHED" in r for r in pol.rules(server))
        monkeypatch.setattr(en, "PROTOCOL", "tcp-rr")   # one flow, opened before the first deny
        monkeypatch.setattr(en, "GIVE_UP_S", None)
        monkeypatch.setattr(en, "PORT_MODE", "kernel")   # (one flow: no source ports to take in turn)
        pol.allow(client, server, port)
        one_flow = en.run(c, client, server.ip, port, _policy_steps(pol, client, server, port)[:1], 2, WINDOW)
    assert np.isfinite(trials.values["policy_enforce"]).all(), trials.values
    assert one_flow.censored("policy_enforce") == 2


class Inert(Policies):
    """A 'policy' implementation that changes nothing (a CNI that ignores NetworkPolicy)."""

    settle_bursts = 2

    def deny(self, client, server, port): pass
    def allow(self, client, server, port): pass
    def decoys(self, server, port, n): pass
    def path_rules(self, server, port, n): pass
    def clear(self): pass


def test_a_policy_that_does_nothing_is_reported_not_enforced(cluster):
    c, server, client, port = cluster
    pol = Inert()
    trials = en.run(c, client, server.ip, port, _policy_steps(pol, client, server, port), TRIALS, WINDOW)
    assert trials.censored("policy_enforce") == TRIALS
    assert np.isnan(trials.values["policy_allow"]).all()   # never closed: no allow to measure (not ~0 ms)
    check, = trials.judge([P50], 0.95)
    assert check.verdict == slo.FAIL and "inf" in check.line()
    assert f"{TRIALS} not within" in trials.summary()[0]


@pytest.mark.slow
def test_policy_cost_is_measured_and_a_blocked_client_fails_the_check(cluster):
    c, server, client, port = cluster
    th = slo.Threshold("policy_cost.p50", 0.005, "5ms", "t")
    with c.policies() as pol:
        cost = policy_cost.measure(c, client, server, port, pol, counts=(0, 200), rounds=2, count=200)
        pol.decoys(server, port, 200)
        assert len(pol.rules(server)) == 200 + 5   # chain, jump, lo, the admitted client, drop
    assert cost.loss(0) == cost.loss(200) == 0.0
    assert [ch.verdict for ch in cost.judge([th], 0.95)] == [slo.PASS]

    class Blocking(Inert):   # 'admits' the client by denying it: the data path carries nothing
        def __init__(self, real):
            self.real = real

        def allow(self, client, server, port):
            self.real.deny(client, server, port)

    with c.policies() as pol:
        blocked = policy_cost.measure(c, client, server, port, Blocking(pol), counts=(0, 10), rounds=1, count=20)
    check, = blocked.judge([th], 0.95)
    assert check.verdict == slo.FAIL and "lost requests" in check.note


@pytest.mark.parametrize("service_type,change", [("ClusterIP", "service"), ("NodePort", "service"),
                                                 ("ClusterIP", "endpoint")])
def test_emulated_service_programming_is_measured_and_removed(cluster, service_type, change):
    c, server, client, port = cluster
    with c.service_program(server, port, service_type, client, change) as svc:
        assert svc.change == change and ("endpoint" in svc.description) == (change == "endpoint")
        step = en.Step("svc_program", en.RESUME, svc.create, reset=svc.delete)
        trials = en.run(c, client, *svc.target, [step], TRIALS, SVC_WINDOW)
    v = trials.values["svc_program"]
    assert np.isfinite(v).all() and (v < SVC_WINDOW).all(), v
    assert not any(_rules(c, None, table, c.node_netns(n)) for n in c.nodes for table in ("nat", "raw"))


def test_a_reset_that_keeps_the_path_open_errors(cluster):
    """(A Service never created is censored like the inert policy above: unit-tested in test_enforcement.)"""
    c, server, client, port = cluster
    with c.service_program(server, port, "ClusterIP", client) as svc:
        made = []

        def create_once():   # a second create of an existing Service is refused; the reset leaves it up
            if not made:
                svc.create()
                made.append(svc.target)
        with pytest.raises(InfrastructureError, match="reset did not stop"):
            en.run(c, client, *svc.target, [en.Step("svc_program", en.RESUME, create_once, reset=lambda: None)], 3,
                   SVC_WINDOW)


def test_a_trial_whose_path_was_open_before_its_change_is_replaced(cluster):
    """As on kind + Cilium (2026-11-27: the Service made to reserve the address was still routed when
    the first trial began): the first trial finds the path open and is not measured; a further study,
    which first closes the path inside its own schedule, runs one trial for it, so TRIALS are measured."""
    c, server, client, port = cluster
    with c.service_program(server, port, "ClusterIP", client) as svc:
        svc.create()                                     # open before the study, as the reservation left it
        exists = [True]

        def create():                                    # the first trial's create finds it made already
            if not exists[0]:
                svc.create()
            exists[0] = True

        def delete():
            svc.delete()
            exists[0] = False
        trials = en.run(c, client, *svc.target, [en.Step("svc_program", en.RESUME, create, reset=delete)],
                        TRIALS, SVC_WINDOW)
    v = trials.values["svc_program"]
    assert len(v) == TRIALS + 1 and np.isnan(v[0]) and np.isfinite(v[1:]).all(), v
    assert trials.replaced == 1 and "1 not measured (the path was open before the change), 1 run again" \
        in trials.summary()[0]
    assert [ch.verdict for ch in trials.judge([slo.Threshold("svc_program.p50", SVC_WINDOW, "", "t")], 0.95)] == [slo.PASS]
