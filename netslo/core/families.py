"""IP families: names, validation, ``host:port`` text with brackets for IPv6, and sockets of the right family.

A family is ``"ipv4"`` or ``"ipv6"``. An endpoint is written ``10.244.1.5:7001`` or
``[fd00:10:244:1::5]:7001`` (RFC 3986 host syntax, as URLs and Kubernetes write it); a bare IPv6
address has colons of its own, so it is always bracketed when a port follows.
"""

from __future__ import annotations

import ipaddress
import socket

from netslo.core.errors import SpecError

IPV4, IPV6 = "ipv4", "ipv6"
FAMILIES = (IPV4, IPV6)
MODES = (IPV4, IPV6, "dual")          # what a cluster may be asked to carry (--netslo-ip-family)
ANY = "::"                            # a responder's default bind address: every address of both families
SOCKET_FAMILY = {IPV4: socket.AF_INET, IPV6: socket.AF_INET6}


def check(family: str, field: str = "family") -> str:
    """``family`` when it is one of FAMILIES; SpecError naming ``field`` otherwise."""
    if family not in FAMILIES:
        raise SpecError(field, family, f"one of {', '.join(FAMILIES)}")
    return family


def families_of(mode: str, field: str = "--netslo-ip-family") -> tuple[str, ...]:
    """'ipv4' -> ('ipv4',), 'ipv6' -> ('ipv6',), 'dual' -> ('ipv4', 'ipv6'); SpecError otherwise."""
    if mode not in MODES:
        raise SpecError(field, mode, f"one of {', '.join(MODES)}")
    return FAMILIES if mode == "dual" else (mode,)


def family_of(address: str) -> str:
    """'10.0.0.1' -> 'ipv4', 'fd00::1' -> 'ipv6' (a host name or anything else: 'ipv4')."""
    try:
        return IPV6 if ipaddress.ip_address(address).version == 6 else IPV4
    except ValueError:
        return IPV4


def socket_family(address: str) -> int:
    """AF_INET6 for an IPv6 address, AF_INET otherwise."""
    return SOCKET_FAMILY[family_of(address)]


def host_port(host: str, port: int) -> str:
    """'10.0.0.1', 7001 -> '10.0.0.1:7001'; 'fd00::1', 7001 -> '[fd00::1]:7001'."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url_host(host: str) -> str:
    """The host part of a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def parse_host_port(text: str, field: str = "--target") -> tuple[str, int]:
    """'10.244.1.5:7001' -> ('10.244.1.5', 7001), '[fd00::5]:7001' -> ('fd00::5', 7001); SpecError
    naming ``field`` otherwise (an unbracketed IPv6 address is refused: its port is ambiguous)."""
    expected = "HOST:PORT or [IPV6]:PORT with a port 1..65535"
    host, sep, port = text.rpartition(":")
    if host.startswith("["):
        if not host.endswith("]") or family_of(host[1:-1]) != IPV6:
            raise SpecError(field, text, expected)
        host = host[1:-1]
    elif ":" in host:
        raise SpecError(field, text, expected)
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(field, text, expected)
    return host, int(port)


def bound_socket(kind: int, bind: str, port: int) -> socket.socket:
    """A socket of type ``kind`` bound to ``bind:port`` with SO_REUSEADDR. ``ANY`` ('::') takes both
    families on one socket (IPV6_V6ONLY off; IPv4 peers appear as ::ffff:a.b.c.d) and falls back to
    0.0.0.0 where the kernel has no IPv6; any other address binds its own family only."""
    if bind in (ANY, ""):
        try:
            sock = socket.socket(socket.AF_INET6, kind)
            try:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((ANY, port))
                return sock
            except OSError:
                sock.close()
                raise
        except OSError:
            bind = "0.0.0.0"     # no IPv6 in this kernel or namespace: IPv4 only, as before
    sock = socket.socket(socket_family(bind), kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    return sock
