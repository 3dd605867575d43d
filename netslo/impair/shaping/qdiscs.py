"""Bottlenecks and random loss on a node's links, removed again on exit (also on failure).

- ``bottleneck(netns, ifname, rate_bits, queue_s)``: a root ``tbf`` (rate in bits/s, queue bound in
  seconds of the rate, burst ``BURST_MTUS`` full frames), i.e. a shaped link whose queue adds at most
  ``queue_s`` of delay. Read back from the kernel; InfrastructureError if it holds another rate.
- ``netfilter_rule(netns, table, chain, spec)``: one iptables rule (e.g. ``-m statistic`` random drop,
  ``-j DSCP``) tagged with a comment; ``packets()`` reads how many packets it matched (exact count).
- ``install_tbf`` / ``drop_rules(...).add()``: the same without the ``with`` block, for a node agent
  that installs in one call and removes in another (``netslo.impair.shaping.node_links``).

``netns``: a name under /run/netns or a namespace path (``/proc/self/ns/net``: this process's own).

Used for what this kernel can do without sch_netem: a bandwidth bottleneck (tbf/htb) and random loss
(xt_statistic). Delay needs netem (user-mode-linux, see ``netslo.providers.netns.uml``).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from dataclasses import dataclass

from pyroute2.netlink.exceptions import NetlinkError

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.netns_access import link_index, path_of
from netslo.impair import teardown

BURST_MTUS = 4
ROOT_HANDLE = 0x10000
COMMENT = "netslo-qos"


def clear_root(netns: str, ifname: str, kind: str = "tbf") -> None:
    """Remove the root qdisc of ``kind`` at handle 1: netslo put on ``ifname`` (tbf here, htb for
    ``netslo.impair.shaping.priority``) and read the kernel again; already gone is fine.

    InfrastructureError naming the device and what stayed when the delete fails, or when the root
    qdisc is no longer netslo's (replaced behind its back: left in place)."""
    ipr = teardown.open_netns(netns)
    if ipr is None:
        return
    with ipr:
        found = ipr.link_lookup(ifname=ifname)
        if found:
            teardown.remove_root(ipr, found[0], f"{ifname} in {netns}", kind, ROOT_HANDLE)


@dataclass(frozen=True)
class Bottleneck:
    """A tbf bottleneck as installed: rate (bits/s), queue limit (bytes), burst (bytes)."""

    netns: str
    ifname: str
    rate_bits: float
    limit_bytes: int
    burst_bytes: int

    @property
    def max_queue_delay(self) -> float:
        """Seconds a full queue adds (limit / rate)."""
        return self.limit_bytes * 8 / self.rate_bits


def install_tbf(netns: str, ifname: str, rate_bits: float, queue_s: float = 0.05) -> Bottleneck:
    """Root tbf on ``ifname`` (replacing netslo's own, never a foreign one), read back from the
    kernel; InfrastructureError (and nothing left behind) when it fails or holds another rate."""
    rate = int(rate_bits // 8)
    ipr = teardown.open_netns(netns)
    if ipr is None:
        raise InfrastructureError(f"tbf bottleneck on {ifname}: namespace {netns} does not exist")
    try:
        with ipr:
            dev = link_index(ipr, netns, ifname)
            mtu = ipr.get_links(dev)[0].get_attr("IFLA_MTU") + 14
            burst = BURST_MTUS * mtu
            limit = max(int(rate * queue_s), 2 * mtu)
            teardown.remove_root(ipr, dev, f"{ifname} in {netns}", "tbf", ROOT_HANDLE)  # never a foreign one
            ipr.tc("add", "tbf", dev, ROOT_HANDLE, rate=rate, burst=burst, limit=limit)
            held = [m.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS") for m in ipr.get_qdiscs(index=dev)
                    if m.get_attr("TCA_KIND") == "tbf"]
    except NetlinkError as e:
        err = f"tbf bottleneck on {ifname} in {netns} failed: {e}"
        try:
            clear_root(netns, ifname)
        except InfrastructureError as undo:
            err += f"; and undoing it failed: {undo}"
        raise InfrastructureError(err) from None
    if not held or held[0]["rate"] != rate or held[0]["limit"] != limit:
        clear_root(netns, ifname)
        raise InfrastructureError(f"tbf on {ifname} in {netns}: kernel holds "
                                  f"{held[0] if held else 'nothing'}, configured rate {rate} B/s limit {limit} B")
    return Bottleneck(netns, ifname, rate * 8.0, limit, burst)


@contextlib.contextmanager
def bottleneck(netns: str, ifname: str, rate_bits: float, queue_s: float = 0.05):
    """Root tbf on ``ifname`` for the ``with`` block; yields the read-back ``Bottleneck``."""
    b = install_tbf(netns, ifname, rate_bits, queue_s)
    try:
        yield b
    finally:
        clear_root(netns, ifname)


# ---- netfilter ---------------------------------------------------------------------------------

def _iptables_run(netns: str, args: list[str]) -> subprocess.CompletedProcess:
    argv = ["nsenter", f"--net={path_of(netns)}", "iptables", "-w", "30", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise Unsupported("iptables is not installed (Debian package iptables)") from None
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"iptables {shlex.join(args)} in {netns}: no answer within 60 s") from None


def iptables(netns: str, args: list[str]) -> str:
    """Run iptables in a namespace (waits up to 30 s for the xtables lock); stdout."""
    run = _iptables_run(netns, args)
    if run.returncode:
        raise InfrastructureError(f"iptables {shlex.join(args)} in {netns} failed: {run.stderr.strip()}")
    return run.stdout


class Rule:
    """One iptables rule in a namespace; ``packets()`` = how many packets it matched so far."""

    def __init__(self, netns: str, table: str, chain: str, spec: list[str], tag: str):
        self.netns, self.table, self.chain, self.tag = netns, table, chain, tag
        self.spec = [*spec, "-m", "comment", "--comment", tag]

    def packets(self) -> int:
        out = iptables(self.netns, ["-t", self.table, "-L", self.chain, "-v", "-x", "-n"])
        for line in out.splitlines():
            if f"/* {self.tag} */" in line:
                return int(line.split()[0])
        raise InfrastructureError(f"iptables rule {self.tag} not found in {self.table}/{self.chain} of {self.netns}")

    def present(self) -> bool:
        """Whether the kernel still holds this rule (``iptables -C``: exit 0 yes, 1 no)."""
        run = _iptables_run(self.netns, ["-t", self.table, "-C", self.chain, *self.spec])
        if run.returncode not in (0, 1):
            raise InfrastructureError(f"iptables rule {self.tag} in {self.table}/{self.chain} of {self.netns}: "
                                      f"cannot check it ({run.stderr.strip()})")
        return run.returncode == 0

    def delete(self) -> None:
        """Delete the rule, then check the kernel: InfrastructureError naming the rule when it stayed."""
        run = _iptables_run(self.netns, ["-t", self.table, "-D", self.chain, *self.spec])
        if self.present():
            raise InfrastructureError(f"iptables rule {self.tag} in {self.table}/{self.chain} of {self.netns} "
                                      f"not removed ({run.stderr.strip() or f'exit {run.returncode}'}); it is still there")


@contextlib.contextmanager
def netfilter_rule(netns: str, table: str, chain: str, spec: list[str], tag: str = COMMENT):
    """Append ``spec`` to ``table``/``chain`` for the ``with`` block; yields the ``Rule``."""
    rule = Rule(netns, table, chain, spec, tag)
    iptables(netns, ["-t", table, "-A", chain, *rule.spec])
    try:
        yield rule
    finally:
        rule.delete()


class RandomDrop:
    """A random-drop rule and a counting rule in front of it: realized loss = dropped / matched."""

    def __init__(self, counter: Rule, drop: Rule, probability: float):
        self.counter, self.drop, self.probability = counter, drop, probability

    def counts(self) -> tuple[int, int]:
        """(packets dropped, packets that reached the rule)."""
        return self.drop.packets(), self.counter.packets()

    def add(self, first: bool = False) -> None:
        """Put both rules in the chain: appended, or (``first``) at its head, ahead of a CNI's own
        rules that accept forwarded pod traffic before an appended rule sees it; counter before drop.
        Nothing stays when the second fails."""
        added = []
        try:
            for rule in ((self.drop, self.counter) if first else (self.counter, self.drop)):
                where = ["-I", rule.chain, "1"] if first else ["-A", rule.chain]
                iptables(rule.netns, ["-t", rule.table, *where, *rule.spec])
                added.append(rule)
        except InfrastructureError:
            for rule in added:
                rule.delete()
            raise

    def remove(self) -> None:
        """Delete both (drop first); InfrastructureError naming a rule that stayed."""
        try:
            self.drop.delete()
        finally:
            self.counter.delete()


def drop_rules(netns: str, probability: float, match: list[str], table: str = "filter",
               chain: str = "FORWARD") -> RandomDrop:
    """The counting and random-drop rules for ``match`` (xt_statistic, independent draws), not yet added."""
    if not 0.0 < probability < 1.0:
        raise InfrastructureError(f"random drop: probability {probability} — expected 0 < p < 1")
    spec = [*match, "-m", "statistic", "--mode", "random", "--probability", f"{probability:.6f}", "-j", "DROP"]
    return RandomDrop(Rule(netns, table, chain, list(match), f"{COMMENT}-seen"),
                      Rule(netns, table, chain, spec, f"{COMMENT}-drop"), probability)


@contextlib.contextmanager
def random_drop(netns: str, probability: float, match: list[str], chain: str = "FORWARD"):
    """Drop packets matching ``match`` with this probability (xt_statistic, independent draws).

    Netfilter sees one GSO/TSO packet as one packet: turn segmentation offloads off at the sender
    (``offloads_off``) when the loss must apply per TCP segment."""
    rules = drop_rules(netns, probability, match, chain=chain)
    rules.add()
    try:
        yield rules
    finally:
        rules.remove()


@contextlib.contextmanager
def offloads_off(cluster, pod, ifname: str = "eth0"):
    """TSO/GSO off on the pod's ``ifname`` for the ``with`` block (one packet = one segment), then on
    again; ``ethtool`` run as root in the pod's namespace by the cluster (``exec_in``)."""
    def ethtool(state: str) -> None:
        cluster.exec_in(pod, ["ethtool", "-K", ifname, "tso", state, "gso", state], 30)
    ethtool("off")
    try:
        yield
    finally:
        ethtool("on")
