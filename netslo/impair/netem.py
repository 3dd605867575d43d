"""Apply and remove netem with pyroute2, and read back what the kernel holds.

pyroute2 0.9.7's netem codec has no delay distribution, no Gilbert-Elliott loss and no 64-bit
delay attributes, so this module registers a complete codec under the kind ``netem`` (same
netlink messages as ``tc qdisc ... netem``; attribute layout from ``linux/pkt_sched.h``):

    TCA_OPTIONS = struct tc_netem_qopt {latency, limit, loss, gap, duplicate, jitter}  (u32 each)
                  + TCA_NETEM_CORR {delay, loss, dup} + TCA_NETEM_DELAY_DIST (s16[])
                  + TCA_NETEM_REORDER / CORRUPT {probability, correlation}
                  + TCA_NETEM_LOSS {NETEM_LOSS_GE {p, r, h, k1}} + TCA_NETEM_RATE {bytes/s, ...}
                  + TCA_NETEM_LATENCY64 / JITTER64 (s64 ns)

Probabilities are u32 fractions of 2^32-1. Delay tables hold 4096 signed 16-bit samples of the
standardised distribution scaled by 8192 (NETEM_DIST_SCALE); netem draws
``delay + jitter * table[rnd] / 8192``. Tables are generated here from their definitions
(``dist_table``); ``uniform`` uses no table (netem's built-in ``delay ± jitter``).

Where the impairment goes is decided by ``NetemController.target`` from the pod and direction.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

import numpy as np
from pyroute2.netlink import nla
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import TC_H_ROOT
from pyroute2.netlink.rtnl.tcmsg import plugins as tc_plugins

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.impair import teardown
from netslo.impair.spec import Impairment

NETEM_DIST_SCALE = 8192
TABLE_SIZE = 4096
U32 = 2**32 - 1
INGRESS_HANDLE = 0xFFFF0000
NETEM_HANDLE = 0x10000
IFB_NAME = "nslifb"
ETH_P_ALL = 0x0003
PSCHED_SHIFT = 6  # kernel: 1 psched tick = 64 ns


# ---- delay distribution tables ------------------------------------------------------------------

def _pareto_std(u: np.ndarray) -> np.ndarray:
    """Pareto (alpha 3, x_m 1) quantiles, centred on its mean 1.5 and scaled by 1/0.75, tc's convention."""
    return ((1.0 - u) ** (-1.0 / 3.0) - 1.5) / 0.75


def _normal_quantiles(u: np.ndarray) -> np.ndarray:
    """Standard normal quantiles of ``u`` (each in (0, 1))."""
    inv = statistics.NormalDist().inv_cdf
    return np.array([inv(float(p)) for p in u])


@functools.lru_cache(maxsize=None)
def dist_table(name: str) -> np.ndarray:
    """The 4096-entry int16 table netem gets for ``name`` (normal, pareto, paretonormal).

    Entry i is the (i+0.5)/4096 quantile of the standardised distribution times 8192, clipped to
    int16 (about ±4 units). paretonormal is 0.25*normal + 0.75*pareto quantile by quantile (tc's
    definition; pareto clipped at 4 first). The normal quantiles come from the standard library
    (``statistics.NormalDist.inv_cdf``, within 2e-15 of scipy's ``norm.ppf``, the same table): importing
    scipy.stats costs ~2.5 s inside user-mode-linux, where the table is built for the first netem."""
    u = (np.arange(TABLE_SIZE) + 0.5) / TABLE_SIZE
    if name == "normal":
        x = _normal_quantiles(u)
    elif name == "pareto":
        x = _pareto_std(u)
    elif name == "paretonormal":
        x = 0.25 * _normal_quantiles(u) + 0.75 * np.minimum(_pareto_std(u), 32767 / NETEM_DIST_SCALE)
    else:
        raise ValueError(f"distribution: value {name!r} — expected normal, pareto or paretonormal")
    return np.clip(np.rint(x * NETEM_DIST_SCALE), -32768, 32767).astype(np.int16)


def delay_model(imp: Impairment, n: int = 200_000, seed: int = 1) -> np.ndarray:
    """Samples (seconds) of the delay netem draws for ``imp`` (before queueing/timer effects)."""
    if not imp.jitter:
        return np.full(1, imp.delay)
    rng = np.random.default_rng(seed)
    if imp.distribution == "uniform":
        d = imp.delay + imp.jitter * rng.uniform(-1.0, 1.0, n)
    else:
        t = dist_table(imp.distribution).astype(np.float64)
        d = imp.delay + imp.jitter * t[rng.integers(0, TABLE_SIZE, n)] / NETEM_DIST_SCALE
    return np.maximum(d, 0.0)


# ---- the netlink codec --------------------------------------------------------------------------

class _NetemOptions(nla):
    """TCA_OPTIONS of netem: tc_netem_qopt followed by attributes (kernel 3.3+ layout)."""

    fields = (("delay", "I"), ("limit", "I"), ("loss", "I"), ("gap", "I"), ("duplicate", "I"),
              ("jitter", "I"))
    nla_map = (
        ("TCA_NETEM_UNSPEC", "none"),
        ("TCA_NETEM_CORR", "netem_corr"),
        ("TCA_NETEM_DELAY_DIST", "cdata"),
        ("TCA_NETEM_REORDER", "netem_prob"),
        ("TCA_NETEM_CORRUPT", "netem_prob"),
        ("TCA_NETEM_LOSS", "netem_loss"),
        ("TCA_NETEM_RATE", "netem_rate"),
        ("TCA_NETEM_ECN", "uint32"),
        ("TCA_NETEM_RATE64", "uint64"),
        ("TCA_NETEM_PAD", "none"),
        ("TCA_NETEM_LATENCY64", "int64"),
        ("TCA_NETEM_JITTER64", "int64"),
        ("TCA_NETEM_SLOT", "hex"),
        ("TCA_NETEM_SLOT_DIST", "hex"),
        ("TCA_NETEM_PRNG_SEED", "uint64"),
    )

    class netem_corr(nla):
        fields = (("delay_corr", "I"), ("loss_corr", "I"), ("dup_corr", "I"))

    class netem_prob(nla):
        fields = (("probability", "I"), ("correlation", "I"))

    class netem_rate(nla):
        fields = (("rate", "I"), ("packet_overhead", "i"), ("cell_size", "I"), ("cell_overhead", "i"))

    class netem_loss(nla):
        nla_map = (("NETEM_LOSS_UNSPEC", "none"), ("NETEM_LOSS_GI", "loss_gi"), ("NETEM_LOSS_GE", "loss_ge"))

        class loss_gi(nla):
            fields = (("p13", "I"), ("p31", "I"), ("p32", "I"), ("p14", "I"), ("p23", "I"))

        class loss_ge(nla):
            fields = (("p", "I"), ("r", "I"), ("h", "I"), ("k1", "I"))


def _u32(fraction: float) -> int:
    return min(U32, max(0, int(round(fraction * U32))))


def _ticks(seconds: float) -> int:
    return min(U32, int(round(seconds * 1e9)) >> PSCHED_SHIFT)


def netem_options(imp: Impairment) -> dict:
    """The TCA_OPTIONS content (pyroute2 nla dict) that realizes ``imp``."""
    attrs = []
    if imp.delay_correlation or imp.loss_correlation or imp.duplicate_correlation:
        attrs.append(["TCA_NETEM_CORR", {"delay_corr": _u32(imp.delay_correlation),
                                         "loss_corr": _u32(imp.loss_correlation),
                                         "dup_corr": _u32(imp.duplicate_correlation)}])
    if imp.jitter and imp.distribution != "uniform":
        attrs.append(["TCA_NETEM_DELAY_DIST", dist_table(imp.distribution).astype("=i2").tobytes()])
    if imp.reorder:
        attrs.append(["TCA_NETEM_REORDER", {"probability": _u32(imp.reorder),
                                            "correlation": _u32(imp.reorder_correlation)}])
    if imp.corrupt:
        attrs.append(["TCA_NETEM_CORRUPT", {"probability": _u32(imp.corrupt),
                                            "correlation": _u32(imp.corrupt_correlation)}])
    if imp.gilbert_elliott:
        g = imp.gilbert_elliott
        attrs.append(["TCA_NETEM_LOSS", {"attrs": [["NETEM_LOSS_GE", {
            "p": _u32(g.p), "r": _u32(g.r), "h": _u32(g.loss_in_bad), "k1": _u32(g.loss_in_good)}]]}])
    if imp.rate:
        bytes_per_s = int(round(imp.rate / 8))
        attrs.append(["TCA_NETEM_RATE", {"rate": min(bytes_per_s, U32), "packet_overhead": 0,
                                         "cell_size": 0, "cell_overhead": 0}])
        if bytes_per_s >= U32:
            attrs.append(["TCA_NETEM_RATE64", bytes_per_s])
    attrs.append(["TCA_NETEM_LATENCY64", int(round(imp.delay * 1e9))])
    attrs.append(["TCA_NETEM_JITTER64", int(round(imp.jitter * 1e9))])
    gap = max(imp.gap, 1) if imp.reorder else 0
    return {"delay": _ticks(imp.delay), "limit": imp.limit, "loss": _u32(imp.loss), "gap": gap,
            "duplicate": _u32(imp.duplicate), "jitter": _ticks(imp.jitter), "attrs": attrs}


class _NetemCodec:
    """A tc plugin (pyroute2's plugin protocol) for kind 'netem' with the full attribute set."""

    parent = TC_H_ROOT
    options = _NetemOptions

    @staticmethod
    def get_parameters(kwarg):
        return kwarg["netslo_options"]

    @staticmethod
    def fix_request(request):
        request.pop("netslo_options", None)


tc_plugins["netem"] = _NetemCodec


# ---- read back ----------------------------------------------------------------------------------

def decode(msg) -> dict:
    """A netem qdisc message -> plain SI dict (what the kernel holds)."""
    opts = msg.get_attr("TCA_OPTIONS")
    out = {"kind": msg.get_attr("TCA_KIND"), "handle": msg["handle"], "parent": msg["parent"]}
    if out["kind"] != "netem" or opts is None:
        return out
    lat64, jit64 = opts.get_attr("TCA_NETEM_LATENCY64"), opts.get_attr("TCA_NETEM_JITTER64")
    out.update(
        delay=(lat64 if lat64 is not None else opts["delay"] << PSCHED_SHIFT) / 1e9,
        jitter=(jit64 if jit64 is not None else opts["jitter"] << PSCHED_SHIFT) / 1e9,
        limit=opts["limit"], loss=opts["loss"] / U32, gap=opts["gap"], duplicate=opts["duplicate"] / U32)
    corr = opts.get_attr("TCA_NETEM_CORR")
    if corr is not None:
        out.update(delay_correlation=corr["delay_corr"] / U32, loss_correlation=corr["loss_corr"] / U32,
                   duplicate_correlation=corr["dup_corr"] / U32)
    for key, attr in (("reorder", "TCA_NETEM_REORDER"), ("corrupt", "TCA_NETEM_CORRUPT")):
        a = opts.get_attr(attr)
        if a is not None:
            out[key], out[f"{key}_correlation"] = a["probability"] / U32, a["correlation"] / U32
    rate = opts.get_attr("TCA_NETEM_RATE")
    rate64 = opts.get_attr("TCA_NETEM_RATE64")
    if rate is not None or rate64 is not None:
        out["rate"] = 8.0 * (rate64 if rate64 is not None else rate["rate"])
    loss = opts.get_attr("TCA_NETEM_LOSS")
    if loss is not None:
        ge = loss.get_attr("NETEM_LOSS_GE")
        if ge is not None:
            out["gilbert_elliott"] = {"p": ge["p"] / U32, "r": ge["r"] / U32, "loss_in_bad": ge["h"] / U32,
                                      "loss_in_good": ge["k1"] / U32}
    return out


def mismatches(imp: Impairment, held: dict) -> list[str]:
    """Fields where the kernel's netem differs from the spec beyond encoding rounding."""
    bad = []

    def cmp(key, want, tol):
        got = held.get(key, 0.0)
        if abs(got - want) > tol:
            bad.append(f"{key} configured {want:g}, kernel holds {got:g}")

    cmp("delay", imp.delay, 1e-9)
    cmp("jitter", imp.jitter, 1e-9)
    for key in ("loss", "duplicate", "reorder", "corrupt", "loss_correlation", "duplicate_correlation",
                "delay_correlation", "reorder_correlation", "corrupt_correlation"):
        cmp(key, getattr(imp, key), 1e-6)
    cmp("rate", imp.rate, 8.0)
    if held.get("limit") != imp.limit:
        bad.append(f"limit configured {imp.limit}, kernel holds {held.get('limit')}")
    if imp.gilbert_elliott:
        g = held.get("gilbert_elliott") or {}
        for key in ("p", "r", "loss_in_bad", "loss_in_good"):
            if abs(g.get(key, -1.0) - getattr(imp.gilbert_elliott, key)) > 1e-6:
                bad.append(f"gilbert_elliott.{key} configured {getattr(imp.gilbert_elliott, key):g}, "
                           f"kernel holds {g.get(key)}")
    return bad


# ---- where an impairment goes --------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Namespace and interface that carry the netem for one (pod, direction)."""

    netns: str
    ifname: str            # interface whose traffic is impaired (pod eth0 or host veth)
    direction: str
    ifb: str | None = None  # for ingress: the ifb device that holds the netem

    @property
    def netem_dev(self) -> str:
        return self.ifb or self.ifname


def _link(ipr, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise InfrastructureError(f"interface {ifname} not found")
    return found[0]


def _explain(e: NetlinkError, what: str) -> Exception:
    if e.code in (2, 95, 22) and "netem" in what:  # ENOENT/EOPNOTSUPP: qdisc kind unknown
        return Unsupported(f"the kernel refused {what} ({e}): sch_netem is missing")
    return InfrastructureError(f"{what} failed: {e}")


def install(target: Target, imp: Impairment) -> dict:
    """Put ``imp`` on ``target`` (replacing an earlier netslo impairment there); returns the read-back.

    A root qdisc that is not netslo's netem (e.g. a tbf someone else put there) is never replaced:
    InfrastructureError naming the device and what it holds."""
    ipr = teardown.open_netns(target.netns)
    if ipr is None:
        raise InfrastructureError(f"netem on {target.netem_dev}: namespace {target.netns} does not exist")
    with ipr:
        dev = _link(ipr, target.ifname)
        if target.ifb:
            if not ipr.link_lookup(ifname=target.ifb):
                try:
                    ipr.link("add", ifname=target.ifb, kind="ifb")
                except NetlinkError as e:
                    raise Unsupported(f"cannot create an ifb device ({e}): ifb is missing") from None
            ifb = _link(ipr, target.ifb)
            ipr.link("set", index=ifb, state="up", mtu=ipr.get_links(dev)[0].get_attr("IFLA_MTU"))
            teardown.remove_ingress(ipr, dev, _where(target, target.ifname))
            try:
                ipr.tc("add", "ingress", dev)
                ipr.tc("add-filter", "u32", dev, parent=INGRESS_HANDLE, prio=1, protocol=ETH_P_ALL,
                       target=0x10001, keys=["0x0/0x0+0"], action=[{"kind": "mirred", "direction": "egress",
                                                    "action": "redirect", "ifindex": ifb}])
            except NetlinkError as e:
                raise _undone(InfrastructureError(f"ingress redirect {target.ifname} -> {target.ifb} in "
                                                  f"{target.netns} failed: {e}"), target)
            dev = ifb
        teardown.remove_root(ipr, dev, _where(target, target.netem_dev), "netem", NETEM_HANDLE)
        try:
            ipr.tc("add", "netem", dev, handle=NETEM_HANDLE, netslo_options=netem_options(imp))
        except NetlinkError as e:
            raise _undone(_explain(e, f"netem on {target.netem_dev} in {target.netns}"), target)
        held = read(target, ipr)
    bad = mismatches(imp, held)
    if bad:
        raise _undone(InfrastructureError(f"impairment not applied: {imp}; {'; '.join(bad)}"), target)
    return held


def _where(target: Target, ifname: str) -> str:
    return f"{ifname} in {target.netns}"


def _undone(err: Exception, target: Target) -> Exception:
    """``err`` after removing what install made so far; a removal that fails too is added to its message."""
    try:
        remove(target)
    except InfrastructureError as e:
        return type(err)(f"{err}; and undoing it failed: {e}")
    return err


def read(target: Target, ipr=None) -> dict:
    """What the kernel holds on the target's netem device: the decoded netem dict ({} if none)."""
    if ipr is None:
        own = teardown.open_netns(target.netns)
        if own is None:
            return {}
        with own:
            return read(target, own)
    found = ipr.link_lookup(ifname=target.netem_dev)
    if not found:
        return {}
    for msg in ipr.get_qdiscs(index=found[0]):
        if msg.get_attr("TCA_KIND") == "netem" and msg["parent"] == TC_H_ROOT:
            return decode(msg)
    return {}


def remove(target: Target) -> None:
    """Remove netslo's netem (for ingress: the ingress redirect and the ifb), then read the kernel again.

    Already gone (namespace, interface or qdisc) is fine. InfrastructureError naming the device and
    what stayed when a delete fails or when the qdisc there is not netslo's (left in place)."""
    ipr = teardown.open_netns(target.netns)
    if ipr is None:
        return  # namespace gone: nothing left to remove
    with ipr:
        dev = ipr.link_lookup(ifname=target.ifname)
        where = _where(target, target.ifname)
        if target.ifb:
            problems = _tried(teardown.remove_ingress, ipr, dev[0], where) if dev else []
            problems += _tried(_remove_ifb, ipr, target)
        else:
            problems = _tried(teardown.remove_root, ipr, dev[0], where, "netem", NETEM_HANDLE) if dev else []
    if problems:
        raise InfrastructureError(f"netem removal ({target.direction}): " + "; ".join(problems))


def _tried(step, *args) -> list[str]:
    """Run one removal step; its InfrastructureError as a message (so the other steps still run)."""
    try:
        step(*args)
    except InfrastructureError as e:
        return [str(e)]
    return []


def _remove_ifb(ipr, target: Target) -> None:
    """Delete netslo's ifb unless its root qdisc was replaced by someone else's (then it stays)."""
    ifb = ipr.link_lookup(ifname=target.ifb)
    if not ifb:
        return
    root = teardown.attached(ipr, ifb[0], TC_H_ROOT)
    if root is not None and root["handle"] != 0 and (
            root.get_attr("TCA_KIND") != "netem" or root["handle"] != NETEM_HANDLE):
        raise InfrastructureError(
            f"{_where(target, target.ifb)}: root qdisc is {teardown.describe(root)}, not netslo's netem "
            f"{NETEM_HANDLE >> 16:x}: — it was replaced behind netslo's back; the ifb and that qdisc left in place")
    teardown.remove_link(ipr, target.ifb, target.netns)


class NetemController:
    """Impairments on the pods of a cluster whose namespaces this process can enter (netns provider).

    ``apply(pod, imp)`` replaces what netslo put on that (pod, direction) before; ``clear()``
    removes everything this controller applied and raises naming what stayed."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.applied: dict[tuple[str, str], Target] = {}

    def target(self, pod, direction: str) -> Target:
        if direction == "egress":
            return Target(self.cluster.netns_of(pod), "eth0", direction)
        if direction == "ingress":
            return Target(self.cluster.netns_of(pod), "eth0", direction, IFB_NAME)
        if direction == "host-egress":
            host_if = getattr(pod, "host_interface", None)
            if pod.host_network or not host_if:
                raise InfrastructureError(f"pod {pod.name} has no host-side veth (hostNetwork pod)")
            return Target(self.cluster.node_netns(pod.node), host_if, direction)
        raise ValueError(f"direction: value {direction!r} — expected egress, host-egress or ingress")

    def apply(self, pod, imp: Impairment) -> dict:
        t = self.target(pod, imp.direction)
        self.applied[(pod.name, imp.direction)] = t
        return install(t, imp)

    def read(self, pod, direction: str) -> dict:
        return read(self.target(pod, direction))

    def remove(self, pod, direction: str) -> None:
        t = self.applied.pop((pod.name, direction), None) or self.target(pod, direction)
        remove(t)

    def clear(self) -> None:
        """Remove every impairment applied; tries all of them, then raises one InfrastructureError
        naming each device where something stayed (each is tried once: it is forgotten either way)."""
        problems = []
        for (pod, _), t in list(self.applied.items()):
            try:
                remove(t)
            except InfrastructureError as e:
                problems.append(f"pod {pod}: {e}")
        self.applied.clear()
        if problems:
            raise InfrastructureError("clearing impairments: " + "; ".join(problems))


def describe_held(held: dict) -> str:
    """Kernel read-back as short text (like ``tc qdisc show``)."""
    if not held:
        return "no netem"
    parts = [f"delay {held.get('delay', 0) * 1e3:g}ms"]
    if held.get("jitter"):
        parts.append(f"±{held['jitter'] * 1e3:g}ms")
    for key in ("loss", "duplicate", "reorder", "corrupt"):
        if held.get(key):
            parts.append(f"{key} {held[key] * 100:.4g}%")
    if held.get("gilbert_elliott"):
        g = held["gilbert_elliott"]
        parts.append("gemodel " + " ".join(f"{k}={v * 100:.4g}%" for k, v in g.items()))
    if held.get("rate"):
        parts.append(f"rate {held['rate'] / 1e6:g}mbit")
    parts.append(f"limit {held.get('limit')}")
    return " ".join(parts)
