"""Impairment specs: units are mandatory, every bad value is one line naming field, value and form;
presets parse and carry their source; the netlink encoding and delay tables are what netem expects."""

import numpy as np
import pytest

from netslo.core.errors import SpecError
from netslo.impair import netem, verify
from netslo.impair.spec import PRESETS, GilbertElliott, Impairment, json_schema, parse, preset


def test_full_spec_parses_to_si_units():
    imp = parse({"direction": "ingress", "delay": "10ms", "jitter": "2ms", "distribution": "normal",
                 "delay_correlation": "25%", "loss": "1%", "loss_correlation": "10%", "corrupt": "0.1%",
                 "duplicate": "1%", "reorder": "25%", "gap": 5, "rate": "20mbit", "limit": 5000})
    assert imp.direction == "ingress" and imp.delay == pytest.approx(0.010) and imp.jitter == pytest.approx(0.002)
    assert imp.loss == pytest.approx(0.01) and imp.corrupt == pytest.approx(0.001) and imp.gap == 5
    assert imp.rate == pytest.approx(20e6) and imp.limit == 5000
    assert "delay 10ms ±2ms normal" in imp.describe()


def test_round_trip_through_doc():
    for name in PRESETS:
        imp = preset(name)
        again = parse(imp.to_doc())
        for key, value in imp.as_dict().items():
            got = again.as_dict()[key]
            if isinstance(value, dict):
                assert got == pytest.approx(value), (name, key)
                continue
            assert got == (pytest.approx(value) if isinstance(value, float) else value), (name, key)


@pytest.mark.parametrize("doc, field, expected", [
    ({"delay": "10"}, "delay", "duration with a unit"),
    ({"delay": 10}, "delay", "duration with a unit"),
    ({"delay": "2ms", "jitter": "3ms"}, "jitter", "<= delay"),
    ({"loss": "101%"}, "loss", "between 0% and 100%"),
    ({"loss": "0.5"}, "loss", "percentage"),
    ({"delay": "1ms", "jiter": "1ms"}, "jiter", "known key"),
    ({"delay": "1ms", "distribution": "normal"}, "distribution", "jitter > 0"),
    ({"delay": "1ms", "jitter": "1ms", "distribution": "gauss"}, "distribution", "one of uniform"),
    ({"delay": "1ms", "direction": "up"}, "direction", "one of egress"),
    ({"reorder": "25%"}, "reorder", "delay > 0"),
    ({"delay": "5ms", "gap": 3}, "gap", "reorder > 0"),
    ({"delay": "5ms", "reorder": "10%", "gap": 0}, "gap", "whole number 1"),
    ({"loss_correlation": "25%", "delay": "1ms"}, "loss_correlation", "loss > 0"),
    ({"gilbert_elliott": {"p": "1%"}}, "gilbert_elliott.r", "required"),
    ({"gilbert_elliott": {"p": "1%", "r": "0%"}}, "gilbert_elliott.r", "> 0%"),
    ({"gilbert_elliott": {"p": "1%", "r": "10%", "h": "1%"}}, "gilbert_elliott.h", "one of p"),
    ({"loss": "1%", "gilbert_elliott": {"p": "1%", "r": "10%"}}, "loss", "one loss model"),
    ({"rate": "10"}, "rate", "rate with a unit"),
    ({"rate": "1kbit"}, "rate", "8kbit"),
    ({"delay": "1ms", "limit": "1000"}, "limit", "whole number"),
    ({"delay": "11s"}, "delay", "up to 10s"),
    ({"preset": "lte"}, "preset", "one of"),
    ({}, "impairment", "at least one"),
    ({"direction": "egress"}, "impairment", "at least one of delay"),
])
def test_bad_specs_are_one_line_errors(doc, field, expected):
    with pytest.raises(SpecError) as e:
        parse(doc)
    msg = str(e.value)
    assert "\n" not in msg
    assert e.value.field == f"impairment.{field}" or e.value.field == field
    assert expected in msg


def test_preset_with_override_and_source():
    imp = preset("transcontinental-50ms", loss="1%")
    assert imp.name == "transcontinental-50ms" and imp.delay == pytest.approx(0.025) and imp.loss == pytest.approx(0.01)
    assert "50" in imp.source
    for p in PRESETS.values():
        assert len(p.source) > 40  # every preset says where its numbers come from


def test_gilbert_elliott_stationary_loss():
    g = GilbertElliott(p=0.005, r=0.30, loss_in_bad=0.5)
    assert g.stationary_loss == pytest.approx(0.005 / 0.305 * 0.5)
    assert preset("bursty-loss").expected_loss == pytest.approx(g.stationary_loss)


def test_reorder_share_with_gap():
    assert Impairment(delay=0.01, reorder=0.25).reorder_share == pytest.approx(0.25)
    assert Impairment(delay=0.01, reorder=0.25, gap=5).reorder_share == pytest.approx(0.25 / (0.25 * 4 + 1))


def test_json_schema_lists_every_key():
    props = json_schema()["properties"]
    for key in ("delay", "jitter", "distribution", "loss", "gilbert_elliott", "reorder", "gap", "rate", "limit"):
        assert key in props


def test_netlink_options_encode_the_spec():
    imp = parse({"delay": "10ms", "jitter": "2ms", "distribution": "pareto", "loss": "1%", "rate": "20mbit",
                 "reorder": "25%", "gap": 3, "corrupt": "0.5%", "duplicate": "2%", "limit": 2000})
    o = netem.netem_options(imp)
    assert o["delay"] == int(0.010 * 1e9) >> 6 and o["limit"] == 2000 and o["gap"] == 3
    assert o["loss"] == round(0.01 * (2**32 - 1)) and o["duplicate"] == round(0.02 * (2**32 - 1))
    attrs = dict((k, v) for k, v in o["attrs"])
    assert attrs["TCA_NETEM_LATENCY64"] == 10_000_000 and attrs["TCA_NETEM_JITTER64"] == 2_000_000
    assert attrs["TCA_NETEM_RATE"]["rate"] == 2_500_000  # bytes/s
    assert len(attrs["TCA_NETEM_DELAY_DIST"]) == 2 * netem.TABLE_SIZE
    ge = netem.netem_options(preset("bursty-loss"))
    loss = dict(ge["attrs"])["TCA_NETEM_LOSS"]["attrs"][0]
    assert loss[0] == "NETEM_LOSS_GE" and loss[1]["h"] == round(0.5 * (2**32 - 1))


def test_readback_mismatch_detection():
    imp = parse({"delay": "10ms", "loss": "1%"})
    held = {"delay": 0.010, "jitter": 0.0, "loss": 0.01, "limit": 1000}
    assert netem.mismatches(imp, held) == []
    held["delay"] = 0.020
    assert any("delay configured" in m for m in netem.mismatches(imp, held))


@pytest.mark.parametrize("name, mean, sd", [("normal", 0.0, 1.0), ("pareto", -0.033, 0.82),
                                            ("paretonormal", -0.025, 0.83)])
def test_delay_tables_match_their_definition(name, mean, sd):
    t = netem.dist_table(name).astype(float) / netem.NETEM_DIST_SCALE
    assert len(t) == 4096 and t.dtype == float
    assert t.mean() == pytest.approx(mean, abs=0.01) and t.std() == pytest.approx(sd, abs=0.01)


@pytest.mark.parametrize("name", ["normal", "paretonormal"])
def test_delay_tables_equal_the_scipy_quantiles_entry_for_entry(name):
    """The normal quantiles come from the standard library; scipy's norm.ppf gives the same table."""
    from scipy.stats import norm
    u = (np.arange(netem.TABLE_SIZE) + 0.5) / netem.TABLE_SIZE
    x = norm.ppf(u)
    if name == "paretonormal":
        x = 0.25 * x + 0.75 * np.minimum(((1.0 - u) ** (-1.0 / 3.0) - 1.5) / 0.75, 32767 / netem.NETEM_DIST_SCALE)
    ref = np.clip(np.rint(x * netem.NETEM_DIST_SCALE), -32768, 32767).astype(np.int16)
    assert np.array_equal(netem.dist_table(name), ref)


def test_delay_tables_agree_with_iproute2_when_installed():
    import pathlib
    d = pathlib.Path("/usr/lib/x86_64-linux-gnu/tc")
    if not (d / "normal.dist").exists():
        pytest.skip("iproute2 distribution tables not installed")
    from scipy.stats import ks_2samp
    for name in ("normal", "pareto", "paretonormal"):
        ref = [int(x) for line in (d / f"{name}.dist").read_text().splitlines()
               if not line.startswith("#") for x in line.split()]
        assert ks_2samp(netem.dist_table(name), ref).statistic < 0.01, name


def test_expected_delay_model_with_rate_keeps_order():
    base = np.full(100, 1e-4)
    imp = parse({"delay": "10ms", "jitter": "2ms", "distribution": "normal", "rate": "1mbit"})
    d = verify.expected_delays(imp, base, 1042, interval=0.002, n=20000)
    plain = verify.expected_delays(parse({"delay": "10ms", "jitter": "2ms", "distribution": "normal"}), base,
                                   1042, interval=0.002, n=20000)
    assert np.quantile(d, 0.1) > np.quantile(plain, 0.1) + 0.5e-3  # order kept: low delays pushed up


def test_affected_direction():
    assert verify.affected_direction(True, "egress") == "up"
    assert verify.affected_direction(True, "ingress") == "down"
    assert verify.affected_direction(True, "host-egress") == "down"
    assert verify.affected_direction(False, "egress") == "down"
    assert verify.affected_direction(False, "ingress") == "up"
