"""Detect, at run time, what the running kernel can do for impairments. Never assume.

``detect()`` runs the probe in a thread that unshares a fresh network namespace (the namespace is
the thread's alone; nothing named, nothing to clean up: it goes with the thread and its sockets) and
really tries each feature on its loopback: netem qdisc, ifb device, ingress qdisc + u32 filter +
mirred redirect, and which TCP congestion controls can be selected. The result is cached per
process. (It ran a child interpreter: 0.2 s on the host, ~1.5 s inside user-mode-linux, where it
was part of every guest's boot.)

``uml_available()`` says whether user-mode-linux with sch_netem can be used instead (binary,
module tree with sch_netem.ko, root), without booting it.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import socket
from dataclasses import dataclass, field
from pathlib import Path

from netslo.core import netns_access
from netslo.core.errors import Unsupported

CLONE_NEWNET = 0x40000000
UML_BINARY = Path("/usr/bin/linux")
UML_MODULES = Path("/usr/lib/uml/modules")


@dataclass(frozen=True)
class Capabilities:
    """What this kernel did when asked (True = it worked); ``reasons`` has the kernel's answer otherwise."""

    kernel: str
    netem: bool = False
    ifb: bool = False
    ingress_redirect: bool = False
    congestion_controls: tuple = ()
    reasons: dict = field(default_factory=dict)

    def require(self, *features: str) -> None:
        """Raise Unsupported naming each missing feature and why."""
        missing = [f for f in features if not self.has(f)]
        if missing:
            why = "; ".join(f"{f}: {self.reasons.get(f, 'not available')}" for f in missing)
            raise Unsupported(f"kernel {self.kernel} lacks {', '.join(missing)} ({why})")

    def has(self, feature: str) -> bool:
        if feature in ("bbr", "cubic", "reno"):
            return feature in self.congestion_controls
        return bool(getattr(self, feature.replace("-", "_"), False))

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "netem": self.netem, "ifb": self.ifb,
                "ingress_redirect": self.ingress_redirect, "congestion_controls": list(self.congestion_controls),
                "reasons": dict(self.reasons)}


def _probe() -> dict:
    """Runs in a thread of its own: unshare a netns, try every feature on lo; returns the findings."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        return {"error": f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}"}
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    from netslo.impair import netem
    from netslo.impair.spec import Impairment
    out: dict = {"reasons": {}}
    with IPRoute() as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")
        try:
            ipr.tc("add", "netem", lo, handle=netem.NETEM_HANDLE,
                   netslo_options=netem.netem_options(Impairment(delay=0.001)))
            out["netem"] = True
        except NetlinkError as e:
            out["netem"] = False
            out["reasons"]["netem"] = f"creating a netem qdisc failed: {e.args[-1] if e.args else e}"
        try:
            ipr.link("add", ifname="nslcapifb", kind="ifb")
            ifb = ipr.link_lookup(ifname="nslcapifb")[0]
            out["ifb"] = True
        except NetlinkError as e:
            out["ifb"], ifb = False, None
            out["reasons"]["ifb"] = f"creating an ifb link failed: {e.args[-1] if e.args else e}"
        try:
            ipr.tc("add", "ingress", lo)
            ipr.tc("add-filter", "u32", lo, parent=netem.INGRESS_HANDLE, prio=1, protocol=netem.ETH_P_ALL,
                   target=0x10001, keys=["0x0/0x0+0"], action=[{"kind": "mirred", "direction": "egress", "action": "redirect",
                                                "ifindex": ifb or lo}])
            out["ingress_redirect"] = True
        except NetlinkError as e:
            out["ingress_redirect"] = False
            out["reasons"]["ingress_redirect"] = f"ingress qdisc + u32 + mirred failed: {e.args[-1] if e.args else e}"
    ccs = []
    for cc in ("cubic", "reno", "bbr"):  # per-socket choice (what probes use); loads the module if needed
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
            ccs.append(cc)
        except OSError as e:
            out["reasons"][cc] = f"TCP_CONGESTION {cc} refused: {e.strerror}"
        finally:
            sock.close()
    out["congestion_controls"] = ccs
    return out


@functools.lru_cache(maxsize=1)
def detect() -> Capabilities:
    """Capabilities of the running kernel (tried in one thread, cached)."""
    kernel = platform.release()
    if os.geteuid() != 0:
        return Capabilities(kernel, reasons={k: "needs root" for k in ("netem", "ifb", "ingress_redirect")})
    try:
        found = netns_access.in_thread("netslo-capability", _probe)
    except Exception as e:      # a kernel answer pyroute2 did not expect: the reason, not a crash
        found = {"error": f"capability probe failed: {type(e).__name__}: {e}"}
    if "error" in found:
        return Capabilities(kernel, reasons={k: found["error"] for k in ("netem", "ifb", "ingress_redirect")})
    return Capabilities(kernel, found.get("netem", False), found.get("ifb", False),
                        found.get("ingress_redirect", False), tuple(found.get("congestion_controls", ())),
                        found.get("reasons", {}))


def uml_modules_dir() -> Path | None:
    """The UML module tree that has sch_netem, or None."""
    if not UML_MODULES.is_dir():
        return None
    for d in sorted(UML_MODULES.iterdir(), reverse=True):
        if (d / "kernel/net/sched/sch_netem.ko").exists():
            return d
    return None


def uml_available() -> tuple[bool, str]:
    """(usable, reason). Usable = root, the UML binary and a module tree with sch_netem.ko."""
    if os.geteuid() != 0:
        return False, "user-mode-linux needs root here (hostfs mounts of the run directory)"
    if not (UML_BINARY.exists() and os.access(UML_BINARY, os.X_OK)):
        return False, f"{UML_BINARY} not found (install the Debian package user-mode-linux)"
    mods = uml_modules_dir()
    if mods is None:
        return False, f"no sch_netem.ko under {UML_MODULES} (package user-mode-linux incomplete)"
    return True, f"user-mode-linux {mods.name} with sch_netem"


if __name__ == "__main__":
    print(json.dumps(_probe()))
