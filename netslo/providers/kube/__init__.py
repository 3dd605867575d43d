"""Kubernetes clusters through one API boundary (``api``): the cluster (``cluster``), its waits,
manifests (``templates/``), warm agent sessions, Services, NetworkPolicies, node links, impairments,
Service programming and the reaping of what dead runs left."""
