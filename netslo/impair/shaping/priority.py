"""A QoS policy as data, applied as htb classes with u32 DSCP filters on a node uplink (bottleneck).

Policy (``qos.priority`` in slo-qos.yaml; rates in bits/s with units)::

    link: 20mbit                # the bottleneck: htb root class 1:1 rate = ceil = link
    queue: 50ms                 # per leaf bfifo, in time at the class ceil (bytes, so GSO bursts count)
    burst: 16KiB                # htb burst/cburst of every class (bytes)
    classes:
      - {name: ef, dscp: [EF], rate: 4mbit, ceil: 20mbit, prio: 0}
      - {name: be, default: true, rate: 16mbit, ceil: 20mbit, prio: 1}

Installed as: htb 1: (default = the default class) -> class 1:1 -> leaf classes 1:10, 1:11, ... in the
order given, each with a bfifo of ``queue`` x ceil bytes (at least 3 x 64 KiB: a GSO packet from a pod
is up to 64 KiB on veth); one u32 filter per DSCP value (protocol IP).
``flat(policy)`` is the control: the same link and queue in one class, nothing prioritized.

``control``: TCP ports of the cluster's own control traffic leaving the node (("sport", 10250): the
kubelet's API, which carries the exec streams that start netslo's probes and bring their samples back;
("dport", 6443): the kubelet's requests to the API server). Such segments go to class 1:2, a sibling of
the link class 1:1 at 1 Gbit/s, so they neither queue behind the bulk flow the study runs nor take the
link's bandwidth: the pod traffic under test is what the bottleneck holds, and a probe's samples are
not held seconds after its schedule (on kind: 2.4-4.7 s per measurement of the control run, where
the bulk flow filled the 75-100 ms queue its samples had to pass). Matched as IPv4 without options,
protocol TCP, the port at byte 20 (source) or 22 (destination); filters before the DSCP filters.

Where the mark is matched (``layer``):
  ip            the IPv4 TOS byte (byte 1 of the packet): DSCP bits = mask 0xfc
  vxlan-inner   the inner IPv4 TOS of VXLAN (UDP dport ``port``: 4789 by default, Cilium's 8472; outer
                IPv4 without options): byte 51, for an uplink where the tunnel does not copy DSCP to
                the outer header

Every filter is read back with ``tc filter show`` (an implementation independent of pyroute2, whose
u32 key string silently accepts a TOS key written at the wrong byte) and compared byte by byte.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from dataclasses import dataclass, field, replace

from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.tcmsg import plugins as tc_plugins

from netslo.core import netns_access, units
from netslo.core.errors import InfrastructureError, SpecError
from netslo.impair import teardown
from netslo.impair.shaping.qdiscs import clear_root
from netslo.traffic.dscp import DSCP_NAMES, tos_byte

ROOT, PARENT = 0x10000, 0x10001
CONTROL = 0x10002           # class 1:2, the cluster's control traffic (see ``control``), beside 1:1
CONTROL_BITS = 1e9          # its rate = ceil: htb needs numbers; far above what the control traffic sends
                            # (quantum 200000 B: htb's largest without a "quantum is big" warning)
CONTROL_DIRECTIONS = {"sport": 20, "dport": 22}     # byte offset of the TCP port (IPv4 without options)
FIRST_LEAF = 0x10
ETH_P_IP = 0x0800
VXLAN_PORT = 4789
LAYERS = ("ip", "vxlan-inner")
MIN_QUEUE_BYTES = 3 * 65536

tc_plugins.setdefault("bfifo", tc_plugins["pfifo"])  # same options (limit), in bytes


@dataclass(frozen=True)
class QosClass:
    """One htb leaf class: guaranteed ``rate``, borrowing up to ``ceil`` (bits/s), ``prio`` 0 = first."""

    name: str
    rate_bits: float
    ceil_bits: float
    prio: int
    dscp: tuple = ()            # DSCP values 0..63 this class matches
    default: bool = False


@dataclass(frozen=True)
class QosPolicy:
    link_bits: float
    classes: tuple
    queue_s: float = 0.05
    burst_bytes: int = 16 * 1024

    def queue_bytes(self, cls: QosClass) -> int:
        """bfifo limit of a class: ``queue_s`` at its ceil, at least three 64 KiB GSO packets."""
        return max(int(cls.ceil_bits / 8 * self.queue_s), MIN_QUEUE_BYTES)

    @property
    def default_class(self) -> QosClass:
        return next(c for c in self.classes if c.default)

    def class_of(self, dscp: int) -> QosClass:
        """The class a packet with this DSCP lands in."""
        return next((c for c in self.classes if dscp in c.dscp), self.default_class)


def flat(policy: QosPolicy) -> QosPolicy:
    """The control: same link rate and queue, one class, no DSCP filter."""
    one = QosClass("all", policy.link_bits, policy.link_bits, 0, (), True)
    return replace(policy, classes=(one,))


# ---- parsing --------------------------------------------------------------------------------------

def _rate(doc: dict, key: str, where: str) -> float:
    if key not in doc:
        raise SpecError(f"{where}.{key}", None, "a rate with a unit, e.g. '20mbit'")
    value = units.rate(doc[key], f"{where}.{key}")
    if value <= 0:
        raise SpecError(f"{where}.{key}", doc[key], "a rate > 0, e.g. '20mbit'")
    return value


def parse_policy(doc, where: str = "qos.priority") -> QosPolicy:
    """Validated policy; every problem is one SpecError naming field, value and expected form."""
    if not isinstance(doc, dict):
        raise SpecError(where, doc, "a mapping with link, classes and optionally queue")
    unknown = sorted(set(doc) - {"link", "queue", "burst", "classes"})
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}", doc[unknown[0]], "one of the keys link, queue, burst, classes")
    link = _rate(doc, "link", where)
    queue = units.duration(doc.get("queue", "50ms"), f"{where}.queue")
    if not 0 < queue <= 10:
        raise SpecError(f"{where}.queue", doc.get("queue"), "a duration from above 0 to 10s, e.g. '50ms'")
    burst = units.size(doc.get("burst", "16KiB"), f"{where}.burst")
    if not 1600 <= burst <= 16 * 2**20:
        raise SpecError(f"{where}.burst", doc.get("burst"), "a size from 1600 B to 16 MiB, e.g. '16KiB'")
    raw = doc.get("classes")
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{where}.classes", raw, "a non-empty list of classes")
    classes, names, seen = [], set(), {}
    for i, c in enumerate(raw):
        w = f"{where}.classes[{i}]"
        if not isinstance(c, dict):
            raise SpecError(w, c, "a mapping with name, rate, ceil, prio and dscp or default")
        extra = sorted(set(c) - {"name", "rate", "ceil", "prio", "dscp", "default"})
        if extra:
            raise SpecError(f"{w}.{extra[0]}", c[extra[0]], "one of the keys name, rate, ceil, prio, dscp, default")
        name = c.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,15}", name) or name in names:
            raise SpecError(f"{w}.name", name, "a new lowercase name (letters, digits, '-', max 16)")
        names.add(name)
        rate = _rate(c, "rate", w)
        ceil = _rate(c, "ceil", w) if "ceil" in c else link
        if ceil < rate or ceil > link:
            raise SpecError(f"{w}.ceil", c.get("ceil"), f"a rate from the class rate to the link rate ({doc['link']})")
        prio = c.get("prio", 1)
        if isinstance(prio, bool) or not isinstance(prio, int) or not 0 <= prio <= 7:
            raise SpecError(f"{w}.prio", prio, "a whole number 0..7 (0 is served first)")
        default = c.get("default", False)
        if not isinstance(default, bool):
            raise SpecError(f"{w}.default", default, "true or false")
        marks = c.get("dscp", [])
        if isinstance(marks, (str, int)):
            marks = [marks]
        if not isinstance(marks, list) or (not marks and not default):
            raise SpecError(f"{w}.dscp", c.get("dscp"), "a list of DSCP names or numbers (or default: true)")
        dscps = []
        for m in marks:
            d = tos_byte(m, f"{w}.dscp") >> 2
            if d in seen:
                raise SpecError(f"{w}.dscp", m, f"a DSCP not already matched by class {seen[d]}")
            seen[d] = name
            dscps.append(d)
        classes.append(QosClass(name, rate, ceil, prio, tuple(dscps), default))
    defaults = [c.name for c in classes if c.default]
    if len(defaults) != 1:
        raise SpecError(f"{where}.classes", defaults, "exactly one class with default: true")
    if sum(c.rate_bits for c in classes) > link * 1.0001:
        raise SpecError(f"{where}.classes", "sum of rates", f"class rates adding up to at most link ({doc['link']})")
    return QosPolicy(link, tuple(classes), queue, burst)


# ---- u32 keys ---------------------------------------------------------------------------------------

def match_bytes(dscp: int, layer: str, port: int = VXLAN_PORT) -> dict:
    """{byte offset: (value, mask)} a packet must match for this DSCP at this layer (``port``: the
    VXLAN UDP destination port of a vxlan-inner match)."""
    tos = (dscp << 2) & 0xFC
    if layer == "ip":
        return {1: (tos, 0xFC)}
    if layer == "vxlan-inner":
        return {22: (port >> 8, 0xFF), 23: (port & 0xFF, 0xFF),               # outer UDP dport
                48: (0x08, 0xFF), 49: (0x00, 0xFF),                            # inner ethertype IPv4
                50: (0x45, 0xFF), 51: (tos, 0xFC)}                             # inner IPv4, no options; TOS
    raise SpecError("layer", layer, f"one of {', '.join(LAYERS)}")


def control_match(direction: str, port: int) -> dict:
    """{byte offset: (value, mask)} of an IPv4 TCP segment (no IP options) with source ("sport") or
    destination ("dport") port ``port``."""
    if direction not in CONTROL_DIRECTIONS:
        raise SpecError("control direction", direction, f"one of {', '.join(CONTROL_DIRECTIONS)}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise SpecError(f"control {direction}", port, "a TCP port 1..65535")
    off = CONTROL_DIRECTIONS[direction]
    return {0: (0x45, 0xFF), 9: (6, 0xFF), off: (port >> 8, 0xFF), off + 1: (port & 0xFF, 0xFF)}


def u32_keys(match: dict) -> list[str]:
    """pyroute2 key strings 'val/mask+off' (32-bit words at 4-byte aligned offsets)."""
    words: dict[int, list] = {}
    for off, (val, mask) in match.items():
        w = words.setdefault(off - off % 4, [0, 0])
        shift = 8 * (3 - off % 4)
        w[0] |= val << shift
        w[1] |= mask << shift
    return [f"0x{v:08x}/0x{m:08x}+{off}" for off, (v, m) in sorted(words.items())]


def key_bytes(val: int, mask: int, off: int) -> dict:
    """A u32 key as ``tc`` prints it (match VAL/MASK at OFF) -> {byte offset: (value, mask)}."""
    out = {}
    for i in range(4):
        shift = 8 * (3 - i)
        m = (mask >> shift) & 0xFF
        if m:
            out[off + i] = ((val >> shift) & m, m)
    return out


# ---- install / read back ------------------------------------------------------------------------------

def _classid(i: int) -> int:
    return 0x10000 | (FIRST_LEAF + i)


def flowid(classid: int) -> str:
    """A class handle as ``tc`` prints it (0x10010 -> '1:10')."""
    return f"{classid >> 16:x}:{classid & 0xFFFF:x}"


def _tc_show(netns: str, ifname: str) -> str:
    run = subprocess.run(["nsenter", f"--net={netns_access.path_of(netns)}", "tc", "filter", "show", "dev", ifname],
                         capture_output=True, text=True, timeout=30)
    if run.returncode:
        raise InfrastructureError(f"tc filter show dev {ifname} in {netns} failed: {run.stderr.strip()}")
    return run.stdout


def read_filters(netns: str, ifname: str) -> list[dict]:
    """Filters on the htb root as the kernel holds them: [{'flowid': '1:10', 'match': {byte: (v, m)}}]."""
    found, cur = [], None
    for line in _tc_show(netns, ifname).splitlines():
        m = re.search(r"flowid (\S+)", line)
        if m:
            cur = {"flowid": m.group(1), "match": {}}
            found.append(cur)
            continue
        m = re.search(r"match ([0-9a-f]{8})/([0-9a-f]{8}) at (-?\d+)", line)
        if m and cur is not None:
            cur["match"].update(key_bytes(int(m.group(1), 16), int(m.group(2), 16), int(m.group(3))))
    return found


@dataclass
class Installed:
    """What ``install`` put on the interface and read back."""

    netns: str
    ifname: str
    policy: QosPolicy
    layer: str
    filters: list = field(default_factory=list)
    port: int = VXLAN_PORT
    control: tuple = ()         # (("sport"|"dport", port), ...) in class 1:2

    def flowid(self, cls: QosClass) -> str:
        return flowid(_classid(self.policy.classes.index(cls)))


def install(netns: str, ifname: str, policy: QosPolicy, layer: str = "ip", keys=u32_keys,
            port: int = VXLAN_PORT, control=()) -> Installed:
    """Replace the root qdisc of ``ifname`` with the policy's htb tree (and class 1:2 for the
    ``control`` ports); verify the filters read back."""
    if layer not in LAYERS:
        raise SpecError("layer", layer, f"one of {', '.join(LAYERS)}")
    control = tuple((d, p) for d, p in control)
    matches = [control_match(d, p) for d, p in control]   # bad input refused before anything is installed
    inst = Installed(netns, ifname, policy, layer, port=port, control=control)
    try:
        with netns_access.rtnl(netns) as ipr:
            dev = netns_access.link_index(ipr, netns, ifname)
            teardown.remove_root(ipr, dev, f"{ifname} in {netns}", "htb", ROOT)  # never a foreign qdisc
            default_i = policy.classes.index(policy.default_class)
            ipr.tc("add", "htb", dev, ROOT, default=FIRST_LEAF + default_i)
            b = policy.burst_bytes
            ipr.tc("add-class", "htb", dev, PARENT, parent=ROOT, rate=int(policy.link_bits // 8),
                   ceil=int(policy.link_bits // 8), burst=b, cburst=b)
            for i, c in enumerate(policy.classes):
                ipr.tc("add-class", "htb", dev, _classid(i), parent=PARENT, rate=int(c.rate_bits // 8),
                       ceil=int(c.ceil_bits // 8), prio=c.prio, burst=b, cburst=b)
                ipr.tc("add", "bfifo", dev, (0x100 + i) << 16, parent=_classid(i), limit=policy.queue_bytes(c))
            pref = 1
            if control:
                ipr.tc("add-class", "htb", dev, CONTROL, parent=ROOT, rate=int(CONTROL_BITS // 8),
                       ceil=int(CONTROL_BITS // 8), prio=0, burst=b, cburst=b, quantum=200_000)
            for match in matches:
                ipr.tc("add-filter", "u32", dev, parent=ROOT, prio=pref, protocol=ETH_P_IP, target=CONTROL,
                       keys=keys(match))
                pref += 1
            for i, c in enumerate(policy.classes):
                for d in c.dscp:
                    ipr.tc("add-filter", "u32", dev, parent=ROOT, prio=pref, protocol=ETH_P_IP,
                           target=_classid(i), keys=keys(match_bytes(d, layer, port)))
                    pref += 1
    except NetlinkError as e:
        clear_root(netns, ifname, "htb")
        raise InfrastructureError(f"htb policy on {ifname} in {netns} failed: {e}") from None
    try:
        inst.filters = read_filters(netns, ifname)
        _verify(inst)
    except BaseException:
        clear_root(netns, ifname, "htb")
        raise
    return inst


def _verify(inst: Installed) -> None:
    want = sorted([(inst.flowid(c), tuple(sorted(match_bytes(d, inst.layer, inst.port).items())))
                   for c in inst.policy.classes for d in c.dscp]
                  + [(flowid(CONTROL), tuple(sorted(control_match(d, p).items()))) for d, p in inst.control])
    got = sorted((f["flowid"], tuple(sorted(f["match"].items()))) for f in inst.filters)
    if want != got:
        def show(items):
            return "; ".join(f"{fid} <- " + ",".join(f"byte {o}&{m:#04x}=={v:#04x}" for o, (v, m) in match)
                             for fid, match in items) or "none"
        raise InfrastructureError(f"u32 filters on {inst.ifname} in {inst.netns} read back as [{show(got)}], "
                                  f"configured [{show(want)}]")


@contextlib.contextmanager
def installed(netns: str, ifname: str, policy: QosPolicy, layer: str = "ip", control=()):
    """The policy on ``ifname`` for the ``with`` block, removed afterwards (also on failure)."""
    inst = install(netns, ifname, policy, layer, control=control)
    try:
        yield inst
    finally:
        clear_root(netns, ifname, "htb")


def class_counters(netns: str, ifname: str) -> dict:
    """{flowid: bytes sent} per htb class (to show which class carried what)."""
    out = {}
    with netns_access.rtnl(netns) as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return out
        for c in ipr.get_classes(index=found[0]):
            h = c["handle"]
            basic = (c.get_attr("TCA_STATS2") or {}).get_attr("TCA_STATS_BASIC") if c.get_attr("TCA_STATS2") else None
            out[flowid(h)] = basic["bytes"] if basic else None
    return out


def dscp_name(dscp: int) -> str:
    names = [k for k, v in DSCP_NAMES.items() if v == dscp and k not in ("BE", "DF")]
    return names[0] if names else str(dscp)
