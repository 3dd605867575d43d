"""Bandwidth annotations: Kubernetes quantities and the CNI bandwidth plugin's tbf parameters."""

import pytest

from netslo.core.errors import SpecError
from netslo.impair.shaping import bandwidth as bw


@pytest.mark.parametrize("text,bits", [("1M", 1e6), ("10M", 1e7), ("1G", 1e9), ("500k", 5e5), ("1Mi", 2**20),
                                       ("1Gi", 2**30), ("2500000", 2.5e6), ("1e6", 1e6), ("1.5M", 1.5e6),
                                       (" 10M ", 1e7)])
def test_quantity(text, bits):
    assert bw.quantity(text) == bits


@pytest.mark.parametrize("text", ["10mbit", "10 Mbps", "M", "", "-1M", "1e6M", "999", "2P", "1.2.3", None, True, [1]])
def test_quantity_rejects_with_one_line(text):
    with pytest.raises(SpecError) as e:
        bw.quantity(text, "kubernetes.io/egress-bandwidth")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("kubernetes.io/egress-bandwidth: value") and "expected" in msg


def test_limits_from_annotations():
    assert bw.limits_from({bw.INGRESS_KEY: "10M", bw.EGRESS_KEY: "1M"}) == (1e7, 1e6)
    assert bw.limits_from({"other": "x"}) == (None, None)
    assert bw.limits_from(None) == (None, None)
    with pytest.raises(SpecError, match="kubernetes.io/ingress-bandwidth"):
        bw.limits_from({bw.INGRESS_KEY: "fast"})


def test_plugin_tbf_parameters():
    """rate = bits/8, limit = rate * 25 ms + burst, buffer = burst / rate in psched ticks."""
    p = bw.TbfParams.plugin(10e6, burst_bits=8 * 100_000)
    assert p.rate_bytes == 1_250_000
    assert p.burst_bytes == 100_000
    assert p.limit_bytes == int(1_250_000 * 0.025) + 100_000
    assert p.buffer_ticks == pytest.approx(0.08 * 1e9 / bw._tick_ns(), rel=1e-6)  # 80 ms of tokens


def test_kubelet_burst_saturates_the_buffer_field():
    """Kubelet's MaxInt32-bit burst overflows 32 bits of ticks at low rates: saturated, not wrapped."""
    low = bw.TbfParams.plugin(1e6)
    assert low.buffer_ticks == bw.U32_MAX
    assert low.limit_bytes == 125_000 * 25 // 1000 + (2**31 - 1) // 8
    assert low.effective_burst_bytes() == pytest.approx(125_000 * bw.U32_MAX * bw._tick_ns() * 1e-9)
    high = bw.TbfParams.plugin(50e6)
    assert high.buffer_ticks < bw.U32_MAX
    assert high.effective_burst_bytes() == pytest.approx((2**31 - 1) // 8, rel=1e-3)  # ~268 MB


def test_ifb_name_fits_ifnamsiz():
    assert bw.ifb_name("veth12") == "bwpveth12"
    assert len(bw.ifb_name("cali1234567890123")) == 15
