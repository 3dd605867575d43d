"""Which network namespace holds a pod's IP: the lookup a node agent does before touching a pod.

Container runtimes bind-mount each pod's network namespace under ``/var/run/netns`` (containerd:
``cni-<uuid>``). ``find(ip)`` enters each of them (setns: needs CAP_SYS_ADMIN) and returns the one
whose interfaces hold ``ip``, with the interface that holds it. Other namespaces on the machine may
hold the same address (another tool's test namespaces, a second cluster on the same host): when more
than one does, only those whose interface is a veth whose peer lives in *this* process's namespace
(the node's, for a hostNetwork pod) count; if that still leaves zero or several, it is an error
naming them, never a guess.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from netslo.core.errors import InfrastructureError, SpecError
from netslo.core.netns_access import NETNS_RUN_DIR, rtnl


@dataclass(frozen=True)
class PodNetns:
    """A namespace that holds the address: its name under the run dir, the interface and its index."""

    name: str
    ifname: str
    index: int
    peer_index: int | None = None   # veth: the peer's ifindex (IFLA_LINK)
    peer_nsid: int | None = None    # veth: the peer namespace's id as this namespace sees it


def check_ip(text: str, field: str = "--pod-ip") -> str:
    """The address in canonical form; SpecError naming the field otherwise."""
    try:
        return str(ipaddress.ip_address(str(text).strip()))
    except ValueError:
        raise SpecError(field, text, "an IPv4 or IPv6 address, e.g. 10.244.0.7") from None


def _holder(path: str, ip: str) -> PodNetns | None:
    """The interface of namespace ``path`` that holds ``ip`` (None if none does)."""
    with rtnl(path) as ipr:
        for a in ipr.get_addr():
            if ip not in (a.get_attr("IFA_ADDRESS"), a.get_attr("IFA_LOCAL")):
                continue
            link = ipr.get_links(a["index"])[0]
            return PodNetns(os.path.basename(path), link.get_attr("IFLA_IFNAME"), a["index"],
                            link.get_attr("IFLA_LINK"), link.get_attr("IFLA_LINK_NETNSID"))
    return None


def _peer_is_here(path: str, found: PodNetns) -> bool:
    """True when ``found``'s interface is a veth whose peer is in this process's namespace."""
    if found.peer_index is None:
        return False
    with IPRoute() as own:
        peer = own.get_links(found.peer_index) if own.link_lookup(index=found.peer_index) else []
        if not peer:
            return False
        fd = os.open(path, os.O_RDONLY)
        try:
            nsid = (own.get_netnsid(fd=fd) or {}).get("nsid")
        finally:
            os.close(fd)
        # the peer, seen from here, points back at the pod's interface inside the pod's namespace
        return (nsid is not None and nsid >= 0 and peer[0].get_attr("IFLA_LINK_NETNSID") == nsid
                and peer[0].get_attr("IFLA_LINK") == found.index)


def find(ip: str, run_dir: str = NETNS_RUN_DIR) -> PodNetns:
    """The namespace under ``run_dir`` whose interfaces hold ``ip``; InfrastructureError otherwise."""
    ip = check_ip(ip)
    try:
        names = sorted(os.listdir(run_dir))
    except OSError as e:
        raise InfrastructureError(f"netns lookup: cannot list {run_dir} ({e.strerror}); is the host's "
                                  f"{NETNS_RUN_DIR} mounted?") from None
    hits, unreadable = [], []
    for name in names:
        path = os.path.join(run_dir, name)
        try:
            found = _holder(path, ip)
        except (OSError, NetlinkError) as e:  # not a namespace file, vanished, or no permission
            unreadable.append(f"{name} ({getattr(e, 'strerror', None) or e})")
            continue
        if found is not None:
            hits.append((path, found))
    if len(hits) > 1:
        hits = [(p, f) for p, f in hits if _peer_is_here(p, f)] or hits
    if len(hits) == 1:
        return hits[0][1]
    if hits:
        raise InfrastructureError(f"netns lookup: {ip} is held by {len(hits)} namespaces under {run_dir} "
                                  f"({', '.join(f.name for _, f in hits)}), none of them uniquely "
                                  "joined to this node's namespace by a veth")
    why = f"; could not enter {', '.join(unreadable[:3])}" if unreadable else ""
    raise InfrastructureError(f"netns lookup: no namespace under {run_dir} holds {ip} "
                              f"({len(names)} namespaces searched{why})")
