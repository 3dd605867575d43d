"""``existing``: any cluster in a kubeconfig/context. netslo only adds and removes its run namespace.

    ExistingProvider(kubeconfig=None, context=None, kubectl=None, image=..., pull_policy="IfNotPresent",
                     datapath=None, pod_timeout=120.0, ready_timeout=60.0).up() -> KubeCluster

kubeconfig defaults to $KUBECONFIG (then kubectl's own default, ~/.kube/config); the agent image must
be pullable by the cluster or already on its nodes (pull_policy "Never"). Timeouts are seconds.
"""

from __future__ import annotations

import os

from ..errors import SpecError, Unsupported
from . import kube_manifests as km
from .kube import KubeCluster
from .kubectl import Kubectl


class ExistingProvider:
    name = "existing"

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 kubectl: str | None = None, image: str | None = None, pull_policy: str = "IfNotPresent",
                 datapath: str | None = None, pod_timeout: float = 120.0, ready_timeout: float = 60.0,
                 run_id: str | None = None):
        self.kubeconfig = kubeconfig or os.environ.get("NETSLO_KUBECONFIG") or os.environ.get("KUBECONFIG")
        if self.kubeconfig and not os.path.exists(self.kubeconfig.split(os.pathsep)[0]):
            raise Unsupported(f"kubeconfig {self.kubeconfig} does not exist (is the cluster up?)")
        if pull_policy not in km.PULL_POLICIES:
            raise SpecError("pull_policy", pull_policy, f"one of {', '.join(km.PULL_POLICIES)}")
        self.context = context
        self.kubectl_binary = kubectl
        self.image = image or os.environ.get("NETSLO_AGENT_IMAGE") or km.DEFAULT_IMAGE
        self.pull_policy = pull_policy
        self.datapath = datapath
        self.pod_timeout = pod_timeout
        self.ready_timeout = ready_timeout
        self.run_id = run_id

    def up(self) -> KubeCluster:
        kubectl = Kubectl(self.kubectl_binary, self.kubeconfig, self.context)
        cluster = KubeCluster(kubectl, provider=self.name, image=self.image, pull_policy=self.pull_policy,
                              datapath=self.datapath, run_id=self.run_id, pod_timeout=self.pod_timeout)
        try:
            return cluster.open(self.ready_timeout)
        except BaseException:
            cluster.close()
            raise
