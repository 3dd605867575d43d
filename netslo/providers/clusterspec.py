"""A cluster spec: what one side of a comparison (``python -m netslo compare``) brings up.

Written as a YAML file or inline as ``key=value,key=value``. ``provider`` picks the keys::

    provider: netns        # the embedded provider (the default)
    datapath: bridge       # bridge | routed | vxlan
    nodes: 2               # 2..16 (cross-node scenarios need two)
    rules: 0               # decoy iptables rules every packet to the server pod walks (0..60000),
                           # nothing denied (netslo.providers.netns.policy): a change of known direction
    mtu: 1500              # the pods' MTU, 1280..1500 (vxlan: ..1450); default 1500, vxlan 1450
    sysctls: {net.ipv4.tcp_slow_start_after_idle: 0}   # net.* sysctls written in every pod's namespace (as a
                           # pod's securityContext.sysctls); inline: sysctl.net.ipv4.tcp_slow_start_after_idle=0
    kernel: host           # host (this machine's) | uml: the cluster inside a user-mode-linux kernel,
                           # which has sch_netem where the host has none (1 vCPU; no mtu, no rules)
    netem: {delay: 100us}  # netem on the server pod's link (an impairment: netslo.impair.spec, its
                           # direction egress by default); inline: netem.delay=100us

    provider: kind         # a kind cluster made for the comparison and deleted after it
    cni: calico            # calico | cilium | antrea, at netslo's pinned version (netslo/providers/cni/)
    encapsulation: vxlan   # one the CNI's data file lists (default: its default)
    nodes: 2               # 2..8 (control plane + workers, all taking pods)
    name: netslo-a         # the kind cluster's name (default netslo-a / netslo-b by side)
    manifests: DIR         # *.yaml / *.yml applied in name order once the CNI is ready (FelixConfiguration,
                           # a Cilium ConfigMap, NetworkPolicies, ...)
    rules: 0               # decoy NetworkPolicies on the server pod (0..5000), its clients admitted
    keep: false            # true: reuse the cluster of that name if it is there, and leave it up after

    provider: existing     # a cluster that is already there; netslo adds and removes its run namespace
    kubeconfig: PATH       # default $NETSLO_KUBECONFIG, $KUBECONFIG, ~/.kube/config
    context: NAME          # a context of that kubeconfig (default: its current one)
    select: KEY=VALUE      # the nodes to measure on (a node pool by label; default all); at least 2
    rules: 0               # as for kind

In a spec file ``manifests`` and ``kubeconfig`` are relative to the file. Every problem is one line
naming the field, the value and what was expected. ``check_pair`` refuses
A and B that would be one and the same cluster (two netns specs alike are two clusters: an A/A).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from netslo.core import yamlfile
from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers import DATAPATHS, NETNS_MAX_MTU, NETNS_MIN_MTU
from netslo.providers import cni as cni_mod
from netslo.providers.kube import manifests as km
from netslo.providers.kube.api import kubeconfig_files
from netslo.providers.netns.policy import MAX_DECOYS

PROVIDERS = ("netns", "kind", "existing")
KEYS = {"netns": ("provider", "datapath", "nodes", "rules", "mtu", "sysctls", "kernel", "netem"),
        "kind": ("provider", "cni", "encapsulation", "nodes", "name", "manifests", "rules", "keep"),
        "existing": ("provider", "kubeconfig", "context", "select", "rules")}
MAX_KIND_NODES = 8
MAX_POLICIES = 5000      # NetworkPolicy objects on one pod (1000 is the studies' largest)
MANIFEST_SUFFIXES = (".yaml", ".yml")
KERNELS = ("host", "uml")
SYSCTL_KEY = re.compile(r"net(\.[a-z0-9_-]+)+")      # a network sysctl: the ones a pod's namespace has
SYSCTL_VALUE = re.compile(r"[A-Za-z0-9_.:\- ]{1,64}")
INLINE_MAPS = {"sysctl.": "sysctls", "netem.": "netem"}   # inline prefix -> the file's mapping key
PATH_KEYS = ("manifests", "kubeconfig")   # in a spec file: relative to the file


@dataclass(frozen=True)
class ClusterSpec:
    provider: str = "netns"
    datapath: str = "bridge"      # netns: its datapath; kind: the CNI; existing: "" (the cluster's)
    nodes: int = 2
    rules: int = 0
    encapsulation: str = ""
    name: str = ""
    manifests: str = ""
    kubeconfig: str = ""
    context: str = ""
    select: str = ""
    keep: bool = False
    mtu: int = 0                  # netns: the pods' MTU (0: the datapath's default)
    sysctls: tuple = ()           # netns: ((key, value), ...) written in every pod's namespace
    kernel: str = "host"          # netns: host | uml
    netem: tuple = ()             # netns: the impairment's (key, value) items on the server pod's link
    source: str = ""

    def describe(self) -> str:
        if self.provider == "kind":
            extra = f", manifests {self.manifests}" if self.manifests else ""
            return (f"kind/{self.datapath} ({self.encapsulation}), {self.nodes} nodes{extra}, "
                    f"{self.rules} decoy NetworkPolicies on the server")
        if self.provider == "existing":
            where = f"context {self.context}" if self.context else "the current context"
            nodes = f", nodes {self.select}" if self.select else ""
            return f"existing ({where}{nodes}), {self.rules} decoy NetworkPolicies on the server"
        extra = (f", MTU {self.mtu}" if self.mtu else "") + (", user-mode-linux kernel" if self.kernel == "uml" else "")
        extra += "".join(f", {k}={v}" for k, v in self.sysctls)
        extra += (", netem " + " ".join(f"{k} {v}" for k, v in self.netem)) if self.netem else ""
        return f"{self.provider}/{self.datapath}, {self.nodes} nodes{extra}, {self.rules} decoy rules on the server's path"

    def identity(self) -> tuple:
        """What names the cluster itself: two specs with one identity would be one cluster."""
        if self.provider == "kind":
            return ("kind", self.name)
        if self.provider == "existing":
            return ("existing", tuple(kubeconfig_files(self.kubeconfig or None)), self.context, self.select)
        return ("netns", id(self))   # every netns spec brings up its own cluster

    def with_side(self, side: str) -> "ClusterSpec":
        """This spec as side ``side`` (A or B) brings it up: a kind cluster without a name gets netslo-<side>."""
        if self.provider == "kind" and not self.name:
            return dataclasses.replace(self, name=f"netslo-{side.lower()}")
        return self

    def _kind_provider(self, ip_family: str):
        from netslo.providers.kind.cluster import KindProvider
        return KindProvider(cni=self.datapath, nodes=self.nodes, name=self.name or "netslo-a",
                            encapsulation=self.encapsulation, ip_family=ip_family, keep_cluster=self.keep)

    def check(self, ip_family: str = "ipv4") -> None:
        """What only the provider can refuse (e.g. an encapsulation its node image cannot run), refused
        before anything is brought up: SpecError."""
        if self.provider == "kind":
            self._kind_provider(ip_family)

    def up(self, ip_family: str = "ipv4"):
        """The cluster (a context manager: closed, with everything it made, on exit)."""
        if self.provider == "kind":
            cluster = self._kind_provider(ip_family).up()
            try:
                apply_manifests(cluster.api, self.manifests)
            except BaseException:
                cluster.close()
                raise
            return cluster
        if self.provider == "existing":
            from netslo.providers.existing import ExistingProvider
            return ExistingProvider(kubeconfig=self.kubeconfig or None, context=self.context or None).up()
        if self.kernel == "uml":
            from netslo.providers.netns.uml import UmlCluster
            return UmlCluster(nodes=self.nodes, datapath=self.datapath)
        from netslo.providers.netns.cluster import NetnsCluster
        return NetnsCluster(nodes=self.nodes, datapath=self.datapath, ip_family=ip_family, mtu=self.mtu or None)

    def measured_nodes(self, cluster) -> list[str]:
        """The cluster's nodes this side measures on (``select``), at least 2; an InfrastructureError naming
        the count otherwise (the cluster is up: not a spec error any more)."""
        key, _, value = self.select.partition("=")
        nodes = [n for n in cluster.nodes if not self.select or cluster.node_labels(n).get(key) == value]
        if len(nodes) < 2:
            raise InfrastructureError(f"cluster {self.describe()}: {len(nodes)} node(s) "
                                      f"{'match ' + self.select if self.select else 'in all'}; a comparison needs 2 "
                                      f"(a same-node and a cross-node client)")
        return nodes


def _number(field: str, value, lo: int, hi: int) -> int:
    try:
        n = int(str(value))
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi or str(n) != str(value).strip():
        raise SpecError(field, value, f"a whole number {lo}..{hi}")
    return n


def manifest_files(directory: str) -> list[Path]:
    """The YAML files of ``directory`` in name order; a SpecError when it is not a directory holding one."""
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise SpecError("manifests", directory, "a directory of Kubernetes manifests (*.yaml, *.yml)")
    files = sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES and p.is_file())
    if not files:
        raise SpecError("manifests", directory, "a directory holding at least one *.yaml or *.yml file")
    return files


def apply_manifests(api, directory: str) -> int:
    """Every object of ``directory``'s files, applied server-side in file order; the count."""
    if not directory:
        return 0
    n = 0
    for f in manifest_files(directory):
        docs = yamlfile.read_all(f, "manifests")
        api.apply(docs, what=f"manifests {f}")
        n += len(docs)
    return n


def contexts(kubeconfig: str) -> list[str]:
    """The context names of a kubeconfig (its files, as the client merges them)."""
    names = []
    for f in kubeconfig_files(kubeconfig or None):
        if not os.path.exists(f):
            raise SpecError("kubeconfig", f, "an existing kubeconfig file")
        doc = yamlfile.read(Path(f), "kubeconfig") or {}
        names += [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]
    return names


def _parse_kind(doc: dict) -> ClusterSpec:
    cni = str(doc.get("cni", "calico"))
    if cni not in cni_mod.CNIS:
        raise SpecError("cni", cni, f"one of {', '.join(cni_mod.CNIS)}")
    pins = cni_mod.load(cni)
    encap = str(doc.get("encapsulation", pins.default_encapsulation))
    if encap not in pins.encapsulations:
        raise SpecError("encapsulation", encap, f"one of {', '.join(pins.encapsulations)} ({cni} {pins.version})")
    name = str(doc.get("name", ""))
    if name and not km._DNS_LABEL.match(name):
        raise SpecError("name", name, "a kind cluster name: lowercase letters, digits and '-'")
    manifests = str(doc.get("manifests", ""))
    if manifests:
        manifest_files(manifests)
    keep = str(doc.get("keep", "false")).lower()
    if keep not in ("true", "false"):
        raise SpecError("keep", doc.get("keep"), "true or false")
    return ClusterSpec("kind", cni, _number("nodes", doc.get("nodes", 2), 2, MAX_KIND_NODES),
                       _number("rules", doc.get("rules", 0), 0, MAX_POLICIES), encap, name, manifests,
                       keep=keep == "true")


def _parse_existing(doc: dict) -> ClusterSpec:
    kubeconfig, context = str(doc.get("kubeconfig", "")), str(doc.get("context", ""))
    if context:
        known = contexts(kubeconfig)
        if context not in known:
            raise SpecError("context", context, f"a context of the kubeconfig ({', '.join(known) or 'none'})")
    else:
        contexts(kubeconfig)     # the file must exist
    select = str(doc.get("select", ""))
    if select and (select.count("=") != 1 or not all(select.split("="))):
        raise SpecError("select", select, "one node label as key=value, e.g. netslo.io/pool=b")
    return ClusterSpec("existing", "", 0, _number("rules", doc.get("rules", 0), 0, MAX_POLICIES),
                       kubeconfig=kubeconfig, context=context, select=select)


def _mapping(doc: dict, key: str, example: str) -> dict:
    value = doc.get(key) or {}
    if not isinstance(value, dict):
        raise SpecError(key, value, f"a mapping such as {example}")
    return value


def _netns_extras(spec: ClusterSpec, doc: dict) -> ClusterSpec:
    """``spec`` with the netns keys mtu, sysctls, kernel and netem of ``doc``, each checked."""
    mtu = _number("mtu", doc["mtu"], NETNS_MIN_MTU, NETNS_MAX_MTU[spec.datapath]) if "mtu" in doc else 0
    kernel = str(doc.get("kernel", "host"))
    if kernel not in KERNELS:
        raise SpecError("kernel", kernel, "host (this machine's) or uml (a user-mode-linux kernel with sch_netem)")
    sysctls = []
    for key, value in _mapping(doc, "sysctls", "{net.ipv4.tcp_slow_start_after_idle: 0}").items():
        if not SYSCTL_KEY.fullmatch(str(key)):
            raise SpecError(f"sysctls.{key}", value, "a network sysctl (net.*): one a pod's own namespace has")
        if not SYSCTL_VALUE.fullmatch(str(value)):
            raise SpecError(f"sysctls.{key}", value, "a value of letters, digits, '.', ':', '-', '_' or spaces")
        sysctls.append((str(key), str(value)))
    netem = _mapping(doc, "netem", "{delay: 100us}")
    if kernel == "uml":
        for key in ("mtu", "rules"):
            if doc.get(key) not in (None, 0, "0"):
                raise SpecError(key, doc[key], "not set with kernel: uml (its guest cluster takes neither)")
    return dataclasses.replace(spec, mtu=mtu, sysctls=tuple(sorted(sysctls)), kernel=kernel,
                               netem=tuple((str(k), v) for k, v in netem.items()))


def parse(doc, source: str) -> ClusterSpec:
    """A validated spec from a mapping (the YAML document or the inline pairs)."""
    if not isinstance(doc, dict):
        raise SpecError("(top level)", doc, "a mapping such as provider: netns, datapath: bridge", where=source)
    try:
        provider = str(doc.get("provider", "netns"))
        if provider not in PROVIDERS:
            raise SpecError("provider", provider, f"one of {', '.join(PROVIDERS)}")
        for key in doc:
            if key not in KEYS[provider]:
                raise SpecError(str(key), doc[key], f"one of the keys of a {provider} spec: {', '.join(KEYS[provider])}")
        if provider == "kind":
            spec = _parse_kind(doc)
        elif provider == "existing":
            spec = _parse_existing(doc)
        else:
            datapath = str(doc.get("datapath", "bridge"))
            if datapath not in DATAPATHS:
                raise SpecError("datapath", datapath, f"one of {', '.join(DATAPATHS)}")
            spec = _netns_extras(ClusterSpec(provider, datapath, _number("nodes", doc.get("nodes", 2), 2, 16),
                                             _number("rules", doc.get("rules", 0), 0, MAX_DECOYS)), doc)
        return dataclasses.replace(spec, source=source)
    except SpecError as e:
        raise e.located(source) from None


def load(text: str, option: str) -> ClusterSpec:
    """``text``: the path of a YAML file, or inline ``key=value`` pairs separated by commas."""
    path = Path(text).expanduser()
    if path.is_file():
        doc = yamlfile.read(path, option) or {}
        if isinstance(doc, dict):   # a file's paths are relative to the file (a repository's spec and its manifests)
            doc = {k: str(path.parent / v) if k in PATH_KEYS and v and not Path(str(v)).expanduser().is_absolute()
                   else v for k, v in doc.items()}
        return parse(doc, str(path))
    pairs = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise SpecError(option, text, "a cluster spec file, or key=value pairs such as datapath=routed,rules=1000")
        key, value = key.strip(), value.strip()
        prefix = next((p for p in INLINE_MAPS if key.startswith(p) and len(key) > len(p)), None)
        if prefix:      # sysctl.net.x=1 -> sysctls: {net.x: 1}; netem.delay=1ms -> netem: {delay: 1ms}
            pairs.setdefault(INLINE_MAPS[prefix], {})[key[len(prefix):]] = value
        else:
            pairs[key] = value
    return parse(pairs, option)


def check_pair(a: ClusterSpec, b: ClusterSpec, option: str = "--b", text: str | None = None
               ) -> tuple[ClusterSpec, ClusterSpec]:
    """A and B as they will be brought up; a SpecError naming ``option`` and ``text`` (B as given) when
    they would be one cluster."""
    a, b = a.with_side("A"), b.with_side("B")
    if a.identity() == b.identity():
        raise SpecError(option, text or b.describe(), f"another cluster than A ({a.describe()}): "
                                                      "the same cluster given as both A and B")
    return a, b

