"""A bare veth pair between two namespaces (no bridge, no routing): the probe-floor path."""

from __future__ import annotations

import secrets
import subprocess

from pyroute2 import NetNS, netns


class VethPair:
    """Namespaces ``nsl-<rid>-a`` (10.99.0.1) and ``nsl-<rid>-b`` (10.99.0.2) joined by one veth.

    The names follow the netslo run-id scheme, so ``python -m netslo reap`` removes a killed run's pair."""

    def __init__(self):
        import os

        from netslo.providers.netns.cluster import STATE_ROOT
        self.rid = secrets.token_hex(3)
        self.a, self.b = f"nsl-{self.rid}-a", f"nsl-{self.rid}-b"
        (STATE_ROOT / self.rid).mkdir(parents=True, exist_ok=True)
        (STATE_ROOT / self.rid / "owner.pid").write_text(str(os.getpid()))
        netns.create(self.a)
        netns.create(self.b)
        with NetNS(self.a) as ipr:
            ipr.link("add", ifname="eth0", kind="veth", peer={"ifname": "eth0", "net_ns_fd": self.b})
        for ns, ip in ((self.a, "10.99.0.1"), (self.b, "10.99.0.2")):
            with NetNS(ns) as ipr:
                for name in ("lo", "eth0"):
                    ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
                ipr.addr("add", index=ipr.link_lookup(ifname="eth0")[0], address=ip, prefixlen=24)
        self.procs = []

    def argv(self, ns: str, *cmd: str) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{ns}", *cmd]

    def spawn(self, ns: str, *cmd: str) -> subprocess.Popen:
        p = subprocess.Popen(self.argv(ns, *cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def close(self) -> None:
        import shutil

        from netslo.providers.netns.cluster import STATE_ROOT, _kill_all, pids_in_netns
        for p in self.procs:
            p.kill()
            p.wait()
        for ns in (self.a, self.b):
            _kill_all(pids_in_netns(ns))
            netns.remove(ns)
        shutil.rmtree(STATE_ROOT / self.rid, ignore_errors=True)
