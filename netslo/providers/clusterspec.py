"""A cluster spec: what one side of a comparison (``python -m netslo compare``) brings up.

Written as a YAML file or inline as ``key=value,key=value``::

    provider: netns        # the embedded provider (the only one a comparison brings up so far)
    datapath: bridge       # bridge | routed | vxlan
    nodes: 2               # 2..16 (cross-node scenarios need two)
    rules: 0               # decoy iptables rules every packet to the server pod walks (0..60000),
                           # nothing denied (netslo.providers.netns.policy): a change of known direction

Every problem is one line naming the field, the value and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netslo.core import yamlfile
from netslo.core.errors import SpecError
from netslo.providers import DATAPATHS
from netslo.providers.netns.cluster import NetnsCluster
from netslo.providers.netns.policy import MAX_DECOYS

KEYS = ("provider", "datapath", "nodes", "rules")


@dataclass(frozen=True)
class ClusterSpec:
    provider: str = "netns"
    datapath: str = "bridge"
    nodes: int = 2
    rules: int = 0
    source: str = ""

    def describe(self) -> str:
        return f"{self.provider}/{self.datapath}, {self.nodes} nodes, {self.rules} decoy rules on the server's path"

    def up(self, ip_family: str = "ipv4") -> NetnsCluster:
        """The cluster (a context manager: closed, with everything it made, on exit)."""
        return NetnsCluster(nodes=self.nodes, datapath=self.datapath, ip_family=ip_family)


def _number(field: str, value, lo: int, hi: int) -> int:
    try:
        n = int(str(value))
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi or str(n) != str(value).strip():
        raise SpecError(field, value, f"a whole number {lo}..{hi}")
    return n


def parse(doc, source: str) -> ClusterSpec:
    """A validated spec from a mapping (the YAML document or the inline pairs)."""
    if not isinstance(doc, dict):
        raise SpecError("(top level)", doc, "a mapping of provider, datapath, nodes, rules", where=source)
    try:
        for key in doc:
            if key not in KEYS:
                raise SpecError(str(key), doc[key], f"one of the keys {', '.join(KEYS)}")
        provider = str(doc.get("provider", "netns"))
        if provider != "netns":
            raise SpecError("provider", provider, "netns (a comparison of kind, minikube or existing clusters is "
                                                  "not built yet)")
        datapath = str(doc.get("datapath", "bridge"))
        if datapath not in DATAPATHS:
            raise SpecError("datapath", datapath, f"one of {', '.join(DATAPATHS)}")
        return ClusterSpec(provider, datapath, _number("nodes", doc.get("nodes", 2), 2, 16),
                           _number("rules", doc.get("rules", 0), 0, MAX_DECOYS), source)
    except SpecError as e:
        raise e.located(source) from None


def load(text: str, option: str) -> ClusterSpec:
    """``text``: the path of a YAML file, or inline ``key=value`` pairs separated by commas."""
    path = Path(text).expanduser()
    if path.is_file():
        return parse(yamlfile.read(path, option) or {}, str(path))
    pairs = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise SpecError(option, text, "a cluster spec file, or key=value pairs such as datapath=routed,rules=1000")
        pairs[key.strip()] = value.strip()
    return parse(pairs, option)
