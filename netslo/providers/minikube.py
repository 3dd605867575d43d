"""``minikube``: a minikube profile with a CNI and the netslo agent image.

    MinikubeProvider(cni="calico", nodes=2, profile="netslo", keep_cluster=False, driver="docker",
                     kubernetes_version=MINIKUBE_K8S_VERSION, image=DEFAULT_IMAGE, minikube="minikube",
                     workdir=None, timeout=900.0).up() -> KubeCluster

minikube's own ``--cni`` is used where minikube supports the CNI (calico, cilium: minikube's bundled
versions, reported as such); for antrea the pinned upstream manifest (manifests/cni/antrea.yaml) is
fetched, checked, overlaid and passed as ``--cni=<file>``. Command lines come from ``*_command``
methods so tests can check what would run; timeouts are seconds.
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
from .cni.install import render
from .kube import KubeCluster
from .kubeapi import KubeApi
from .tool import run_tool

MINIKUBE_VERSION = "v1.37.0"
MINIKUBE_K8S_VERSION = "v1.34.11"
BUILTIN_CNIS = ("calico", "cilium")  # minikube start --cni=<name>
DRIVERS = ("docker", "kvm2", "qemu2", "podman")
MAX_NODES = 8


class MinikubeProvider:
    name = "minikube"

    def __init__(self, cni: str = "calico", nodes: int = 2, profile: str = "netslo",
                 keep_cluster: bool = False, driver: str = "docker",
                 kubernetes_version: str = MINIKUBE_K8S_VERSION, image: str | None = None,
                 minikube: str = "minikube", workdir: str | None = None,
                 timeout: float = 900.0, run_id: str | None = None, encapsulation: str | None = None):
        if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
            raise SpecError("--netslo-nodes", nodes, f"a whole number 1..{MAX_NODES}")
        if driver not in DRIVERS:
            raise SpecError("minikube driver", driver, f"one of {', '.join(DRIVERS)}")
        if not km._DNS_LABEL.match(profile):
            raise SpecError("minikube profile", profile, "lowercase letters, digits and '-'")
        self.cni = cni_mod.load(cni)
        self.encapsulation = cni_mod.encapsulation(self.cni, encapsulation)
        self.nodes = nodes
        self.profile = profile
        self.keep_cluster = keep_cluster
        self.driver = driver
        self.kubernetes_version = kubernetes_version
        self.image = image or os.environ.get("NETSLO_AGENT_IMAGE") or km.DEFAULT_IMAGE
        self.minikube = minikube
        self.workdir = Path(workdir) if workdir else Path(tempfile.gettempdir()) / f"netslo-minikube-{profile}"
        self.timeout = timeout
        self.run_id = run_id
        self._created = False

    @property
    def cni_manifest_path(self) -> str:
        return str(self.workdir / f"{self.cni.name}-{self.cni.version}.yaml")

    def cni_flag(self) -> str:
        """--cni value: minikube's name for a CNI it bundles, else our rendered manifest's path."""
        return self.cni.name if self.cni.name in BUILTIN_CNIS else self.cni_manifest_path

    def status_command(self) -> list[str]:
        return [self.minikube, "status", "-p", self.profile, "-o", "json"]

    def start_command(self) -> list[str]:
        return [self.minikube, "start", "-p", self.profile, f"--driver={self.driver}",
                f"--nodes={self.nodes}", f"--kubernetes-version={self.kubernetes_version}",
                "--container-runtime=containerd", f"--cni={self.cni_flag()}",
                f"--extra-config=kubeadm.pod-network-cidr={self.cni.pod_subnet}",
                f"--service-cluster-ip-range={self.cni.service_subnet}",
                "--wait=apiserver,system_pods,node_ready", f"--wait-timeout={int(self.timeout)}s"]

    def load_command(self) -> list[str]:
        return [self.minikube, "image", "load", self.image, "-p", self.profile]

    def delete_command(self) -> list[str]:
        return [self.minikube, "delete", "-p", self.profile]

    def plan(self, exists: bool) -> list[list[str]]:
        if exists and not self.keep_cluster:
            raise InfrastructureError(f"minikube profile {self.profile!r} exists and keep_cluster is off; "
                                      f"delete it (minikube delete -p {self.profile}) or reuse it")
        return [self.status_command()] + ([] if exists else [self.start_command()]) + [self.load_command()]

    def write_cni_manifest(self) -> None:
        """Fetch + verify + overlay the pinned manifest for a CNI minikube does not bundle."""
        if self.cni.name in BUILTIN_CNIS:
            return
        data, _ = cni_mod.fetch(self.cni)
        docs = render(self.cni, data, self.encapsulation, self.cni.pod_subnet)
        self.workdir.mkdir(parents=True, exist_ok=True)
        Path(self.cni_manifest_path).write_text(yaml.safe_dump_all(docs, sort_keys=False))

    def _run(self, argv: list[str], timeout: float, check: bool = True) -> subprocess.CompletedProcess:
        return run_tool(argv, timeout, f"install minikube {MINIKUBE_VERSION}", check=check)

    def exists(self) -> bool:
        if not shutil.which(self.minikube) and os.sep not in self.minikube:
            raise Unsupported(f"minikube not found on PATH; install minikube {MINIKUBE_VERSION}")
        # exit 0 = running, non-zero with JSON = stopped/paused; 85 = profile not found.
        return self._run(self.status_command(), 60, check=False).returncode != 85

    def up(self) -> KubeCluster:
        exists = self.exists()
        steps = self.plan(exists)[1:]
        try:
            for argv in steps:
                if argv[:2] == [self.minikube, "start"]:
                    self.write_cni_manifest()
                    self._created = True
                self._run(argv, self.timeout)
            api = KubeApi(context=self.profile)   # minikube writes its context into the default kubeconfig
            cluster = MinikubeCluster(self, api, provider=self.name, image=self.image,
                                      pull_policy="Never", datapath=self.cni.name, run_id=self.run_id)
            return cluster.open(self.timeout)
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> None:
        if self._created and not self.keep_cluster:
            self._run(self.delete_command(), 300)
            self._created = False


class MinikubeCluster(KubeCluster):
    def __init__(self, owner: MinikubeProvider, *args, **kw):   # not "provider": KubeCluster's keyword
        super().__init__(*args, **kw)
        self._mk = owner

    def environment(self) -> dict[str, str]:
        env = super().environment()
        bundled = self._mk.cni.name in BUILTIN_CNIS
        env.update({"minikube": MINIKUBE_VERSION, "minikube_driver": self._mk.driver,
                    "cni": self._mk.cni.name,
                    "cni_version": "minikube-bundled" if bundled else self._mk.cni.version})
        return env

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._mk.teardown()
