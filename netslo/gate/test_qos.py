"""THE GATE, QoS part: DSCP preservation, priority under congestion, bandwidth annotations,
congestion control under loss, slow start after idle, bufferbloat.

Scenario data and thresholds: slo-qos.yaml (objectives ``priority.*``, ``bufferbloat.*`` and the
``qos:`` section). Every check is paired with a control that shows it can fail: a datapath that
rewrites DSCP is reported "rewritten", the EF SLO breaks without the priority classes, a shaper at
the wrong rate fails conformance. Known CNI limitations (netslo.studies.qos.limits) turn into strict xfails.
Measured values go to <results>/qos.json.
"""

import numpy as np
import pytest
from scipy import stats as sps

from netslo.core.errors import InfrastructureError
from netslo.gate.plugin.gate import skip
from netslo.gate.plugin.hooks import OUTCOME
from netslo.gate.plugin.qos import (
    bandwidth_plan,
    expect_limitation,
    netslo_bandwidth_pods,
    netslo_cluster_dscp,
    netslo_dscp_matrix,
    netslo_qos_pods,
    netslo_qos_report,
    netslo_qos_spec,
    netslo_uml_qos,
)
from netslo.impair.shaping import bandwidth, priority
from netslo.impair.spec import parse as parse_impairment
from netslo.providers.netns.cluster import DATAPATHS
from netslo.stats.analysis import mann_whitney
from netslo.studies.qos import conformance, dscp_check, experiments, limits, tcpflow

pytestmark = pytest.mark.cni

PLACEMENTS = ("same-node", "cross-node")


# ---- DSCP ------------------------------------------------------------------------------------------

@pytest.mark.emulation
@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("datapath", DATAPATHS)
def test_dscp_preserved_per_hop(datapath, placement, netslo_dscp_matrix, netslo_qos_spec, netslo_qos_report, request):
    """Every mark arrives unchanged at every hop (inner header on VXLAN hops), per embedded datapath."""
    sec = netslo_qos_spec["dscp"]
    expect_limitation(request, f"netns-{datapath}", "dscp-preserve", placement)
    report = netslo_dscp_matrix(datapath)[f"{placement}/plain"]
    netslo_qos_report[request.node.name] = [v.line() for v in report.verdicts]
    judged = [v for v in report.verdicts if v.layer in ("ip", "inner")]
    assert len(judged) == len(report.hops()) * len(sec["marks"]) and len(report.hops()) >= 4
    bad = [v.line() for v in judged if v.verdict != "preserved"]
    assert not bad, "DSCP not preserved:\n" + "\n".join(bad)


@pytest.mark.emulation
@pytest.mark.parametrize("variant", ["plain", "tos-inherit"], ids=["tos-0", "tos-inherit"])
def test_dscp_vxlan_outer_header(variant, netslo_dscp_matrix, netslo_qos_report, request):
    """The underlay sees the mark only if the VXLAN device copies it ('tos inherit'). With the
    Flannel-like default (tos 0) the limitations table expects it stripped: strict xfail."""
    if variant == "plain":
        expect_limitation(request, "netns-vxlan", "dscp-outer-header", "cross-node")
    report = netslo_dscp_matrix("vxlan")[f"cross-node/{variant}"]
    outer = [v for v in report.verdicts if v.layer == "outer"]
    netslo_qos_report[request.node.name] = [v.line() for v in outer]
    assert outer, "no VXLAN hop observed"
    assert all(v.verdict != "not seen" for v in outer), [v.line() for v in outer]
    bad = [v.line() for v in outer if v.verdict != "preserved"]
    assert not bad, "outer header does not carry the mark:\n" + "\n".join(bad)


@pytest.mark.emulation
def test_dscp_rewrite_is_detected(netslo_dscp_matrix, netslo_qos_spec, netslo_qos_report, request):
    """Control: a node that rewrites DSCP (iptables DSCP target in its mangle table) is reported as
    'rewritten to AF11' from that node on, and 'preserved' before it."""
    sec = netslo_qos_spec["dscp"]
    res = netslo_dscp_matrix("bridge")
    report = res["cross-node/rewrite"]
    target = dscp_check.name_of(sec["rewrite_to"])
    netslo_qos_report[request.node.name] = [v.line() for v in report.verdicts]
    assert res["cross-node/rewrite/rule_packets"] >= len(sec["marks"]) * sec["packets"]
    after = set(res["cross-node/rewrite/server_hops"])
    assert after <= set(report.hops())
    for v in report.verdicts:
        want = f"rewritten to {target}" if v.hop in after and v.sent != sec["rewrite_to"] else "preserved"
        assert v.verdict == want, v.line()


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_dscp_preserved_per_hop_on_cluster(placement, netslo_cluster, netslo_cluster_dscp, netslo_qos_spec,
                                           netslo_qos_report, request):
    """The session cluster's own datapath (on kind: the real CNI): every mark arrives unchanged at
    every device it passes, the inner header across a tunnel, captured from this host in the pods'
    and nodes' namespaces. A device the datapath goes around (an eBPF redirect into the pod) is
    reported 'bypassed'; both pods' eth0 and, across nodes, the underlay must see every mark."""
    expect_limitation(request, netslo_cluster, "dscp-preserve", placement)
    report = netslo_cluster_dscp(placement)
    netslo_qos_report[request.node.name] = [v.line() for v in report.verdicts]
    print(report.text())
    layers = [v for v in report.verdicts if v.layer in ("ip", "inner")]
    must = {"client pod eth0", "server pod eth0"} | ({h for h in report.hops() if h.startswith("underlay")}
                                                     if placement == "cross-node" else set())
    assert must <= set(report.hops()), f"path without {must - set(report.hops())}: {report.hops()}"
    bad = [v.line() for v in layers if v.verdict not in ("preserved", "bypassed") or
           (v.hop in must and v.verdict != "preserved")]
    assert not bad, "DSCP not preserved:\n" + "\n".join(bad)


def test_dscp_underlay_on_cluster(netslo_cluster, netslo_cluster_dscp, netslo_qos_report, request):
    """Across nodes, what the underlay network can classify on: the outer header where the datapath
    tunnels (VXLAN/Geneve), else the packet's own header, must carry the pod's mark."""
    expect_limitation(request, netslo_cluster, "dscp-outer-header", "cross-node")
    report = netslo_cluster_dscp("cross-node")
    under = [v for v in report.verdicts if v.layer == "outer" or (v.layer == "ip" and v.hop.startswith("underlay"))]
    netslo_qos_report[request.node.name] = [v.line() for v in under]
    assert under, f"no underlay hop observed on the path {report.hops()}"
    bad = [v.line() for v in under if v.verdict != "preserved"]
    assert not bad, "outer header does not carry the mark:\n" + "\n".join(bad)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_dscp_end_to_end_probe(placement, netslo_cluster, netslo_responder, netslo_client_for, netslo_qos_spec, request):
    """Any provider: the UDP responder sees each mark (IP_RECVTOS) and its replies carry it back."""
    server, ports = netslo_responder
    expect_limitation(request, netslo_cluster, "dscp-preserve", placement)
    report = dscp_check.end_to_end(netslo_cluster, netslo_client_for(placement), server, ports, netslo_qos_spec["dscp"]["marks"])
    bad = [v.line() for v in report.verdicts if v.verdict != "preserved"]
    assert not bad, "DSCP not preserved:\n" + "\n".join(bad)


# ---- priority under congestion -------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["udp", "tcp-rr"])
def test_priority_ef_within_slo_with_classes(protocol, netslo_qos_pods, netslo_qos_spec, netslo_qos_report, request):
    """EF flow beside a saturating best-effort bulk flow, htb classes keyed on DSCP on the uplink."""
    sec = netslo_qos_spec["priority"]
    run = experiments.priority_outcome(netslo_qos_pods, netslo_qos_spec.policy, protocol, netslo_qos_spec.for_prefix("priority"),
                                       sec, "with priority classes")
    request.node.stash[OUTCOME] = run.outcome
    m = run.outcome.analysis.metrics
    netslo_qos_report[request.node.name] = {"ef_p50_ms": m["rtt.p50"].value * 1e3, "ef_p99_ms": m["rtt.p99"].value * 1e3,
                                     "ef_p99_ci_ms": [m["rtt.p99"].lo * 1e3, m["rtt.p99"].hi * 1e3],
                                     "bulk_mbit": run.bulk["throughput_bps"] / 1e6, "class_bytes": run.class_bytes}
    ef = f"1:{priority.FIRST_LEAF + netslo_qos_spec.policy.classes.index(netslo_qos_spec.policy.class_of(46)):x}"
    default = f"1:{priority.FIRST_LEAF + netslo_qos_spec.policy.classes.index(netslo_qos_spec.policy.default_class):x}"
    assert run.class_bytes.get(ef), f"EF class {ef} carried nothing: the filter did not classify ({run.class_bytes})"
    assert run.class_bytes.get(default, 0) > 10 * run.class_bytes[ef], f"bulk not in the default class: {run.class_bytes}"
    assert run.bulk["throughput_bps"] > 0.5 * netslo_qos_spec.policy.link_bits, f"bulk did not saturate: {run.bulk}"
    run.outcome.assert_met()


def test_priority_control_without_classes_breaks_slo(netslo_qos_pods, netslo_qos_spec, netslo_qos_report, request):
    """Control: the same bottleneck and bulk flow with one class (no priority) must break the EF SLO,
    so the passing test above proves the mechanism, not a quiet link."""
    if limits.limitation(limits.cni_of(netslo_qos_pods.cluster), "dscp-priority-default", "cross-node") is None:
        skip("limitation", "this datapath is listed as prioritizing DSCP by default: no degradation to show")
    sec = netslo_qos_spec["priority"]
    run = experiments.priority_outcome(netslo_qos_pods, priority.flat(netslo_qos_spec.policy), "udp",
                                       netslo_qos_spec.for_prefix("priority"), sec, "control without classes",
                                       expect_breach=True)
    m = run.outcome.analysis.metrics
    netslo_qos_report[request.node.name] = {"ef_p50_ms": m["rtt.p50"].value * 1e3, "ef_p99_ms": m["rtt.p99"].value * 1e3,
                                     "ef_p99_ci_ms": [m["rtt.p99"].lo * 1e3, m["rtt.p99"].hi * 1e3],
                                     "bulk_mbit": run.bulk["throughput_bps"] / 1e6}
    assert run.bulk["throughput_bps"] > 0.5 * netslo_qos_spec.policy.link_bits, f"bulk did not saturate: {run.bulk}"
    assert run.outcome.failed, ("control run met the EF SLO without priority classes: the bottleneck did not "
                                "congest, so the priority test proves nothing\n" + run.outcome.message())


# ---- bandwidth annotations -----------------------------------------------------------------------

def _bandwidth_pod_specs(c, sec) -> list[dict]:
    """``add_pods`` entries of the bandwidth tests' pods (``bandwidth_plan``); the gate made them with
    its other pods, so ``QosPods.prepare`` makes only those it could not."""
    return [{"name": name, "node": c.nodes[i], "responders": r, **({"annotations": a} if a else {})}
            for name, i, a, r in bandwidth_plan(sec)]


def _bandwidth_pods(pods, direction: str, placement: str, limit_text: str):
    """(sender, receiver ip, receiver port, shaped pod) for one direction and placement."""
    c = pods.cluster
    key = bandwidth.EGRESS_KEY if direction == "egress" else bandwidth.INGRESS_KEY
    node = c.nodes[0] if placement == "same-node" else c.nodes[1]
    if direction == "egress":
        shaped = pods.pod(f"qos-bw-eg-{placement[:4]}", node, annotations={key: limit_text})
        return shaped, pods.server.ip, pods.ports["tcp"], shaped
    name = f"qos-bw-in-{placement[:4]}"  # one per test: a used token bucket refills only slowly
    shaped = pods.pod(name, c.nodes[0], annotations={key: limit_text})
    if f"{name}-ports" not in pods.extra:
        pods.extra[f"{name}-ports"] = c.start_responders(shaped, ("tcp",))
    sender = pods.pod("qos-bw-src-same", c.nodes[0]) if placement == "same-node" else pods.bulk
    return sender, shaped.ip, pods.extra[f"{name}-ports"]["tcp"], shaped


def _bandwidth_manager(cluster) -> bool:
    """Whether the CNI honours bandwidth annotations with Cilium's Bandwidth Manager (EDT in eBPF)."""
    return getattr(cluster, "bandwidth_mechanism", "") == "bandwidth-manager" or limits.cni_of(cluster) == "cilium"


def _require_bandwidth_manager(links) -> None:
    """Skip 'capability' unless the Bandwidth Manager is active on the node: its EDT rates are
    enforced by the fq qdisc it puts on the node's device, which needs sch_fq."""
    root = links.root_qdisc(links.uplink)
    if root not in ("fq", "mq"):
        skip("capability", f"the CNI's Bandwidth Manager is not active on {links.node}: {links.uplink}'s root qdisc "
                           f"is {root}, not fq ({limits.requirement('cilium', 'bandwidth-egress')}), so the "
                           f"annotation is ignored")


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_bandwidth_annotation_conformance(direction, placement, netslo_bandwidth_pods, netslo_qos_spec, netslo_qos_report,
                                          request):
    """kubernetes.io/<direction>-bandwidth: the rate the kernel holds (read from the node's qdiscs: the
    embedded shaper or, on kind, the CNI's bandwidth plugin) is the annotation's; steady-state goodput
    within tolerance of the limit; overshoot peak and time to conform reported (100 ms bins,
    delivered; 1 s bins, sender-written)."""
    c = netslo_bandwidth_pods.cluster
    sec = netslo_qos_spec["bandwidth"]
    limit = sec[direction]
    expect_limitation(request, c, f"bandwidth-{direction}", placement)
    netslo_bandwidth_pods.prepare(_bandwidth_pod_specs(c, sec))
    sender, dst, port, shaped = _bandwidth_pods(netslo_bandwidth_pods, direction, placement, f"{limit:.0f}")
    links = netslo_bandwidth_pods.links_of(shaped.node)
    if _bandwidth_manager(c):
        _require_bandwidth_manager(links)
    else:
        held = links.pod_bandwidth(shaped)
        assert held[direction] == limit, f"kernel holds {held}, annotation says {limit}"
    res = experiments.conformance_run(c, sender, dst, port, limit, sec, links.pod_link_mtu(shaped))
    netslo_qos_report[request.node.name] = res.metrics()
    print(res.delivered.line(), f"; sender-written peak {res.written.peak_bps / 1e6:.1f} Mbit/s (1 s bins), "
          f"conforms after {res.written.time_to_conform_s:.1f} s")
    assert res.delivered.ok, res.delivered.line()


def test_bandwidth_wrong_limit_fails_conformance(netslo_bandwidth_pods, netslo_qos_spec, netslo_qos_report, request):
    """Control: a shaper at wrong_factor x the annotated rate (a broken plugin: the plugin's own
    shaping replaced) fails conformance."""
    pods = netslo_bandwidth_pods
    c = pods.cluster
    links = pods.links_of(c.nodes[1])
    if _bandwidth_manager(c):
        _require_bandwidth_manager(links)
        skip("limitation", "the control replaces a tc shaper on the pod's host veth; this CNI shapes in eBPF "
                           "(EDT on the node's device), whose programs run before a tc ingress filter")
    sec = netslo_qos_spec["bandwidth"]
    limit = sec["egress"]
    pods.prepare(_bandwidth_pod_specs(c, sec))
    pod = pods.pod("qos-bw-wrong", c.nodes[1], annotations={bandwidth.EGRESS_KEY: f"{limit:.0f}"})
    links.reshape_pod(pod, limit * sec["wrong_factor"])
    res = experiments.conformance_run(c, pod, pods.server.ip, pods.ports["tcp"], limit, sec, links.pod_link_mtu(pod))
    netslo_qos_report[request.node.name] = res.metrics()
    assert res.delivered.verdict == "nonconform", res.delivered.line()
    assert not res.delivered.by_point, res.delivered.line()


# ---- congestion control --------------------------------------------------------------------------

FAMILY_ALPHA = 1e-3   # chance that the grid's realized-loss checks together call a working drop rule broken


def _verify_loss(points) -> None:
    """Each lossy point's drops are Binomial(matched, loss); the grid's checks share FAMILY_ALPHA
    (Bonferroni): one check per point at 1e-3 erred once in a fresh-clone gate (3 %: 203/8586, p = 0.00039)."""
    lossy = [p for p in points if p.loss > 0]
    for p in lossy:
        test = sps.binomtest(p.dropped, p.matched, p.loss)
        if p.matched < 100 or test.pvalue < FAMILY_ALPHA / len(lossy):
            raise InfrastructureError(f"impairment not realized: random drop configured {p.loss:.2%}, "
                                      f"realized {p.dropped}/{p.matched} (binomial p={test.pvalue:.2g}, below "
                                      f"{FAMILY_ALPHA:g}/{len(lossy)})")


def test_congestion_control_loss_grid(netslo_qos_pods, netslo_qos_spec, netslo_qos_report, request):
    """Bulk flows per algorithm through a tbf bottleneck with random per-segment loss: TCP_INFO time
    series per flow; lossless flows reach the bottleneck; BBR >= Cubic at the grid's high loss."""
    sec = netslo_qos_spec["congestion"]
    points = experiments.loss_grid(netslo_qos_pods, sec, (0.0, *sec["loss"]))
    _verify_loss(points)
    netslo_qos_report[request.node.name] = [{"cc": p.cc, "loss": p.loss, "mbit": p.mbit, "dropped": p.dropped,
                                      "matched": p.matched, **p.summary} for p in points]
    for p in points:
        print(f"loss {p.loss:.2%} {p.cc:5}: {p.mbit:6.2f} Mbit/s rtt p50 {p.summary['rtt_p50_us'] / 1e3:6.2f} ms "
              f"cwnd p50 {p.summary['cwnd_p50']} retrans {p.summary['total_retrans']} dropped {p.dropped}")
    goodput = sec["bottleneck"] * conformance.tcp_payload_fraction(netslo_qos_pods.uplink.pod_mtu(netslo_qos_pods.bulk))
    for p in points:
        assert p.summary["cc"] == p.cc, f"asked for {p.cc}, the socket used {p.summary['cc']}"
        rtt = tcpflow.column(p.flow, "rtt_us")[1:]
        cwnd = tcpflow.column(p.flow, "cwnd")[1:]
        assert len(rtt) >= 0.8 * sec["duration"] / 0.1 and min(rtt) > 0 and min(cwnd) > 0, "TCP_INFO series incomplete"
        assert p.mbit * 1e6 <= goodput * (1 + sec["tolerance"]), f"{p.cc} above the bottleneck: {p.mbit:.2f} Mbit/s"
        if p.loss == 0:
            assert p.mbit * 1e6 >= goodput * (1 - sec["tolerance"]), f"{p.cc} lossless below the bottleneck: {p.mbit}"
        else:
            assert p.summary["total_retrans"] >= 0.8 * p.dropped, f"{p.cc}: drops not retransmitted {p.summary}"
    hi = {p.cc: p.mbit for p in points if abs(p.loss - sec["bbr_vs_cubic_loss"]) < 1e-9}
    if {"bbr", "cubic"} <= set(hi):
        assert hi["bbr"] >= hi["cubic"], f"BBR below Cubic at {sec['bbr_vs_cubic_loss']:.0%} loss: {hi}"


def test_iperf3_cross_check(netslo_qos_pods, netslo_qos_spec, netslo_qos_report, request):
    """netslo's bulk flow and iperf3 agree on the throughput of the same shaped path (a pair that
    disagrees is measured once more, ``experiments.iperf3_agreement``)."""
    if not experiments.iperf3_available(netslo_qos_pods.cluster, netslo_qos_pods.bulk):
        skip("tool", "iperf3 not installed where the pods' helpers run (Debian package iperf3)")
    sec = netslo_qos_spec["iperf3"]
    r = experiments.iperf3_agreement(netslo_qos_pods, sec)
    netslo_qos_report[request.node.name] = r
    for pair in ([r["earlier"]] if "earlier" in r else []) + [r]:
        print(f"netslo {pair['netslo_bps'] / 1e6:.2f} Mbit/s, iperf3 {pair['iperf3_bps'] / 1e6:.2f} Mbit/s (receiver), "
              f"{experiments.iperf3_difference(pair):.1%} apart")
    assert r["iperf3_cc"] == r["netslo_cc"] == "cubic"
    diff = experiments.iperf3_difference(r)
    assert diff <= sec["tolerance"], f"netslo and iperf3 differ by {diff:.1%}: {r}"


def test_slow_start_after_idle_resets_cwnd(netslo_qos_pods, netslo_qos_spec, netslo_qos_report, request):
    """100 kB every 1 s: with tcp_slow_start_after_idle=1 Cubic restarts from the initial window after
    each idle second; with 0 it keeps its window; BBR never restarts (it has its own cong_control)."""
    c, sec = netslo_qos_pods.cluster, netslo_qos_spec["slow_start_after_idle"]
    runs = experiments.ssai_pair(c, netslo_qos_pods.lat, netslo_qos_pods.server.ip, netslo_qos_pods.ports["tcp"], sec,
                                 extra_arms=("bbr:1",))
    assert [r["cc"] for r in runs.values()] == ["cubic", "cubic", "bbr"], runs
    cw = {k: tcpflow.column(v, "cwnd_start") for k, v in runs.items()}
    netslo_qos_report[request.node.name] = cw
    iw = cw["1"][0]
    assert all(x == iw for x in cw["1"][1:]), f"ssai=1: window not restarted to {iw} after idle: {cw['1']}"
    assert all(x > iw for x in cw["0"][1:]), f"ssai=0: window restarted anyway: {cw['0']}"
    assert all(x > iw for x in cw["bbr:1"][1:]), f"bbr restarted its window: {cw['bbr:1']}"


# ---- bufferbloat ---------------------------------------------------------------------------------

def test_bufferbloat_inflation_per_algorithm(netslo_qos_pods, netslo_qos_spec, netslo_qos_report, request):
    """1 kB every 10 ms beside a bulk flow through the shaped uplink: latency inflation vs unloaded,
    per algorithm. Cubic fills the queue; BBR keeps it (and the latency) lower."""
    sec = netslo_qos_spec["bufferbloat"]
    run = experiments.bufferbloat_run(netslo_qos_pods, sec, netslo_qos_spec.for_prefix("bufferbloat"))
    table = run.table()
    netslo_qos_report[request.node.name] = table
    for k, v in table.items():
        print(k, {x: round(y, 3) if isinstance(y, float) else y for x, y in v.items()})
    request.node.stash[OUTCOME] = run.baseline
    run.baseline.assert_met()
    q = run.bottleneck.max_queue_delay
    base = table["baseline"]["p50_ms"] / 1e3
    for cc in sec["algorithms"]:
        assert table[cc]["p50_ms"] / 1e3 <= base + q * 1.5 + 0.01, f"{cc}: latency beyond the queue bound {table[cc]}"
    if "cubic" in table:
        assert table["cubic"]["added_p50_ms"] / 1e3 >= 0.5 * q, f"no bufferbloat with cubic: {table['cubic']}"
    if {"cubic", "bbr"} <= set(table):
        p = mann_whitney(run.rtts(run.loaded["bbr"]), run.rtts(run.loaded["cubic"]))
        assert p < 0.01 and table["bbr"]["p50_ms"] < table["cubic"]["p50_ms"], \
            f"BBR not below Cubic (Mann-Whitney p={p:.2g}): {table}"


# ---- real netem (user-mode-linux) ----------------------------------------------------------------

def _netem_path(c, client, delay: float, loss: float = 0.0, rate: float | None = None):
    data = {"delay": f"{delay * 1e3:g}ms"}
    if loss:
        data["loss"] = f"{loss * 100:g}%"
    if rate:
        data.update(rate=f"{rate / 1e6:g}mbit", limit=10000)
    c.impairer.apply(client, parse_impairment(data).with_direction("egress"))
    c.impairer.apply(client, parse_impairment({"delay": f"{delay * 1e3:g}ms"}).with_direction("ingress"))


def _check_rtt(flow: dict, rtt: float) -> None:
    """Impairment verified from TCP_INFO: the flow's minimum RTT must be the configured one."""
    got = min(x for x in tcpflow.column(flow, "min_rtt_us") if x > 0) * 1e-6
    if not 0.98 * rtt <= got <= rtt + 0.010:  # kernel µs rounding below, queueing/host noise above
        raise InfrastructureError(f"impairment not realized: configured RTT {rtt * 1e3:g} ms, "
                                  f"TCP min_rtt {got * 1e3:.2f} ms")


@pytest.mark.needs_netem
def test_bbr_not_below_cubic_under_loss_at_50ms(netslo_uml_qos, netslo_qos_spec, netslo_qos_report, request):
    """50 ms RTT, 1 % random loss, netem rate bottleneck: BBR >= Cubic, because BBR paces at its
    bottleneck-bandwidth estimate and does not back off on random loss (Cardwell et al., "BBR:
    Congestion-Based Congestion Control", ACM Queue 14(5), 2016; the same order with netem loss in a
    Kubernetes cluster: Allansson, Yang, "Comparing Model- and Delay-based Congestion Controls in a
    Kubernetes Cluster", BSc thesis, Karlstad University, 2024); Cubic within 3x of the Mathis bound
    (MSS/RTT)·1.22/√p at the loss rate p it met (``tcpflow.mathis_at_loss_met``)."""
    c, server, ports, client = netslo_uml_qos
    sec = netslo_qos_spec["netem"]
    _netem_path(c, client, sec["delay"], sec["loss"], sec["rate"])
    try:
        flows = {cc: experiments.run_flow(c, client, server.ip, ports["tcp"], sec[key], cc)
                 for cc, key in (("cubic", "duration"), ("bbr", "bbr_duration"))}
    finally:
        c.impairer.clear()
    rtt = 2 * sec["delay"]
    for f in flows.values():
        _check_rtt(f, rtt)
    s = {cc: tcpflow.summary(f, omit=sec["omit"]) for cc, f in flows.items()}
    netslo_qos_report[request.node.name] = s
    mbit = {cc: v["throughput_bps"] / 1e6 for cc, v in s.items()}
    print(f"RTT {rtt * 1e3:g} ms, loss {sec['loss']:.0%}: " + ", ".join(f"{k} {v:.2f} Mbit/s" for k, v in mbit.items()))
    assert s["cubic"]["cc"] == "cubic" and s["bbr"]["cc"] == "bbr"
    assert mbit["bbr"] >= mbit["cubic"], f"BBR below Cubic: {mbit}"
    # Mathis's p is the loss the flow met, not the configured rate: in ten gates on kind (2026-11-29) this
    # 6 s flow's retransmitted share was 0.52-1.41 %, and at 0.52 % Cubic reached 9.19 Mbit/s, 3.2x the
    # bound at 1 % but 2.3x the bound at what it met. A flow that met no loss did not see the impairment.
    mathis, p = tcpflow.mathis_at_loss_met(s["cubic"], rtt, f"{sec['loss']:.2%}")
    mathis /= 1e6
    assert mbit["cubic"] <= 3 * mathis, (f"Cubic {mbit['cubic']:.2f} Mbit/s above 3x Mathis ({mathis:.2f} Mbit/s "
                                         f"at the {p:.2%} loss it met)")


@pytest.mark.needs_netem
def test_slow_start_after_idle_latency_ratio(netslo_uml_qos, netslo_qos_spec, netslo_qos_report, request):
    """100 kB every 1 s over a 20 ms RTT: flow completion P50 with slow start after idle / without
    is about the slow-start rounds needed. With net.ipv4.tcp_slow_start_after_idle=1 (the default) the
    congestion window times out after an idle period of one RTO (RFC 2861 behaviour: Linux
    Documentation/networking/ip-sysctl.rst, tcp(7)), so each 100 kB message slow-starts again. Iorio,
    Risso, Casetti, "When Latency Matters", ACM SIGCOMM CCR 51(4), 2021, Fig. 6: P50 9 ms -> 31 ms
    (x3.4) for 100 kB messages after >= 1 s idle."""
    c, server, ports, client = netslo_uml_qos
    sec = netslo_qos_spec["slow_start_after_idle"]
    _netem_path(c, client, sec["delay"])
    try:
        runs = experiments.ssai_pair(c, client, server.ip, ports["tcp"], sec)
    finally:
        c.impairer.clear()
    fct = {k: np.array(tcpflow.column(v, "fct_s")[1:]) for k, v in runs.items()}  # first: cold start in both
    p50 = {k: float(np.median(v)) for k, v in fct.items()}
    ratio = p50["1"] / p50["0"]
    model = experiments.slow_start_rounds(sec["size"])
    netslo_qos_report[request.node.name] = {"p50_ms": {k: v * 1e3 for k, v in p50.items()}, "ratio": ratio,
                                     "model_rounds": model,
                                     "cwnd_start": {k: tcpflow.column(v, "cwnd_start") for k, v in runs.items()}}
    print(f"P50 FCT {p50['1'] * 1e3:.1f} ms (ssai=1) vs {p50['0'] * 1e3:.1f} ms (ssai=0): x{ratio:.2f}, model x{model}")
    assert min(fct["0"]) >= 2 * sec["delay"], "FCT below one RTT: the delay was not applied"
    assert ratio >= sec["min_ratio"], f"slow start after idle costs only x{ratio:.2f} (expected >= {sec['min_ratio']})"
    assert abs(ratio - model) <= 1.0, f"ratio x{ratio:.2f} far from the slow-start model x{model}"
