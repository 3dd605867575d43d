"""Reach into a network namespace from this process without forking a child.

pyroute2's ``NetNS(name)`` forks a child process that enters the namespace and sends back a
netlink socket; a fork of a large Python process costs ~15 ms on the host and ~0.3 s inside
user-mode-linux, where every page-table change is trapped. Linux keeps the network namespace per
thread (``setns(2)`` with ``CLONE_NEWNET`` changes only the calling thread), and a socket stays in
the namespace it was created in, so a short-lived thread can enter the namespace, open the socket
or file there and end; the caller's own threads never change namespace.

- ``setns(path)``: enter the namespace in the calling thread (a forked child, a helper thread).
- ``run_in(netns, fn, *args)``: ``fn(*args)`` in a fresh thread inside the namespace; its result or
  its exception (``in_thread``: the same without entering one, e.g. for a thread that unshares its own).
- ``rtnl(netns)``: a pyroute2 ``IPRoute`` on a netlink socket opened in an existing namespace
  (``FileNotFoundError`` when it is gone); never creates one.
- ``sysctl(netns, key)`` / ``write_sysctls(netns, {key: value})``: ``net.*`` sysctls of the
  namespace, read or written through /proc/sys there.

``netns`` is a name under /var/run/netns or a path (e.g. /proc/PID/ns/net).
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

from netslo.core.errors import InfrastructureError

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
NETNS_RUN_DIR = "/var/run/netns"
# A writable view of the host's /proc/sys where a container's own is read-only (Kubernetes' node
# agent mounts it here; see writable_proc_sys).
PROC_SYS_DIR = "/host/proc-sys"
NETLINK_ROUTE = 0


def path_of(netns: str) -> str:
    """The namespace file of a name under /var/run/netns, or the path itself."""
    return netns if "/" in netns else os.path.join(NETNS_RUN_DIR, netns)


def setns(netns: str) -> None:
    """Move the calling thread into the network namespace ``netns``; OSError naming it if refused."""
    path = path_of(netns)
    fd = os.open(path, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def in_thread(name: str, fn, *args):
    """``fn(*args)`` run in a new thread named ``name`` (whatever namespace it enters goes with it);
    returns its result or raises its error."""
    box: dict = {}

    def body():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # handed to the caller, raised there
            box["error"] = e

    t = threading.Thread(target=body, name=name, daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def writable_proc_sys(source: str = PROC_SYS_DIR) -> bool:
    """Where ``source`` exists, bind it over /proc/sys in a mount namespace of this process's own
    (the host's stays as it is), so programs started from here (``sysctl -w``, a helper writing
    /proc/sys) write the ``net.*`` sysctls of the network namespace they run in. Call it single-
    threaded, before starting them. False when there is no ``source`` (nothing to do)."""
    if not os.path.isdir(source):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    for what, rc in (("unshare(CLONE_NEWNS)", lambda: libc.unshare(CLONE_NEWNS)),
                     ("make / private", lambda: libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)),
                     (f"bind {source} on /proc/sys",
                      lambda: libc.mount(source.encode(), b"/proc/sys", None, MS_BIND, None))):
        if rc() != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
    return True


def run_in(netns: str, fn, *args):
    """``fn(*args)`` run in a new thread that entered ``netns``; returns its result or raises its error."""
    def entered():
        setns(netns)
        return fn(*args)
    return in_thread(f"netns:{os.path.basename(netns)}", entered)


def rtnl(netns: str):
    """pyroute2 ``IPRoute`` whose netlink socket lives in the existing namespace ``netns``."""
    from pyroute2 import IPRoute
    fd = run_in(netns, socket.socket, socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE).detach()
    try:
        return IPRoute(fileno=fd)
    except BaseException:
        os.close(fd)
        raise


def link_index(ipr, netns: str, ifname: str, what: str = "") -> int:
    """Index of interface ``ifname`` through ``ipr`` (an ``rtnl(netns)``); InfrastructureError naming it
    and the namespace (after ``what``, e.g. 'bandwidth: ') when there is none."""
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise InfrastructureError(f"{what}no interface {ifname} in namespace {netns}")
    return found[0]


def _proc_sys(key: str) -> str:
    """/proc/sys path of a sysctl named in ``net.ipv4.tcp_congestion_control`` form."""
    return "/proc/sys/" + key.replace(".", "/")


def sysctl(netns: str, key: str) -> str:
    """The value of ``key`` (``net.ipv4.tcp_congestion_control`` form) in ``netns``, as ``sysctl -n`` prints it."""
    def read() -> str:
        with open(_proc_sys(key)) as f:
            return " ".join(f.read().split())

    return run_in(netns, read)


def write_sysctls(netns: str, settings: dict[str, str]) -> None:
    """Write ``net.*`` sysctls in ``netns`` (one thread enters once); OSError naming the refused key."""
    def write() -> None:
        for key, value in settings.items():
            try:
                with open(_proc_sys(key), "w") as f:
                    f.write(str(value))
            except OSError as e:
                raise OSError(e.errno, f"{key}={value}: {e.strerror}") from None

    run_in(netns, write)
