"""Providers: where pods live. ``netns`` (embedded, default), ``kind``, ``minikube``, ``existing``."""

from __future__ import annotations

from netslo.core.errors import SpecError

PROVIDERS = ("netns", "kind", "minikube", "existing")
DATAPATHS = ("bridge", "routed", "vxlan")       # the embedded provider's pod datapaths
ZONE_LABEL = "topology.kubernetes.io/zone"   # a node's zone (Kubernetes' well-known label)
POOL_LABEL = "netslo.io/pool"   # the emulated nodes' pool (a real cluster's: a label the user names)
NETNS_MAX_NODES = 64   # the embedded provider's nodes at most (a node: two namespaces and a veth pair)
NETNS_MIN_MTU = 1280   # the embedded pods' MTU at least (IPv6's minimum link MTU, RFC 8200)
NETNS_MAX_MTU = {"bridge": 1500, "routed": 1500, "vxlan": 1450}   # ... at most: the underlay's 1500 less
                                                                  # VXLAN's 50 B of outer headers


def make_provider(name: str, **options):
    """Provider by name; options are provider-specific (datapath, nodes, kubeconfig...)."""
    if name == "netns":
        from netslo.providers.netns.cluster import NetnsProvider
        return NetnsProvider(**options)
    if name == "existing":
        from netslo.providers.existing import ExistingProvider
        return ExistingProvider(**options)
    if name == "kind":
        from netslo.providers.kind.cluster import KindProvider
        return KindProvider(**options)
    if name == "minikube":
        from netslo.providers.minikube import MinikubeProvider
        return MinikubeProvider(**options)
    raise SpecError("--netslo-provider", name, f"one of {', '.join(PROVIDERS)}")
