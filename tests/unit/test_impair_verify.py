"""Impairment verification on synthetic paths: every check of every preset fails, or says it cannot be
verified here, when nothing was applied; a realized preset whose effect this path resolves is verified;
a loss check gets the calibration length it needs to be able to fail."""

from dataclasses import replace

import numpy as np
import pytest

from netslo.core.errors import InfrastructureError
from netslo.impair import netem, verify
from netslo.impair.spec import PRESETS, preset
from netslo.stats.samples import SampleSet, empty

WIRE = verify.CALIBRATION_BYTES + verify.ETH_IP_UDP_OVERHEAD
KERNELS = {"uml": verify.UML_TIMER_ALLOWANCE_S, "host": verify.TIMER_ALLOWANCE_S}


def path(seed: int, n: int = verify.CALIBRATION_COUNT, add=None, lost=None) -> SampleSet:
    """A calibration of an unimpaired path like user-mode-linux's (one-way ~40-200 µs, a few 0.4 ms
    outliers), every 1 ms; ``add`` = {'up'|'down': added delay array (s)}, ``lost`` = {dir: bool mask}."""
    rng = np.random.default_rng(seed)
    one_way = {d: 40e-6 + rng.gamma(3.0, 15e-6, n) + (rng.random(n) < 0.005) * 0.4e-3 for d in ("up", "down")}
    for d, a in (add or {}).items():
        one_way[d] = one_way[d] + a
    r = empty(n)
    r["send_ns"] = r["sched_ns"] = np.arange(n) * 1_000_000
    r["srv_rx_ns"] = r["send_ns"] + (one_way["up"] * 1e9).astype(np.int64)
    r["srv_tx_ns"] = r["srv_rx_ns"] + 10_000
    r["recv_ns"] = r["srv_tx_ns"] + (one_way["down"] * 1e9).astype(np.int64)
    r["srv_seen"] = 1
    lost = lost or {}
    if "up" in lost:
        r["srv_seen"][lost["up"]] = 0
        r["srv_rx_ns"][lost["up"]] = r["srv_tx_ns"][lost["up"]] = -1
    for d in ("up", "down"):
        if d in lost:
            r["recv_ns"][lost[d]] = -1
    r["arrival"] = np.where(r["recv_ns"] >= 0, np.arange(n), -1)
    return SampleSet(r, {"protocol": "udp"})


def judge(imp, samples: SampleSet, baseline: SampleSet, kernel: str) -> verify.Verification:
    """Both directions judged, as the gate applies presets (egress and ingress of the client)."""
    v = verify.Verification(samples=samples, baseline=baseline)
    for d in ("up", "down"):
        v.checks += verify.check_direction(imp, samples, baseline, d, WIRE, allowance=KERNELS[kernel])
    return v


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_nothing_applied_is_never_verified(name, kernel):
    """Each preset judged against a calibration of the same unimpaired path: not one check is [ok]."""
    imp = preset(name)
    base = path(1)
    count = verify.calibration_count({"up": imp, "down": imp}, base, verify.CALIBRATION_COUNT)
    v = judge(imp, path(2, count), base, kernel)
    assert v.checks and not v.ok
    assert not [c.line() for c in v.checks if c.verified]
    assert not [c.line() for c in v.checks if "[ok]" in c.line()]
    with pytest.raises(InfrastructureError, match="impairment (not realized|cannot be verified here)"):
        v.raise_if_not_realized()


def realized(imp, base: SampleSet, seed: int, n: int) -> SampleSet:
    """The unimpaired path plus netem's draws on both directions (iid loss at the stationary rate)."""
    rng = np.random.default_rng(seed)
    add = {d: netem.delay_model(imp, n, seed + i) if imp.jitter else np.full(n, imp.delay)
           for i, d in enumerate(("up", "down"))}
    lost = {d: rng.random(n) < imp.expected_loss for d in ("up", "down")} if imp.expected_loss else None
    return path(seed, n, add, lost)


@pytest.mark.parametrize("name", ["bursty-loss", "fttc-uplink", "transcontinental-50ms", "wifi"])
def test_realized_presets_are_verified_with_checks_that_could_fail(name):
    """Presets whose effect exceeds what user-mode-linux resolves: every check [ok], and each could fail."""
    imp = replace(preset(name), rate=0.0)    # the synthetic path does not serialise
    base = path(1)
    count = verify.calibration_count({"up": imp, "down": imp}, base, verify.CALIBRATION_COUNT)
    v = judge(imp, realized(imp, base, 3, count), base, "uml")
    assert v.ok, v.message()
    assert v.message().startswith("impairment realized")


def test_wired_lan_in_user_mode_linux_is_verified_by_the_checks_that_could_fail():
    """250 µs ± 40 µs: its P10 lies 199 µs above the path, within the 2 x 100 µs drift + CIs this kernel
    resolves, so that check is shown 'cannot be verified here' (never [ok]) and does not count; P50 and
    P90 lie further out, could fail, and verify the impairment."""
    imp = preset("wired-lan")
    base = path(1)
    v = judge(imp, realized(imp, base, 3, verify.CALIBRATION_COUNT), base, "uml")
    assert {c.name for c in v.unresolved} == {"wired-lan up one-way delay P10", "wired-lan down one-way delay P10"}
    assert all("[CANNOT BE VERIFIED HERE]" in c.line() and "[ok]" not in c.line() for c in v.unresolved)
    assert all("within the 2" in c.unresolved and "±100µs" in c.unresolved for c in v.unresolved)
    counted = [c for c in v.checks if c.verified]
    assert {c.name.rsplit(" ", 1)[1] for c in counted} == {"P50", "P90"} and {c.direction for c in counted} == {"up", "down"}
    assert v.ok and not v.unverifiable and v.message().startswith("impairment realized")


def test_a_direction_with_no_check_that_could_fail_cannot_be_verified():
    """An effect below what this path resolves at every quantile: realized or not, the verification is an
    error naming the resolution, never 'verified'."""
    imp = replace(preset("wired-lan"), delay=60e-6, jitter=0.0)
    base = path(1)
    v = judge(imp, realized(imp, base, 3, verify.CALIBRATION_COUNT), base, "uml")
    assert not v.failed and v.unverifiable == ["up", "down"] and not v.ok
    assert not [c for c in v.checks if "[ok]" in c.line()]
    with pytest.raises(InfrastructureError, match=r"impairment cannot be verified here: wired-lan up one-way delay "
                                                  r"P50: the configured shift 60(\.0)?µs .* this path resolves"):
        v.raise_if_not_realized()


def test_loss_check_asks_for_the_calibration_it_needs_to_fail():
    """bursty-loss (0.82 % stationary, bursts): at 2000 requests its interval holds 0 lost, so the
    verification measures longer; at that length nothing applied falls outside."""
    imp = preset("bursty-loss")
    base = path(1)
    need = verify.calibration_count({"up": imp}, base, verify.CALIBRATION_COUNT)
    assert verify.CALIBRATION_COUNT < need <= verify.MAX_CALIBRATION_COUNT
    short = verify.check_direction(imp, path(2), base, "up", WIRE)
    loss = next(c for c in short if c.name.endswith("loss"))
    assert loss.ok and loss.unresolved and f"{need} calibration requests" in loss.unresolved
    long = verify.check_direction(imp, path(2, need), base, "up", WIRE)
    assert not next(c for c in long if c.name.endswith("loss")).ok
    plain = preset("transcontinental-50ms")
    assert verify.calibration_count({"up": plain}, base, verify.CALIBRATION_COUNT) == verify.CALIBRATION_COUNT


def test_no_line_claims_a_configured_sd():
    """The former 'sd (info)' line (baseline + model sd labelled 'configured') is gone."""
    imp = preset("transcontinental-50ms")
    base = path(1)
    v = judge(imp, realized(imp, base, 3, verify.CALIBRATION_COUNT), base, "uml")
    assert not [c.name for c in v.checks if " sd" in c.name]


class Pod:
    def __init__(self, name):
        self.name = name


class Cluster:
    def environment(self):
        return {"kernel": "uml 6.1.176"}


def test_verify_sends_the_longer_calibration_and_does_not_repeat_an_unresolved_one(monkeypatch):
    """verify() measures as many requests as calibration_count asks; a calibration that only cannot be
    verified (no check missed) is not measured again: that is the path's resolution, not chance."""
    base = path(1)
    asked = []

    def measure(cluster, client, server, ports, count, *args, **kw):
        asked.append(count)
        return realized(imp, base, 3 + len(asked), count)

    monkeypatch.setattr(verify, "measure", measure)
    client = Pod("client")
    for imp, want in ((preset("bursty-loss"), [5500]), (preset("wired-lan"), [verify.CALIBRATION_COUNT])):
        asked.clear()
        v = verify.verify(Cluster(), client, Pod("server"), {}, [(client, imp.with_direction(d))
                                                                 for d in ("egress", "ingress")], base)
        assert asked == want, (imp.name, asked)
        assert v.first is None and not v.failed
    assert v.unresolved and v.ok and not v.unverifiable    # wired-lan, as in user-mode-linux: P10 does not count


def test_a_loss_no_calibration_can_tell_from_none_does_not_lengthen_it():
    """0.01 % loss needs more than MAX_CALIBRATION_COUNT requests: measuring the maximum would not let
    its check fail, so the calibration keeps its length and the check says it cannot be verified."""
    imp = replace(preset("wired-lan"), loss=0.0001)
    assert verify.loss_count_needed(imp.expected_loss, 0.0) is None
    assert verify.calibration_count({"up": imp}, path(1), 1000) == 1000
