"""The known-limitations table and its one-function API."""

import pytest

from netslo.core.errors import SpecError
from netslo.studies.qos import limits


def test_cilium_bandwidth_manager():
    assert "egress only" in limits.limitation("cilium", "bandwidth-ingress", "cross-node")
    assert "same-node" in limits.limitation("cilium", "bandwidth-egress", "same-node")
    assert limits.limitation("cilium", "bandwidth-egress", "cross-node") is None


def test_no_cni_prioritizes_dscp_by_default():
    for cni in limits.KUBE_CNIS + limits.EMBEDDED:
        for placement in limits.PLACEMENTS:
            assert limits.limitation(cni, "dscp-priority-default", placement)


def test_embedded_datapaths():
    assert limits.limitation("netns-bridge", "bandwidth-ingress", "same-node") is None
    assert limits.limitation("netns-vxlan", "dscp-outer-header", "cross-node")
    assert limits.limitation("netns-bridge", "dscp-outer-header", "cross-node") is None
    assert limits.limitation("netns-vxlan", "dscp-preserve", "cross-node") is None


def test_unknown_cni_has_no_known_limitation():
    assert limits.limitation("weave", "bandwidth-ingress", "cross-node") is None


@pytest.mark.parametrize("feature,placement", [("bandwith-ingress", "same-node"), ("bandwidth-ingress", "same")])
def test_typos_are_errors(feature, placement):
    with pytest.raises(SpecError):
        limits.limitation("cilium", feature, placement)


def test_every_row_is_known_and_sourced():
    for row in limits.TABLE:
        assert row.feature in limits.FEATURES and row.placement in ("*", *limits.PLACEMENTS)
        assert row.reason and row.source


def test_cni_of():
    class C:
        provider, datapath = "netns", "vxlan"

    class K:
        provider, datapath = "kind", "cilium"

    assert limits.cni_of(C()) == "netns-vxlan" and limits.cni_of(K()) == "cilium"
