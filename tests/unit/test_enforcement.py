"""Change studies: latency of one change from raw send times, censoring, trial statistics, SLO keys."""

import math
import threading

import numpy as np
import pytest

from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers.kube import policy as kube_policy
from netslo.providers.netns import policy as netns_policy
from netslo.slo import spec as slo
from netslo.stats.samples import SAMPLE_DTYPE, SampleSet, empty
from netslo.studies import enforcement as en
from netslo.studies import policy_cost

MS = 1_000_000


def _path(open_ms: list[tuple[int, int]], n: int = 300):
    """send times every 1 ms from 0; answered where inside one of the [a, b) ms ranges."""
    send = np.arange(n, dtype=np.int64) * MS
    ans = np.zeros(n, bool)
    for a, b in open_ms:
        ans[a:b] = True
    return send, ans


def test_stop_latency_is_first_request_after_the_last_answered_one():
    send, ans = _path([(0, 107)])
    assert en.latency(send, ans, en.STOP, 100 * MS + 300_000, 200 * MS) == pytest.approx(0.0067)
    ans[103] = False   # a random loss before enforcement does not count: later requests were answered
    assert en.latency(send, ans, en.STOP, 100 * MS, 200 * MS) == pytest.approx(0.007)


def test_stop_not_in_effect_within_the_window_is_censored():
    send, ans = _path([(0, 300)])
    assert math.isinf(en.latency(send, ans, en.STOP, 100 * MS, 200 * MS))


def test_resume_latency_is_first_answered_request_and_censored_without_one():
    send, ans = _path([(0, 50), (112, 300)])
    assert en.latency(send, ans, en.RESUME, 110 * MS, 200 * MS) == pytest.approx(0.002)
    assert math.isinf(en.latency(send, ans, en.RESUME, 60 * MS, 100 * MS))


def test_resume_on_a_path_open_already_is_not_measured_and_left_out():
    send, ans = _path([(0, 300)])          # a deny that never took effect: the allow finds the path open
    assert math.isnan(en.latency(send, ans, en.RESUME, 100 * MS, 200 * MS))
    est = en.estimates(np.array([math.nan] * 3 + [0.004] * 6), "policy_allow", 0.95)
    assert est["policy_allow.p50"].n == 6 and est["policy_allow.p50"].value == 0.004
    none = en.estimates(np.full(6, math.nan), "policy_allow", 0.95)["policy_allow.p50"]
    assert en.decide(none, _threshold("policy_allow.p50", 0.02), 0.95).verdict == slo.FAIL


def test_a_window_without_requests_is_an_infrastructure_error():
    send, ans = _path([(0, 300)])
    with pytest.raises(InfrastructureError, match="sent nothing"):
        en.latency(send, ans, en.STOP, 400 * MS, 500 * MS)


def _samples(send, ans):
    rows = np.zeros(len(send), SAMPLE_DTYPE)
    rows["seq"] = np.arange(len(send))
    rows["send_app_ns"] = rows["send_ns"] = send
    rows["recv_ns"] = np.where(ans, send + 100_000, -1)
    return SampleSet(rows=rows, meta={})


def test_latencies_per_series_and_a_reset_that_did_not_close_the_path_errors():
    send, ans = _path([(0, 105), (213, 300)])
    s = _samples(send, ans)
    got = en.latencies(s, [en.Change("policy_enforce", en.STOP, 100 * MS, 200 * MS),
                           en.Change("policy_allow", en.RESUME, 210 * MS, 290 * MS)])
    assert got["policy_enforce"].tolist() == pytest.approx([0.005]) and got["policy_allow"].tolist() == pytest.approx([0.003])
    with pytest.raises(InfrastructureError, match="reset did not stop"):
        en.latencies(s, [en.Change(en.RESET, en.STOP, 220 * MS, 290 * MS)])
    with pytest.raises(InfrastructureError, match="did not cover"):
        en.latencies(s, [en.Change("policy_enforce", en.STOP, 250 * MS, 350 * MS)])


def _threshold(metric, limit):
    return slo.Threshold(metric, limit, f"{limit * 1e3:g}ms", "t")


def test_trial_statistics_and_censored_upper_bound_decided_on_the_point_estimate():
    v = np.full(36, 0.005)
    v[-1] = math.inf                      # one trial not enforced within its window
    est = en.estimates(v, "policy_enforce", 0.95)
    assert est["policy_enforce.p50"].value == 0.005 and math.isinf(est["policy_enforce.max"].value)
    p90 = en.decide(est["policy_enforce.p90"], _threshold("policy_enforce.p90", 0.05), 0.95)
    assert p90.verdict == slo.PASS and p90.by_point
    assert en.decide(est["policy_enforce.max"], _threshold("policy_enforce.max", 0.05), 0.95).verdict == slo.FAIL
    never = en.estimates(np.full(36, math.inf), "policy_enforce", 0.95)   # a policy that does nothing
    assert en.decide(never["policy_enforce.p50"], _threshold("policy_enforce.p50", 0.05), 0.95).verdict == slo.FAIL


def test_window_is_longer_than_every_threshold_it_judges():
    ths = [_threshold("policy_enforce.p50", 0.02), _threshold("policy_allow.p90", 0.05), _threshold("svc_program.p50", 9.0)]
    assert en.window_for(ths, ("policy_enforce", "policy_allow")) == pytest.approx(0.06)
    assert en.window_for([], ("svc_program",)) == 0.05


DOC = "version: 1\ndefaults: {trials: %s}\nobjectives: [{name: a, thresholds: {%s: %s}}]"
BAD = [
    (DOC % (36, "policy_enforce.p99", "50ms"), "policy_enforce.p99", "P99 needs 368 trials"),
    (DOC % (36, "policy_enforce.p50", "5%"), "policy_enforce.p50", "duration"),
    (DOC % (36, "policy_enforce.mean", "5ms"), "policy_enforce.mean", "known metric"),
    (DOC % (36, "policy_cost.p90", "1ms"), "policy_cost.p90", "known metric"),
    (DOC % (36, "svc_program.p50", "-1ms"), "svc_program.p50", "duration"),
    (DOC % (2, "svc_program.p50", "1ms"), "defaults.trials", "5..100000"),
    (DOC % (20, "svc_program.p90", "1ms"), "svc_program.p90", "P90 needs 36"),
    (DOC % (36, "svc_endpoint.p50", "fast"), "svc_endpoint.p50", "duration"),
    (DOC % (36, "svc_endpoint.avg", "5ms"), "svc_endpoint.avg", "known metric"),
    ("version: 1\nobjectives: [{name: a, trials: 8, thresholds: {svc_program.p90: 1s}}]", "svc_program.p90",
     "8 trials (objectives[0].trials) bound"),
    ("version: 1\nobjectives: [{name: a, trials: 4, thresholds: {svc_program.p50: 1s}}]", "objectives[0].trials",
     "5..100000"),
]


@pytest.mark.parametrize("text,field,expected", BAD, ids=[b[1] for b in BAD])
def test_study_keys_reject_bad_input_with_one_line(text, field, expected):
    import yaml
    with pytest.raises(SpecError) as e:
        slo.parse(yaml.safe_load(text), "f.yaml")
    msg = str(e.value)
    assert "\n" not in msg and field in msg and expected in msg, msg


def test_study_metrics_apply_only_to_their_study():
    spec = slo.parse({"version": 1, "objectives": [{"name": "all", "thresholds": {
        "rtt.p50": "1ms", "policy_enforce.p50": "20ms", "policy_cost.p99": "1ms", "svc_program.p90": "50ms",
        "svc_endpoint.p50": "20ms"}}]})
    assert [t.metric for t in spec.thresholds_for({"protocol": "udp"})] == ["rtt.p50"]
    assert [t.metric for t in spec.thresholds_for({"study": "policy"})] == ["policy_enforce.p50"]
    assert [t.metric for t in spec.thresholds_for({"study": "policy-cost"})] == ["policy_cost.p99"]
    assert [t.metric for t in spec.thresholds_for({"study": "service"})] == ["svc_program.p90"]
    assert [t.metric for t in spec.thresholds_for({"study": "service-endpoint"})] == ["svc_endpoint.p50"]
    assert spec.sampling.trials == 40 and not slo.sample_warnings(spec)


def test_an_objective_sets_its_own_trials():
    spec = slo.parse({"version": 1, "defaults": {"trials": 36}, "objectives": [
        {"name": "emu", "select": {"datapath": "bridge"}, "thresholds": {"policy_enforce.p90": "50ms", "rtt.p50": "1ms"}},
        {"name": "real", "select": {"datapath": "calico"}, "trials": 8, "thresholds": {"policy_enforce.p50": "1s"}}]})
    emu, real = (spec.thresholds_for({"study": "policy", "datapath": d}) for d in ("bridge", "calico"))
    assert [t.trials for t in emu] == [36] and [t.trials for t in real] == [8]
    assert spec.thresholds_for({"protocol": "udp", "datapath": "bridge"})[0].trials == 0
    assert en.trials_for(emu) == 36 and en.trials_for(real) == 8 and en.trials_for(emu + real) == 36
    with pytest.raises(ValueError):
        en.trials_for([])


def test_emulated_policy_rules_in_evaluation_order():
    p = netns_policy._PodPolicy(isolated=True, decoys=2, port=7000, admitted={"10.244.1.2": 7000})
    assert netns_policy.chain_rules(p) == [
        "-i lo -j ACCEPT", "-s 10.255.0.1/32 -p tcp --dport 7000 -j ACCEPT",
        "-s 10.255.0.2/32 -p tcp --dport 7000 -j ACCEPT", "-s 10.244.1.2/32 -p tcp --dport 7000 -j ACCEPT", "-j DROP"]
    assert len({netns_policy.decoy_source(i) for i in range(1000)}) == 1000


def test_kube_policy_manifest_selects_the_server_and_admits_by_labels():
    m = kube_policy.policy_manifest("pol-allow-s-c", "abc123", "s", kube_policy.admit({"k": "v"}, 7000), "allow")
    assert m["kind"] == "NetworkPolicy" and m["metadata"]["namespace"] == "netslo-abc123"
    assert m["spec"]["podSelector"]["matchLabels"]["netslo.io/pod"] == "s" and m["spec"]["policyTypes"] == ["Ingress"]
    assert m["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 7000}]
    assert kube_policy.policy_manifest("d", "abc123", "s", [], "deny")["spec"]["ingress"] == []


def test_cost_steps():
    assert policy_cost.steps((0, 100, 1000)) == [(0, 100), (100, 1000), (0, 1000)]
    assert policy_cost.steps((0, 10)) == [(0, 10)]


def test_a_study_without_objective_errors_on_the_embedded_provider_and_skips_on_a_real_cluster():
    from netslo.gate.plugin.studies import study_thresholds
    spec = slo.parse({"version": 1, "objectives": [
        {"name": "emb", "select": {"datapath": ["bridge"]}, "thresholds": {"svc_program.p50": "20ms"}}]})

    class Where:   # what study_thresholds reads of a cluster
        def __init__(self, datapath, emulated):
            self.datapath, self.emulated = datapath, emulated
    labels = {"study": "service", "placement": "cross-node"}
    assert [t.metric for t in study_thresholds(spec, Where("bridge", True), labels, "svc_program.*")] == ["svc_program.p50"]
    with pytest.raises(SpecError, match="an objective with svc_program"):
        study_thresholds(spec, Where("routed", True), labels, "svc_program.*")
    with pytest.raises(pytest.skip.Exception, match=r"netslo\[provider\]: no objective .* datapath calico"):
        study_thresholds(spec, Where("calico", False), labels, "svc_program.*")


class _Bursts:
    """A 'cluster' whose probe answers bursts as scripted: (lost, P50 us) per call, then the last forever."""

    def __init__(self, script):
        self.script, self.calls = list(script), 0

    def probe(self, client, spec):
        from netslo.stats.samples import empty
        lost, p50_us = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        rows = empty(spec.count)
        rows["send_ns"] = np.arange(spec.count) * 2 * MS
        rows["recv_ns"] = rows["send_ns"] + int(p50_us * 1000)
        rows["recv_ns"][:lost] = -1
        return SampleSet(rows, {"protocol": spec.protocol})


def test_policy_cost_waits_until_the_path_is_steady():
    """Loss or a drifting P50 after a change (a CNI's agent still reprogramming) is waited out: the
    path must answer SETTLE_STEADY bursts in a row like the first of them."""
    n = policy_cost.SETTLE_STEADY
    cluster = _Bursts([(30, 900), (0, 900), (0, 400), (0, 420)])
    assert policy_cost.settle(cluster, None, "10.0.0.1", 7000) >= 0 and cluster.calls == 2 + n
    steady = _Bursts([(0, 300)])
    policy_cost.settle(steady, None, "10.0.0.1", 7000)
    assert steady.calls == n
    blocked = _Bursts([(40, 300), (100, 0)])    # a path the policies block: steady, judged as lossy
    policy_cost.settle(blocked, None, "10.0.0.1", 7000)
    assert blocked.calls == 1 + n
    late_loss = _Bursts([(0, 300)] * (n - 1) + [(3, 300)] + [(0, 300)])   # one lossy burst restarts the count
    policy_cost.settle(late_loss, None, "10.0.0.1", 7000)
    assert late_loss.calls == 2 * n
    drift = _Bursts([(0, 300 + 20 * i) for i in range(40)])   # each within 25 % of the last, not of the first
    policy_cost.settle(drift, None, "10.0.0.1", 7000)
    assert drift.calls > n


def test_policy_cost_errors_when_the_path_never_settles():
    with pytest.raises(InfrastructureError, match=r"did not settle within 0 s .*loss 5%"):
        policy_cost.settle(_Bursts([(5, 300)]), None, "10.0.0.1", 7000, limit_s=0.0)


class _BlockingProbeCluster:
    """A stand-in cluster whose probe blocks until released (what a minutes-long schedule does)."""

    def __init__(self):
        self.release = threading.Event()
        self.probing = threading.Event()
        self.ended = threading.Event()

    def exec_agent(self, pod, argv, timeout):
        return None

    def probe(self, pod, spec):
        self.probing.set()
        self.release.wait(30)
        self.ended.set()
        raise RuntimeError("ended by the teardown")


def test_ctrl_c_in_a_study_does_not_wait_out_the_probe_with_a_stand_in_cluster():
    """Ctrl-C during a change returns at once (the cluster's teardown ends the probe's command); it
    used to wait in join() for the probe's whole schedule (26 min on kind, 2026-11-28)."""
    cluster = _BlockingProbeCluster()

    def interrupt():
        cluster.probing.wait(5)
        raise KeyboardInterrupt

    step = en.Step("policy_enforce", en.STOP, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            en.run(cluster, "client", "10.0.0.1", 80, [step], trials=1, window=0.05, lead_in=0.0)
        assert cluster.probing.is_set() and not cluster.ended.is_set()   # the probe is still running
    finally:
        cluster.release.set()


def test_a_study_whose_tuples_come_back_too_soon_is_an_infrastructure_error():
    """The Service study needs a tuple to stay away longer than an unanswered SYN's conntrack entry
    (120 s): 28 232 ports in turn at 5 ms are 141 s; at 1 ms 28 s is refused, as is a probe that
    reports no range (ports left to connect(): no bound at all)."""
    kind_range = SampleSet(empty(0), {"source_port_range": [32768, 60999]})
    en.check_tuple_return(kind_range, 0.005, 120.0)
    en.check_tuple_return(SampleSet(empty(0), {}), 0.001, 0.0)          # not asked for: nothing to check
    with pytest.raises(InfrastructureError, match=r"32768-60999, so a tuple comes back after 28 s .* within 120 s") as e:
        en.check_tuple_return(kind_range, 0.001, 120.0)
    assert "\n" not in str(e.value)
    with pytest.raises(InfrastructureError, match="reported no source-port range"):
        en.check_tuple_return(SampleSet(empty(0), {}), 0.005, 120.0)
