"""``existing``: any cluster in a kubeconfig/context. netslo only adds and removes its run namespace.

    ExistingProvider(kubeconfig=None, context=None, image=..., pull_policy="IfNotPresent",
                     datapath=None, pod_timeout=120.0, ready_timeout=60.0).up() -> KubeCluster

kubeconfig defaults to $NETSLO_KUBECONFIG, then $KUBECONFIG (a path or a list), then ~/.kube/config;
a file named there that does not exist is an InfrastructureError naming it, raised at construction
(before anything is created). The agent image must be pullable by the cluster or already on its
nodes (pull_policy "Never"). Timeouts are seconds.
"""

from __future__ import annotations

import os

from netslo.core.errors import SpecError
from netslo.providers.kube import manifests as km
from netslo.providers.kube.api import KubeApi, check_kubeconfig
from netslo.providers.kube.cluster import KubeCluster


class ExistingProvider:
    name = "existing"

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 image: str | None = None, pull_policy: str = "IfNotPresent",
                 datapath: str | None = None, pod_timeout: float = 120.0, ready_timeout: float = 60.0,
                 run_id: str | None = None):
        self.kubeconfig = kubeconfig or os.environ.get("NETSLO_KUBECONFIG") or None
        check_kubeconfig(self.kubeconfig)   # a missing file raises here, naming it
        if pull_policy not in km.PULL_POLICIES:
            raise SpecError("pull_policy", pull_policy, f"one of {', '.join(km.PULL_POLICIES)}")
        self.context = context
        self.image = image or os.environ.get("NETSLO_AGENT_IMAGE") or km.DEFAULT_IMAGE
        self.pull_policy = pull_policy
        self.datapath = datapath
        self.pod_timeout = pod_timeout
        self.ready_timeout = ready_timeout
        self.run_id = run_id

    def preflight(self) -> None:
        """Load the kubeconfig and context (no request to the cluster): bad ones fail before the run."""
        KubeApi(self.kubeconfig, self.context)

    def up(self) -> KubeCluster:
        api = KubeApi(self.kubeconfig, self.context)
        cluster = KubeCluster(api, provider=self.name, image=self.image, pull_policy=self.pull_policy,
                              datapath=self.datapath, run_id=self.run_id, pod_timeout=self.pod_timeout)
        try:
            return cluster.open(self.ready_timeout)
        except BaseException:
            cluster.close()
            raise
