"""Removing a qdisc netslo installed: only if it is still netslo's, and checked by re-reading the kernel.

- A root qdisc is netslo's when it has the kind and handle netslo gave it (netem ``1:``, tbf ``1:``).
  Handle ``0:`` is the kernel's default qdisc (noqueue, pfifo_fast, fq_codel...): nothing to remove.
  Anything else was put there behind netslo's back: removal leaves it alone and raises
  ``InfrastructureError`` naming the namespace, the device and what it found.
- The ingress hook (parent ``ffff:fff1``) is netslo's when it holds an ``ingress`` qdisc (netslo's
  ifb redirect); a ``clsact`` there belongs to someone else.
- A delete may fail only as "already absent" (ENOENT, EINVAL, ENODEV); any other netlink error is
  an error. Either way the kernel is read again and what stayed is named.
"""

from __future__ import annotations

import errno

from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import TC_H_ROOT

from netslo.core.errors import InfrastructureError
from netslo.core.netns_access import rtnl

INGRESS_PARENT = 0xFFFFFFF1
ABSENT_ERRNOS = (errno.ENOENT, errno.EINVAL, errno.ENODEV)


def open_netns(netns: str):
    """pyroute2 IPRoute in an existing namespace (name or path), or None when it is gone; never creates one."""
    try:
        return rtnl(netns)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InfrastructureError(f"namespace {netns}: cannot enter it ({e.strerror or e})") from None


def describe(msg) -> str:
    """A qdisc message as tc prints it: kind and handle, e.g. 'tbf 8001:'."""
    if msg is None:
        return "nothing"
    return f"{msg.get_attr('TCA_KIND')} {msg['handle'] >> 16:x}:"


def attached(ipr, index: int, parent: int):
    """The qdisc attached at ``parent`` (TC_H_ROOT or the ingress hook) of interface ``index``, or None."""
    for msg in ipr.get_qdiscs(index=index):
        if msg["parent"] == parent and msg["index"] == index:
            return msg
    return None


def _failed(e: NetlinkError | None) -> str:
    return f" (delete failed: {e})" if e is not None else ""


def remove_root(ipr, index: int, where: str, kind: str, handle: int) -> None:
    """Delete the root qdisc of ``index`` if it is netslo's ``kind`` at ``handle``; then check it is gone.

    ``where`` names the device for messages, e.g. 'eth0 in nsl-1a2b3c-client'."""
    found = attached(ipr, index, TC_H_ROOT)
    if found is None or found["handle"] == 0:
        return  # the kernel's default: netslo's qdisc is already gone
    if found.get_attr("TCA_KIND") != kind or found["handle"] != handle:
        raise InfrastructureError(
            f"{where}: root qdisc is {describe(found)}, not netslo's {kind} {handle >> 16:x}: — it was "
            f"replaced behind netslo's back; left in place")
    err = None
    try:
        ipr.tc("del", index=index, parent=TC_H_ROOT, handle=0)
    except NetlinkError as e:
        if e.code not in ABSENT_ERRNOS:
            err = e
    stayed = attached(ipr, index, TC_H_ROOT)
    if err is not None or (stayed is not None and stayed["handle"] == handle and stayed.get_attr("TCA_KIND") == kind):
        raise InfrastructureError(f"{where}: netslo's {kind} {handle >> 16:x}: not removed{_failed(err)}; "
                                  f"the kernel holds root qdisc {describe(stayed)}")


def remove_ingress(ipr, index: int, where: str) -> None:
    """Delete the ``ingress`` qdisc of ``index`` (netslo's redirect to its ifb); then check it is gone."""
    found = attached(ipr, index, INGRESS_PARENT)
    if found is None:
        return
    if found.get_attr("TCA_KIND") != "ingress":
        raise InfrastructureError(f"{where}: the ingress hook holds {describe(found)}, not netslo's ingress "
                                  f"qdisc — it was replaced behind netslo's back; left in place")
    err = None
    try:
        ipr.tc("del", "ingress", index)
    except NetlinkError as e:
        if e.code not in ABSENT_ERRNOS:
            err = e
    stayed = attached(ipr, index, INGRESS_PARENT)
    if err is not None or stayed is not None:
        raise InfrastructureError(f"{where}: netslo's ingress qdisc not removed{_failed(err)}; "
                                  f"the ingress hook holds {describe(stayed)}")


def remove_link(ipr, ifname: str, where: str) -> None:
    """Delete interface ``ifname`` (one netslo created, e.g. its ifb); then check it is gone."""
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        return
    err = None
    try:
        ipr.link("del", index=found[0])
    except NetlinkError as e:
        if e.code not in ABSENT_ERRNOS:
            err = e
    if err is not None or ipr.link_lookup(ifname=ifname):
        raise InfrastructureError(f"{where}: netslo's interface {ifname} not removed{_failed(err)}; it still exists")
