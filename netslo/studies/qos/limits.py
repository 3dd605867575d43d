"""Known CNI limitations as data: (CNI, feature, placement) -> reason, or None when supported.

    limitation("cilium", "bandwidth-ingress", "cross-node")  -> "Cilium Bandwidth Manager ..."
    limitation("netns-bridge", "bandwidth-ingress", "same-node") -> None

CNI names are what providers call their datapath: ``calico``, ``cilium``, ``antrea``, ``flannel``,
``kindnet`` on Kubernetes, ``netns-bridge``, ``netns-routed``, ``netns-vxlan`` for the embedded
provider (``cni_of(cluster)``). Placement is ``same-node`` or ``cross-node``; a row with ``*`` covers
both. An unknown CNI has no known limitation (None); an unknown feature or placement is a SpecError,
so a typo never turns a check off.

Tests use a reason as a strict xfail: the check still runs, must fail for that reason's sake, and an
unexpected pass fails the run (the table is then out of date). Every row says where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from netslo.core.errors import SpecError

FEATURES = {
    "dscp-preserve": "a DSCP mark set by a pod arrives unchanged at the destination pod",
    "dscp-outer-header": "a tunnel copies the pod's DSCP into the outer (underlay) IP header",
    "dscp-priority-default": "DSCP-marked traffic is prioritized without any QoS configuration",
    "bandwidth-egress": "kubernetes.io/egress-bandwidth limits what the pod sends",
    "bandwidth-ingress": "kubernetes.io/ingress-bandwidth limits what the pod receives",
}
# What each limitation looks like when it shows: the exception a test raises and a pattern its
# message matches. A strict xfail holds only for that failure; a crash or any other assertion fails.
SYMPTOMS = {
    "dscp-preserve": (AssertionError, r"DSCP not preserved"),
    "dscp-outer-header": (AssertionError, r"outer header does not carry the mark"),
    "dscp-priority-default": (AssertionError, r"SLO breach"),
    "bandwidth-egress": (AssertionError, r"for limit .* Mbit/s: nonconform"),
    "bandwidth-ingress": (AssertionError, r"for limit .* Mbit/s: nonconform|control socket has closed unexpectedly"),
}
PLACEMENTS = ("same-node", "cross-node")
KUBE_CNIS = ("calico", "cilium", "antrea", "flannel", "kindnet")
EMBEDDED = ("netns-bridge", "netns-routed", "netns-vxlan")


@dataclass(frozen=True)
class Limitation:
    cni: str
    feature: str
    placement: str        # same-node | cross-node | *
    reason: str
    source: str


_NO_DEFAULT_PRIORITY = ("no CNI prioritizes by DSCP by default: a marked stream competing with an "
                        "unmarked one gets no precedence")
_THESIS = "G. Versteeg, Quality of Service in a cloud native environment, MSc thesis, Radboud University, 2022"
_DSCP_SOURCE = (f"{_THESIS}, §5.4 (Table 10: a DSCP tag on one of two competing iperf3 streams changed "
                "neither stream's throughput or loss on Calico, Cilium or Antrea)")
_NO_QOS_FEATURE_SOURCE = ("not measured: flannel and kindnet document no QoS or DSCP feature at all, so a marked "
                          "stream shares the node's default qdisc with every other one")
# Calico had the same row until a real run contradicted it: since v3.30 felix shapes annotated pods
# itself (tbf, no bandwidth plugin); on kind + Calico v3.31.3 (2026-11-24) both directions conformed,
# same-node and cross-node (47.5-47.8 Mbit/s delivered for 50M, expected 47.7).
_INGRESS_POLICING_SOURCE = (f"{_THESIS}, §5.5 (ingress policing tests with iperf3 ended in 'control socket "
                            "has closed unexpectedly' on Calico and Antrea)")
_CILIUM_INGRESS_SOURCE = ("Cilium docs, Bandwidth Manager, e.g. docs.cilium.io/en/v1.9/gettingstarted/bandwidth-manager/: "
                          "the kubernetes.io/ingress-bandwidth annotation is not supported (ingress rate limiting "
                          f"came later: cilium/cilium PR #36351); {_THESIS}, §5.5")
_CILIUM_SAME_NODE_SOURCE = ("cilium/cilium issue #15824 (maintainer: expected, rate limiting is enforced on the "
                            f"native device); {_THESIS}, §5.5 (no limit on intra-node traffic)")

TABLE = tuple(
    [Limitation(c, "dscp-priority-default", "*", _NO_DEFAULT_PRIORITY,
                _DSCP_SOURCE if c in ("calico", "cilium", "antrea") else _NO_QOS_FEATURE_SOURCE) for c in KUBE_CNIS]
    + [Limitation(c, "dscp-priority-default", "*",
                  "the embedded datapaths install no qdisc: every class shares one FIFO",
                  "measured here: netslo/gate/test_qos.py control run") for c in EMBEDDED]
    + [
        Limitation("cilium", "bandwidth-ingress", "*",
                   "Cilium Bandwidth Manager enforces egress only: kubernetes.io/ingress-bandwidth is ignored",
                   _CILIUM_INGRESS_SOURCE),
        Limitation("cilium", "bandwidth-egress", "same-node",
                   "Cilium Bandwidth Manager has no effect on same-node (pod-to-pod on one node) traffic",
                   _CILIUM_SAME_NODE_SOURCE),
        Limitation("antrea", "bandwidth-ingress", "*",
                   "bandwidth-plugin ingress policing is unreliable with TCP control connections "
                   "(iperf3: 'control socket has closed unexpectedly')", _INGRESS_POLICING_SOURCE),
        Limitation("calico", "dscp-outer-header", "cross-node",
                   "felix creates vxlan.calico without a TOS setting (the kernel's default 0): the underlay "
                   "sees DSCP 0 in the outer header, only the inner header keeps the mark",
                   "measured here: netslo.studies.qos.dscp_check on kind + Calico v3.31.3 VXLAN (2026-11-24); "
                   "felix/dataplane/linux/vxlan_mgr.go at v3.31.3 sets no Tos on its netlink.Vxlan"),
        Limitation("cilium", "dscp-outer-header", "cross-node",
                   "Cilium's tunnel (cilium_vxlan, collect_md) takes the outer header from the eBPF tunnel key, "
                   "whose TOS it leaves 0: the underlay sees DSCP 0, only the inner header keeps the mark",
                   "measured here: netslo.studies.qos.dscp_check on kind + Cilium 1.20.2 VXLAN (2026-11-24); "
                   "bpf/lib/overloadable_skb.h at v1.20.2 fills struct bpf_tunnel_key without tunnel_tos"),
        Limitation("netns-vxlan", "dscp-outer-header", "cross-node",
                   "the VXLAN device uses tos 0 (as Flannel creates it): the outer header carries DSCP 0, "
                   "only the inner header keeps the mark; classify on the inner header or set 'tos inherit'",
                   "measured here: netslo.studies.qos.dscp_check on the vxlan datapath"),
    ])


# What a CNI needs from the node's kernel before a feature works at all: a node without it is a
# 'capability' skip naming this, not a limitation of the CNI (the feature works on a kernel that has it).
REQUIREMENTS = {
    ("cilium", "bandwidth-egress"): "Cilium's Bandwidth Manager needs sch_fq on the node's device; without it "
                                    "Cilium disables it and ignores kubernetes.io/egress-bandwidth (Cilium docs, "
                                    "Bandwidth Manager: 'requires ... the fq qdisc')",
}


def requirement(cni: str, feature: str) -> str | None:
    """What the node's kernel must offer for ``feature`` on ``cni`` (None: nothing beyond the CNI)."""
    return REQUIREMENTS.get((cni, feature))


def _check(feature: str, placement: str) -> None:
    if feature not in FEATURES:
        raise SpecError("feature", feature, f"one of {', '.join(FEATURES)}")
    if placement not in PLACEMENTS:
        raise SpecError("placement", placement, f"one of {', '.join(PLACEMENTS)}")


def find(cni: str, feature: str, placement: str) -> Limitation | None:
    """The table row that applies, or None."""
    _check(feature, placement)
    for row in TABLE:
        if row.cni == cni and row.feature == feature and row.placement in ("*", placement):
            return row
    return None


def limitation(cni: str, feature: str, placement: str) -> str | None:
    """Why ``feature`` does not work on ``cni`` for ``placement`` (None: supported / not known to fail)."""
    row = find(cni, feature, placement)
    return row.reason if row else None


def cni_of(cluster) -> str:
    """The table's CNI name for a cluster: 'netns-<datapath>' for the embedded provider, else its datapath."""
    if getattr(cluster, "provider", "") == "netns":
        return f"netns-{cluster.datapath}"
    return str(getattr(cluster, "datapath", "") or "unknown")
