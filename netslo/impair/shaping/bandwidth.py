"""Pod bandwidth annotations, honoured the way the CNI ``bandwidth`` plugin does it.

    kubernetes.io/ingress-bandwidth: 10M   # traffic INTO the pod, bits/s (Kubernetes quantity)
    kubernetes.io/egress-bandwidth: 1M     # traffic OUT OF the pod, bits/s

Ingress (to the pod): ``tbf`` as root qdisc (handle 1:) on the host-side veth in the node namespace
(the host side transmits what the pod receives). Egress (from the pod): ``ingress`` qdisc (ffff:) on
the host-side veth, a u32 match-all filter with ``mirred egress redirect`` to an ``ifb`` device
(``bwp<host-veth>``) that carries a root ``tbf``.

tbf parameters as the plugin computes them (rate in bits/s from the annotation, burst in bits):
  rate   = rate_bits / 8                         bytes/s
  buffer = time2tick(burst_bytes * 1e6 / rate)   psched ticks (1 tick = 64 ns here)
  limit  = rate * 25 ms + burst_bytes            bytes (the bfifo below tbf)
Kubelet passes burst = 2^31-1 bits ("unlimited") for annotations: a full bucket of ~268 MB (at rates
below ~8 Mbit/s the buffer overflows 32 bits of ticks and is saturated here to 2^32-1 ticks, i.e.
274.9 s of tokens). A fresh pod may therefore send that much at line rate before tbf bites: the
first-interval overshoot the studies saw (measured here: ~268 MB in the first ~0.1 s at 50 Mbit/s).
The limit (~268 MB) lets a TCP sender queue megabytes: its *written* rate conforms later than the
*delivered* rate does. tbf never splits a GSO packet that fits its huge bucket, so delivery comes in
64 KiB quanta (5.2 Mbit per quantum in a 100 ms bin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import TC_H_ROOT

from netslo.core import netns_access
from netslo.core.errors import InfrastructureError, SpecError

INGRESS_KEY = "kubernetes.io/ingress-bandwidth"
EGRESS_KEY = "kubernetes.io/egress-bandwidth"
KUBELET_BURST_BITS = 2**31 - 1          # math.MaxInt32: what kubelet passes with annotations
LATENCY_S = 0.025                        # the plugin's fixed tbf latency (limit = rate*latency + burst)
MIN_BITS, MAX_BITS = 1_000, 10**15       # kubelet rejects < 1k and > 1P
TBF_HANDLE = 0x10000
INGRESS_HANDLE = 0xFFFF0000
ETH_P_ALL = 0x0003
U32_MAX = 2**32 - 1
TCA_EGRESS_REDIR = 1                     # mirred eaction: redirect to the target's egress
TICK_NS = 64                             # psched tick; read from /proc/net/psched when present
QUANTITY_FORM = ("a Kubernetes quantity in bits/s: a number with an optional suffix k, M, G, T, P "
                 "(x1000) or Ki, Mi, Gi, Ti, Pi (x1024), e.g. '1M', '10M', '1G', '512Ki'")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": 1e-3}


def quantity(text, field: str = "bandwidth") -> float:
    """Kubernetes quantity -> bits/s: '10M' -> 1e7, '1Gi' -> 2^30, '1e6' -> 1e6 (1k..1P allowed)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise SpecError(field, text, QUANTITY_FORM)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?|\.\d+)(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?\s*",
                     str(text))
    if not m or (m.group(2) and m.group(3)):
        raise SpecError(field, text, QUANTITY_FORM)
    value = float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1) * _SUFFIX[m.group(3) or ""]
    if not MIN_BITS <= value <= MAX_BITS:
        raise SpecError(field, text, QUANTITY_FORM + " between 1k and 1P (kubelet's bounds)")
    return value


def _tick_ns() -> float:
    try:
        t2us, us2t, _res, _hz = (int(x, 16) for x in open("/proc/net/psched").read().split())
        return us2t / t2us * 1000.0
    except (OSError, ValueError):
        return TICK_NS


@dataclass(frozen=True)
class TbfParams:
    """What the plugin would configure: rate (bytes/s), buffer (psched ticks), limit (bytes)."""

    rate_bytes: int
    buffer_ticks: int
    limit_bytes: int
    burst_bytes: int

    @classmethod
    def plugin(cls, rate_bits: float, burst_bits: int = KUBELET_BURST_BITS) -> "TbfParams":
        rate = int(rate_bits // 8)
        if rate <= 0:
            raise SpecError("rate", rate_bits, "at least 8 bits/s")
        burst = int(burst_bits // 8)
        ticks = burst * 1e6 / rate * (1000.0 / _tick_ns())     # time2tick(µs)
        limit = int(rate * LATENCY_S) + burst
        return cls(rate, min(int(ticks), U32_MAX), min(limit, U32_MAX), burst)

    def effective_burst_bytes(self) -> float:
        """Bytes a full bucket holds (what a fresh pod can send at line rate): buffer time x rate."""
        return self.rate_bytes * self.buffer_ticks * _tick_ns() * 1e-9


@dataclass(frozen=True)
class Shaping:
    """What was installed for one pod (None fields: direction not limited)."""

    netns: str
    host_if: str
    ingress_bits: float | None
    egress_bits: float | None
    ifb: str | None

    def limit(self, direction: str) -> float | None:
        return {"ingress": self.ingress_bits, "egress": self.egress_bits}[direction]


def limits_from(annotations: dict | None) -> tuple[float | None, float | None]:
    """(ingress bits/s, egress bits/s) from pod annotations; SpecError naming the annotation."""
    a = annotations or {}
    ing = quantity(a[INGRESS_KEY], INGRESS_KEY) if INGRESS_KEY in a else None
    eg = quantity(a[EGRESS_KEY], EGRESS_KEY) if EGRESS_KEY in a else None
    return ing, eg


def ifb_name(host_if: str) -> str:
    return ("bwp" + host_if)[:15]


def _tbf(ipr, index: int, p: TbfParams) -> None:
    # pyroute2 turns (rate, burst) into buffer ticks itself: hand it the burst giving our ticks
    tick_us = 1000.0 / _tick_ns()
    burst = (min(p.buffer_ticks, U32_MAX - 4096) / tick_us) * p.rate_bytes / 1e6
    ipr.tc("add", "tbf", index, TBF_HANDLE, rate=p.rate_bytes, burst=burst, limit=p.limit_bytes)


def _tbf_rate_of(ipr, index: int) -> int | None:
    for msg in ipr.get_qdiscs(index=index):
        if msg.get_attr("TCA_KIND") == "tbf" and msg["parent"] == TC_H_ROOT:
            return msg.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")["rate"]
    return None


def install(netns: str, host_if: str, ingress_bits: float | None, egress_bits: float | None,
            burst_bits: int = KUBELET_BURST_BITS) -> Shaping:
    """Install the plugin's qdiscs for one pod and read the rates back; InfrastructureError on failure."""
    ifb = ifb_name(host_if) if egress_bits else None
    try:
        with netns_access.rtnl(netns) as ipr:
            dev = netns_access.link_index(ipr, netns, host_if, "bandwidth: ")
            if ingress_bits:
                _tbf(ipr, dev, TbfParams.plugin(ingress_bits, burst_bits))
            if egress_bits:
                mtu = ipr.get_links(dev)[0].get_attr("IFLA_MTU")
                ipr.link("add", ifname=ifb, kind="ifb")
                idx = ipr.link_lookup(ifname=ifb)[0]
                ipr.link("set", index=idx, state="up", mtu=mtu)
                _tbf(ipr, idx, TbfParams.plugin(egress_bits, burst_bits))
                ipr.tc("add", "ingress", dev)
                ipr.tc("add-filter", "u32", dev, parent=INGRESS_HANDLE, prio=1, protocol=ETH_P_ALL,
                       target=0x10001, keys=["0x0/0x0+0"],
                       action=[{"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": idx}])
            shaping = Shaping(netns, host_if, ingress_bits, egress_bits, ifb)
            _verify(ipr, shaping)
            return shaping
    except NetlinkError as e:
        remove(Shaping(netns, host_if, ingress_bits, egress_bits, ifb))
        raise InfrastructureError(f"bandwidth shaping on {host_if} in {netns} failed: {e}") from None


def _verify(ipr, s: Shaping) -> None:
    """Read the tbf rates back from the kernel; they must be exactly what the plugin computes."""
    checks = []
    if s.ingress_bits:
        checks.append(("ingress", s.host_if, TbfParams.plugin(s.ingress_bits).rate_bytes))
    if s.egress_bits:
        checks.append(("egress", s.ifb, TbfParams.plugin(s.egress_bits).rate_bytes))
    for direction, ifname, want in checks:
        got = _tbf_rate_of(ipr, ipr.link_lookup(ifname=ifname)[0])
        if got != want:
            raise InfrastructureError(f"bandwidth {direction}: tbf on {ifname} holds rate {got} B/s, "
                                      f"configured {want} B/s")


def _redirect_targets(ipr, index: int) -> list[int]:
    """Interfaces the ingress qdisc of ``index`` redirects every packet to (u32 + mirred egress
    redirect, as the bandwidth plugin installs it), in filter order."""
    out = []
    for f in ipr.get_filters(index=index, parent=INGRESS_HANDLE):
        opts = f.get_attr("TCA_OPTIONS")
        acts = opts.get_attr("TCA_U32_ACT") if opts is not None else None
        for _, act in (acts["attrs"] if acts is not None else ()):
            if act.get_attr("TCA_ACT_KIND") != "mirred":
                continue
            parms = act.get_attr("TCA_ACT_OPTIONS").get_attr("TCA_MIRRED_PARMS")
            if parms and parms["eaction"] == TCA_EGRESS_REDIR and parms["ifindex"] not in out:
                out.append(parms["ifindex"])
    return out


def _egress_ifb(ipr, host_if: str) -> int | None:
    """Index of the device that shapes what the pod sends: where the host veth's ingress redirects
    (the plugin's ifb, whatever its name), else an ifb named ``ifb_name(host_if)``."""
    dev = ipr.link_lookup(ifname=host_if)
    targets = _redirect_targets(ipr, dev[0]) if dev else []
    if targets:
        return targets[0]
    ifb = ipr.link_lookup(ifname=ifb_name(host_if))
    return ifb[0] if ifb else None


def read(netns: str, host_if: str) -> dict:
    """Rates (bits/s) the kernel holds for a pod: {'ingress': x | None, 'egress': y | None}.
    ``netns``: a name under /run/netns or a namespace path (a kind node's /proc/<pid>/ns/net)."""
    with netns_access.rtnl(netns) as ipr:
        dev = ipr.link_lookup(ifname=host_if)
        ing = _tbf_rate_of(ipr, dev[0]) if dev else None
        ifb = _egress_ifb(ipr, host_if)
        eg = _tbf_rate_of(ipr, ifb) if ifb is not None else None
    return {"ingress": ing * 8 if ing else None, "egress": eg * 8 if eg else None}


def root_qdisc(netns: str, ifname: str) -> str | None:
    """Kind of the root qdisc of ``ifname`` (e.g. 'fq', 'mq', 'noqueue'), None without one."""
    with netns_access.rtnl(netns) as ipr:
        dev = ipr.link_lookup(ifname=ifname)
        for msg in ipr.get_qdiscs(index=dev[0]) if dev else ():
            if msg["parent"] == TC_H_ROOT:
                return msg.get_attr("TCA_KIND")
    return None


def link_mtu(netns: str, host_if: str) -> int:
    """MTU (bytes) of the pod's host-side veth: the frame size the shaper's byte counts are made of."""
    with netns_access.rtnl(netns) as ipr:
        dev = netns_access.link_index(ipr, netns, host_if, "bandwidth: ")
        return ipr.get_links(dev)[0].get_attr("IFLA_MTU")


def remove(s: Shaping) -> None:
    """Remove the qdiscs and the ifb of one pod (also a CNI plugin's, found by its redirect).
    Idempotent; a vanished namespace is fine."""
    try:
        with netns_access.rtnl(s.netns) as ipr:
            ifb = _egress_ifb(ipr, s.host_if)
            dev = ipr.link_lookup(ifname=s.host_if)
            for call in (lambda: ipr.tc("del", "ingress", dev[0]),
                         lambda: ipr.tc("del", index=dev[0], parent=TC_H_ROOT, handle=0)):
                if dev:
                    try:
                        call()
                    except NetlinkError:
                        pass
            if ifb is not None:
                ipr.link("del", index=ifb)
    except (OSError, NetlinkError):
        pass


def apply_annotations(netns: str, host_if: str, annotations: dict | None) -> Shaping | None:
    """The provider hook: shape the pod if it has bandwidth annotations (None when it has none)."""
    ingress_bits, egress_bits = limits_from(annotations)
    if ingress_bits is None and egress_bits is None:
        return None
    return install(netns, host_if, ingress_bits, egress_bits)
