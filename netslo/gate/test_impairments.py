"""THE GATE under impairments: real netem (host kernel or user-mode-linux), verified before judging.

Every test applies netem on the client pod, proves it realized (closed-loop calibration probe,
else the test ERRORS with "impairment not realized"), then asserts:
- latency / jitter / loss SLOs under each preset (netslo/gate/slo-impairments.yaml, objectives '<preset>.*');
- the source studies' findings: TCP throughput under a loss grid at 50 ms RTT, BBR >= Cubic from 1 %
  loss; slow start after idle inflates 100 kB request latency unless disabled; corruption shows as
  TCP retransmissions; netem reordering shows in the UDP reorder count;
- that verification can fail: a mismatched expectation and a spec netem silently cannot honour end
  as "impairment not realized", never as a pass or an SLO verdict.
"""

import numpy as np
import pytest
from scipy import stats as sps

from netslo.core.errors import InfrastructureError
from netslo.gate.plugin.hooks import OUTCOME
from netslo.impair.spec import PRESETS, parse
from netslo.slo import runner
from netslo.slo.scenario import Scenario
from netslo.stats.analysis import analyze, mann_whitney
from netslo.studies.qos import experiments, tcpflow
from netslo.traffic.probes.bulk import bulk

pytestmark = [pytest.mark.cni, pytest.mark.needs_netem]

BOTH = ("egress", "ingress")  # client pod: upstream on eth0 egress, downstream via ifb


@pytest.mark.parametrize("netslo_impaired", [{"spec": {"preset": n}, "directions": BOTH} for n in sorted(PRESETS)],
                         ids=sorted(PRESETS), indirect=True)
def test_preset_slo(netslo_impaired, netslo_impaired_cluster, netslo_impair_slo, request):
    """UDP 1 kB request/response SLOs with the preset on both directions of the client."""
    env = netslo_impaired_cluster
    client, _ = netslo_impaired
    name = request.node.callspec.params["netslo_impaired"]["spec"]["preset"]
    scenario = Scenario("cross-node", "udp", "1k")
    netslo_outcome = runner.run(env.cluster, client, env.server, env.ports, scenario, netslo_impair_slo.for_preset(name))
    netslo_outcome.notes.append(f"impairment {name} on both directions, kernel {env.kernel}")
    request.node.stash[OUTCOME] = netslo_outcome
    netslo_outcome.assert_met()


LOSS_GRID = ("0.01%", "0.1%", "1%", "3%")
# Flow lengths (s, the first second omitted), from benchmarks/study_loss_grid_duration.py (two runs of
# 3 x 6 s flows per loss, user-mode-linux, 2026-11-24). Cubic's verdict needs the 6 s: the worst of the
# 6 Cubic flows at 1 % loss over [1 s, T], as a share of 3x the Mathis bound (asserted <= 1), was 1.84
# at T = 2 s, 1.23 (3 s), 0.97 (4 s), 0.84 (5 s), 0.76 (6 s). BBR's needs 3 s: its throughput over
# [1 s, 3 s] was 0.98-1.08x its [1 s, 6 s] value and >= 7.2x the 6 s Cubic's at 1 % (>= 23.8x at 3 %).
FLOW_S = {"cubic": 6.0, "bbr": 3.0}


@pytest.mark.slow
@pytest.mark.parametrize("loss", LOSS_GRID)
def test_tcp_loss_grid_cubic_vs_bbr(loss, netslo_impairment, netslo_impaired_cluster):
    """50 ms RTT (25 ms each way), 50 Mbit/s bottleneck, random loss on the data path only.

    The study: Cubic falters from 0.1 % loss, BBR keeps its throughput. Asserted: BBR >= Cubic at
    >= 1 % loss, and Cubic stays within 3x of the Mathis bound (MSS/RTT)*1.22/sqrt(p) there, p the
    loss rate the flow met (``tcpflow.mathis_at_loss_met``)."""
    env = netslo_impaired_cluster
    data = parse({"delay": "25ms", "loss": loss, "rate": "50mbit", "limit": 10000})
    acks = parse({"delay": "25ms"}).with_direction("ingress")
    client = env.client("cross-node")
    v = env.apply(client, [data, acks], count=1000)
    v.raise_if_not_realized()
    try:
        flows = {cc: bulk(env.cluster, client, env.server, env.ports, duration=FLOW_S[cc], omit=1.0, cc=cc)
                 for cc in ("cubic", "bbr")}
    finally:
        env.clear()
    rate = {cc: f["throughput_bps"] / 1e6 for cc, f in flows.items()}
    print(f"loss {loss}: cubic {rate['cubic']:.2f} Mbit/s (cwnd p50 {flows['cubic']['cwnd_p50']}), "
          f"bbr {rate['bbr']:.2f} Mbit/s; retrans cubic {flows['cubic']['total_retrans']} "
          f"bbr {flows['bbr']['total_retrans']}")
    assert flows["cubic"]["cc"] == "cubic" and flows["bbr"]["cc"] == "bbr"
    assert rate["cubic"] > 0 and rate["bbr"] > 0, f"a flow moved no data: {rate}"
    p = data.loss
    if p >= 0.01:
        assert rate["bbr"] >= rate["cubic"], f"BBR below Cubic at {loss} loss: {rate}"
        # Mathis's p: the loss Cubic's flow met (its retransmitted share), as in test_qos's study
        mathis, met = tcpflow.mathis_at_loss_met(flows["cubic"], 0.050, loss)
        mathis /= 1e6
        assert rate["cubic"] <= 3 * mathis, (f"Cubic {rate['cubic']:.2f} Mbit/s above 3x Mathis {mathis:.2f} "
                                             f"at the {met:.2%} loss it met")


@pytest.mark.slow
def test_slow_start_after_idle(netslo_impairment, netslo_impaired_cluster):
    """100 kB requests every 1 s over 20 ms RTT: P50 inflates with tcp_slow_start_after_idle=1.

    The two settings run as interleaved arms of one helper (one connection each, 0.5 s apart, never
    two messages at once; the sysctl is written before each message): 12 requests each in 12 s."""
    env = netslo_impaired_cluster
    client, _ = netslo_impairment({"delay": "10ms"}, directions=BOTH, count=1000)
    runs = experiments.ssai_pair(env.cluster, client, env.server.ip, env.ports["tcp"],  # sysctl restored, read back
                                 {"size": 100_000, "count": 12, "interval": 1.0})
    # first request: cold start in both
    fct = {k: np.array(tcpflow.column(r, "fct_s")[1:]) for k, r in runs.items()}
    p50 = {k: float(np.median(v)) for k, v in fct.items()}
    p = mann_whitney(fct["1"], fct["0"])
    print(f"100 kB every 1 s, RTT 20 ms: P50 {p50['1'] * 1e3:.1f} ms (slow start after idle) vs "
          f"{p50['0'] * 1e3:.1f} ms (disabled), Mann-Whitney p={p:.2g}")
    assert p < 0.01 and p50["1"] > 1.5 * p50["0"], (p50, p)


def _tcp_counters(env, pod) -> dict:
    """TCP MIB counters of a pod's namespace (nstat, absolute values)."""
    out = env.cluster.exec_in(pod, ["nstat", "-az", "TcpInCsumErrors", "TcpRetransSegs", "TcpOutSegs"])
    return {line.split()[0]: int(line.split()[1]) for line in out.decode().splitlines()[1:] if line.strip()}


@pytest.mark.slow
def test_corruption_causes_retransmissions(netslo_impairment, netslo_impaired_cluster):
    """Bit corruption on the data path: corrupted segments fail the receiver's checksum
    (TcpInCsumErrors) and every one of them is retransmitted; without corruption neither happens.

    netem corrupts one queued packet in 100; with GSO/TSO a queued packet is a burst of up to 64 KB,
    so segmentation offloads are off on the client for the test (one packet = one segment). Bits
    flipped in headers dropped before the server (node routing, bridge) also cause retransmissions,
    so retransmissions >= checksum errors seen by the server."""
    env = netslo_impaired_cluster
    base_spec = {"delay": "5ms", "rate": "50mbit", "limit": 10000}
    client, _ = netslo_impairment(base_spec, count=1000)
    offload = ["ethtool", "-K", "eth0", "tso", "{}", "gso", "{}"]
    env.cluster.exec_in(client, [a.format("off") for a in offload])
    runs = {}
    try:
        for label, spec in (("clean", base_spec), ("corrupt", {**base_spec, "corrupt": "2%"})):
            if label == "corrupt":
                env.clear()
                netslo_impairment(spec, count=1000)
            before = (_tcp_counters(env, client), _tcp_counters(env, env.server))
            flow = bulk(env.cluster, client, env.server, env.ports, duration=3.0, omit=0.5, cc="cubic",
                        sndbuf="256KiB")
            after = (_tcp_counters(env, client), _tcp_counters(env, env.server))
            runs[label] = {"retrans": after[0]["TcpRetransSegs"] - before[0]["TcpRetransSegs"],
                           "csum_errors": after[1]["TcpInCsumErrors"] - before[1]["TcpInCsumErrors"],
                           "segs": flow["data_segs_out"], "mbit": flow["throughput_bps"] / 1e6}
    finally:
        env.cluster.exec_in(client, [a.format("on") for a in offload])
    print(f"corruption: {runs}")
    clean, bad = runs["clean"], runs["corrupt"]
    assert clean["csum_errors"] == 0 and clean["retrans"] <= max(2, 0.001 * clean["segs"]), clean
    # 2 % of ~1e4 segments: even a realized rate 10x below the configured one gives > 10 errors
    assert bad["csum_errors"] >= 10, bad
    assert bad["retrans"] >= bad["csum_errors"], bad
    assert bad["retrans"] > clean["retrans"] + 3 * np.sqrt(max(clean["retrans"], 1)), runs


def test_reordering_visible_in_reorder_count(netslo_impairment, netslo_impaired_cluster):
    """25 % of packets skip a 10 ms delay: the UDP probe counts late arrivals; without it, none."""
    env = netslo_impaired_cluster
    client = env.client("cross-node")
    base = analyze(env.baseline(client))
    client, v = netslo_impairment({"delay": "10ms", "reorder": "25%"})
    a = analyze(v.samples)
    print(f"reorder: baseline {base.counts['reordered']}, impaired {a.counts['reordered']} of "
          f"{a.counts['received']} (CI {a.metrics['reorder'].lo:.3f}..{a.metrics['reorder'].hi:.3f})")
    assert base.counts["reordered"] == 0
    assert a.metrics["reorder"].lo > 0.05


def test_verification_catches_mismatched_expectation(netslo_impaired_cluster):
    """netem really holds 10 ms; verifying against 20 ms must end as 'impairment not realized'."""
    env = netslo_impaired_cluster
    client = env.client("cross-node")
    try:
        v = env.apply(client, [parse({"delay": "10ms"})], check=[parse({"delay": "20ms"})], count=500)
    finally:
        env.clear()
    with pytest.raises(InfrastructureError, match=r"impairment not realized: .*configured 20\.?\d*ms"):
        v.raise_if_not_realized()


def test_verification_catches_spec_netem_cannot_honour(netslo_impaired_cluster):
    """netem's correlated loss generator does not keep the configured marginal loss: 5 % loss with
    50 % correlation realizes far less. Verification must say so instead of letting SLOs pass."""
    env = netslo_impaired_cluster
    client = env.client("cross-node")
    try:
        v = env.apply(client, [parse({"loss": "5%", "loss_correlation": "50%"})], count=2000)
    finally:
        env.clear()
    lost, n = v.samples.rows["srv_seen"].tolist().count(0), len(v.samples.rows)
    print(f"configured 5% loss (corr 50%), realized {lost}/{n}")
    with pytest.raises(InfrastructureError, match="impairment not realized: .*loss: configured 5%"):
        v.raise_if_not_realized()
    assert sps.binomtest(lost, n, 0.05).pvalue < 0.01
