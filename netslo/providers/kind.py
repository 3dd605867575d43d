"""``kind``: a throwaway multi-node cluster in Docker, with a pinned CNI and the netslo agent image.

    KindProvider(cni="calico", nodes=2, name="netslo", keep_cluster=False, encapsulation=None,
                 image=DEFAULT_IMAGE, kind="kind", kubectl=None, helm="helm", node_image=KIND_NODE_IMAGE,
                 workdir=None, timeout=600.0).up() -> KubeCluster

``nodes`` counts the nodes pods run on: 1 = a single control-plane node (untainted), N >= 2 = one
control plane + N workers. The config disables kind's default CNI and sets the pod/service subnets the
CNI's data file asks for. With ``keep_cluster`` an existing cluster of that name is reused and nothing
but the run namespace is deleted at the end. Every command line is built by a method (``*_command``)
so tests can check what would run; timeouts are seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from ..errors import InfrastructureError, SpecError, Unsupported
from . import cni as cni_mod
from . import kube_manifests as km
from .cni.install import install as install_cni
from .kube import KubeCluster
from .kubectl import Kubectl

KIND_VERSION = "v0.33.0"  # go install sigs.k8s.io/kind@v0.33.0
# The v1.34 image published with kind v0.33.0 (digest from its release notes): same minor as the
# local cluster of scripts/local-k8s.sh.
KIND_NODE_IMAGE = ("kindest/node:v1.34.11@sha256:"
                   "44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d")
MAX_NODES = 8


class KindProvider:
    name = "kind"

    def __init__(self, cni: str = "calico", nodes: int = 2, name: str = "netslo",
                 keep_cluster: bool = False, encapsulation: str | None = None,
                 image: str | None = None, kind: str = "kind", kubectl: str | None = None,
                 helm: str = "helm", node_image: str = KIND_NODE_IMAGE, workdir: str | None = None,
                 timeout: float = 600.0, run_id: str | None = None):
        if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
            raise SpecError("--nodes", nodes, f"a whole number 1..{MAX_NODES}")
        if not km._DNS_LABEL.match(name):
            raise SpecError("kind cluster name", name, "lowercase letters, digits and '-'")
        self.cni = cni_mod.load(cni)
        self.encapsulation = cni_mod.encapsulation(self.cni, encapsulation)
        self.nodes = nodes
        self.cluster_name = name
        self.keep_cluster = keep_cluster
        self.image = image or os.environ.get("NETSLO_AGENT_IMAGE") or km.DEFAULT_IMAGE
        self.kind = kind
        self.kubectl_binary = kubectl
        self.helm = helm
        self.node_image = node_image
        self.workdir = Path(workdir) if workdir else Path(tempfile.gettempdir()) / f"netslo-kind-{name}"
        self.timeout = timeout
        self.run_id = run_id
        self._created_cluster = False

    # ---- what would run ---------------------------------------------------------------------
    @property
    def kubeconfig(self) -> str:
        return str(self.workdir / "kubeconfig")

    @property
    def config_path(self) -> str:
        return str(self.workdir / "kind-config.yaml")

    def config(self) -> dict:
        """The kind Cluster config (kind.x-k8s.io/v1alpha4)."""
        roles = ["control-plane"] + (["worker"] * self.nodes if self.nodes >= 2 else [])
        return {
            "kind": "Cluster",
            "apiVersion": "kind.x-k8s.io/v1alpha4",
            "name": self.cluster_name,
            "networking": {
                "disableDefaultCNI": True,
                "podSubnet": self.cni.pod_subnet,
                "serviceSubnet": self.cni.service_subnet,
                "kubeProxyMode": "iptables",
            },
            "nodes": [{"role": r, "image": self.node_image,
                       "labels": {"netslo.io/cni": self.cni.name}} for r in roles],
        }

    def config_yaml(self) -> str:
        return "# written by netslo (netslo/providers/kind.py)\n" + yaml.safe_dump(self.config(), sort_keys=False)

    def list_command(self) -> list[str]:
        return [self.kind, "get", "clusters"]

    def create_command(self) -> list[str]:
        # --wait 0s: nodes stay NotReady until the CNI is installed; we wait for that ourselves.
        return [self.kind, "create", "cluster", "--name", self.cluster_name, "--config", self.config_path,
                "--image", self.node_image, "--kubeconfig", self.kubeconfig, "--wait", "0s"]

    def kubeconfig_command(self) -> list[str]:
        return [self.kind, "export", "kubeconfig", "--name", self.cluster_name, "--kubeconfig", self.kubeconfig]

    def load_command(self) -> list[str]:
        return [self.kind, "load", "docker-image", self.image, "--name", self.cluster_name]

    def delete_command(self) -> list[str]:
        return [self.kind, "delete", "cluster", "--name", self.cluster_name, "--kubeconfig", self.kubeconfig]

    def plan(self, exists: bool) -> list[list[str]]:
        """The kind commands ``up()`` runs, in order (CNI install and waits go through kubectl/helm)."""
        if exists and self.keep_cluster:
            return [self.list_command(), self.kubeconfig_command(), self.load_command()]
        if exists:
            raise InfrastructureError(f"kind cluster {self.cluster_name!r} exists and keep_cluster is off; "
                                      f"delete it (kind delete cluster --name {self.cluster_name}) or reuse it")
        return [self.list_command(), self.create_command(), self.load_command()]

    # ---- doing it ---------------------------------------------------------------------------
    def _run(self, argv: list[str], timeout: float) -> str:
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout)
        except FileNotFoundError:
            raise Unsupported(f"{argv[0]} not found; install kind {KIND_VERSION}") from None
        except subprocess.TimeoutExpired:
            raise InfrastructureError(f"{' '.join(argv[:4])}: no answer within {timeout:.0f}s") from None
        if proc.returncode:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise InfrastructureError(f"{' '.join(argv[:4])}: exit {proc.returncode}: {' | '.join(err[-3:])}")
        return proc.stdout.decode()

    def exists(self) -> bool:
        if not shutil.which(self.kind) and os.sep not in self.kind:
            raise Unsupported(f"kind not found on PATH; install kind {KIND_VERSION}")
        out = self._run(self.list_command(), 30)
        return self.cluster_name in out.split()

    def up(self) -> KubeCluster:
        exists = self.exists()
        self.workdir.mkdir(parents=True, exist_ok=True)
        Path(self.config_path).write_text(self.config_yaml())
        steps = self.plan(exists)[1:]  # the list command already ran
        try:
            for argv in steps:
                self._run(argv, self.timeout)
                if argv[:3] == [self.kind, "create", "cluster"]:
                    self._created_cluster = True
                    kubectl = Kubectl(self.kubectl_binary, self.kubeconfig)
                    self.cni_info = install_cni(kubectl, self.cni, encapsulation=self.encapsulation,
                                                timeout=self.timeout, helm=self.helm)
            kubectl = Kubectl(self.kubectl_binary, self.kubeconfig)
            cluster = KindCluster(self, kubectl, provider=self.name, image=self.image, pull_policy="Never",
                                  datapath=self.cni.name, run_id=self.run_id, single_kernel=True)
            return cluster.open(self.timeout)
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> None:
        """Delete the kind cluster if this provider created it (never a reused one)."""
        if self._created_cluster and not self.keep_cluster:
            self._run(self.delete_command(), 300)
            self._created_cluster = False


class KindCluster(KubeCluster):
    """A KubeCluster that also deletes its kind cluster on close (unless kept)."""

    def __init__(self, provider: KindProvider, *args, **kw):
        super().__init__(*args, **kw)
        self._kind = provider

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.update({"kind": KIND_VERSION, "kind_node_image": self._kind.node_image,
                    "cni": self._kind.cni.name, "cni_version": self._kind.cni.version,
                    "encapsulation": self._kind.encapsulation})
        return env

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._kind.teardown()
