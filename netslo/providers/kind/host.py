"""kind nodes seen from the host they run on: their network namespaces and those of their pods.

A kind node is a privileged container of the local docker engine, so its network namespace (and every
pod namespace inside it) is a namespace of this kernel, owned by the initial user namespace: a root
process here can enter it. That lets host-side tools look at a real CNI's datapath the way they look
at the embedded provider's: AF_PACKET capture on a pod's eth0, on the node's host-side veth, on the
CNI's tunnel device and on the node's underlay ``eth0``; qdisc reads of what the CNI's bandwidth
plugin installed.

    node_netns(node)             -> "/proc/<pid>/ns/net" of the node container (docker inspect)
    netns_by_inode(inode)        -> "/proc/<pid>/ns/net" of a process in the namespace with that inode
    interface_name(netns, index) -> the name of interface ``index`` in ``netns``
    tunnel_devices(netns)        -> names of the VXLAN/Geneve devices in ``netns`` (vxlan.calico, cilium_vxlan)
    add_external_vxlan(netns, name, port) -> a collect-metadata VXLAN device made (False: one is there)
    engine_cgroup_version(docker) -> 1 or 2: the cgroup version the engine's containers (the nodes) get

Namespace paths stay valid while that process lives: a node's for the node's life, a pod's (its pause
process is preferred) for the pod's.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.providers.netns.cluster import pids_with_netns
from netslo.providers.tool import run_tool

PROC = Path("/proc")
TUNNEL_KINDS = ("vxlan", "geneve")
CLUSTER_LABEL = "io.x-k8s.kind.cluster"   # kind's label on the node containers of a cluster
DOCKER = "the docker CLI of the engine kind uses"   # what to install when docker is missing
DOCKER_CLI = "docker"   # the engine's client, from PATH (scripts/kind-offline.sh env puts its own first)
# Where a node's containerd configuration names the snapshotter its CRI plugin unpacks images with,
# per configuration version (2: containerd 1.3-1.7, still read by 2.x; 3 and 4: containerd 2.0, 2.1).
SNAPSHOTTER_PATH = {2: ("plugins", "io.containerd.grpc.v1.cri", "containerd", "snapshotter"),
                    3: ("plugins", "io.containerd.cri.v1.images", "snapshotter"),
                    4: ("plugins", "io.containerd.cri.v1.images", "snapshotter")}


def engine_cgroup_version(docker: str = DOCKER_CLI) -> int:
    """The cgroup version (1 or 2) of the docker engine's host, which its containers (kind's and
    minikube's nodes) see; kubelet >= 1.35 refuses version 1 unless told ``failCgroupV1: false``."""
    out = run_tool([docker, "info", "--format", "{{.CgroupVersion}}"], 60, f"install {DOCKER}")
    text = out.stdout.decode(errors="replace").strip()
    if text not in ("1", "2"):
        raise InfrastructureError(f"docker info: CgroupVersion {text!r}, expected 1 or 2")
    return int(text)


def runtimes_up(cluster: str, nodes: int, docker: str = DOCKER_CLI) -> bool:
    """Whether kind cluster ``cluster`` has its ``nodes`` node containers running and each one's
    containerd answers (what ``kind load`` needs; true long before the cluster itself is up). False
    also when the docker CLI cannot tell (not on PATH, engine busy)."""
    try:
        names = run_tool([docker, "ps", "--filter", f"label={CLUSTER_LABEL}={cluster}", "--format",
                          "{{.Names}}"], 30, install=DOCKER).stdout.decode().split()
    except (InfrastructureError, Unsupported):
        return False
    return len(names) >= nodes and all(
        run_tool([docker, "exec", n, "ctr", "--namespace", "k8s.io", "version"], 30, install=DOCKER,
                 check=False).returncode == 0 for n in names)


def snapshotter_of(config: str) -> str:
    """The CRI plugin's snapshotter in a containerd configuration (TOML, ``containerd config
    dump``); InfrastructureError when the configuration says none."""
    try:
        conf = tomllib.loads(config)
    except tomllib.TOMLDecodeError as e:
        raise InfrastructureError(f"containerd config: not TOML ({e})") from None
    path = SNAPSHOTTER_PATH.get(conf.get("version"))
    value = conf
    for key in path or ():
        value = value.get(key, {}) if isinstance(value, dict) else {}
    if not path or not isinstance(value, str) or not value:
        raise InfrastructureError(f"containerd config (version {conf.get('version')}): no CRI snapshotter "
                                  f"at {'.'.join(path) if path else 'a known place'}")
    return value


def cri_snapshotter(node: str, docker: str = DOCKER_CLI) -> str:
    """The snapshotter kind node ``node``'s CRI plugin uses (what ``kind load`` imports with)."""
    out = run_tool([docker, "exec", node, "containerd", "config", "dump"], 30, install=DOCKER).stdout.decode()
    return snapshotter_of(out)


def node_netns(node: str, docker: str = DOCKER_CLI) -> str:
    """The network namespace path of kind node container ``node`` (its name is the node's name)."""
    out = run_tool([docker, "inspect", "-f", "{{.State.Pid}}", node], 30,
                   install=DOCKER).stdout.decode().strip()
    if not out.isdigit() or out == "0":
        raise InfrastructureError(f"kind node {node}: container not running (docker inspect pid {out!r})")
    return str(PROC / out / "ns" / "net")


def _comm(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def netns_by_inode(inode: int) -> str:
    """``/proc/<pid>/ns/net`` of a process whose network namespace has ``inode`` (a pod's pause
    process when there is one: it lives as long as the pod)."""
    found = pids_with_netns(inode)
    if not found:
        raise InfrastructureError(f"no process on this host is in network namespace net:[{inode}] "
                                  f"(is the cluster's docker engine on this host?)")
    pause = [p for p in found if _comm(p) == "pause"]
    return str(PROC / str(min(pause or found)) / "ns" / "net")


def _links(netns: str):
    from netslo.core.netns_access import rtnl
    with rtnl(netns) as ipr:   # an existing namespace, never a new one
        return list(ipr.get_links())


def interface_name(netns: str, index: int) -> str:
    for link in _links(netns):
        if link["index"] == index:
            return link.get_attr("IFLA_IFNAME")
    raise InfrastructureError(f"no interface with index {index} in {netns}")


def tunnel_devices(netns: str) -> list[str]:
    """Names of the overlay tunnel devices (VXLAN, Geneve) in ``netns``, sorted."""
    out = []
    for link in _links(netns):
        info = link.get_attr("IFLA_LINKINFO")
        if info is not None and info.get_attr("IFLA_INFO_KIND") in TUNNEL_KINDS:
            out.append(link.get_attr("IFLA_IFNAME"))
    return sorted(out)


def add_external_vxlan(netns: str, name: str, port: int) -> bool:
    """A collect-metadata ("external": the tunnel key comes with each packet, as BPF sets it) VXLAN
    device ``name`` on UDP ``port`` in ``netns``, down, learning off; False if ``name`` exists."""
    import errno

    from pyroute2 import NetlinkError

    from netslo.core.netns_access import rtnl
    with rtnl(netns) as ipr:
        try:
            ipr.link("add", ifname=name, kind="vxlan", vxlan_collect_metadata=1, vxlan_port=port, vxlan_learning=0)
        except NetlinkError as e:
            if e.code == errno.EEXIST:
                return False
            raise InfrastructureError(f"{netns}: creating VXLAN device {name} (port {port}) failed: {e}") from None
    return True
