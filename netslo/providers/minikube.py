"""``minikube``: a minikube profile with a CNI and the netslo agent image.

    MinikubeProvider(cni="calico", nodes=2, profile="netslo", keep_cluster=False, driver="docker",
                     kubernetes_version=$NETSLO_MINIKUBE_KUBERNETES_VERSION or MINIKUBE_K8S_VERSION,
                     image=DEFAULT_IMAGE, minikube=$NETSLO_MINIKUBE or "minikube",
                     base_image=$NETSLO_MINIKUBE_BASE_IMAGE, network=$NETSLO_MINIKUBE_NETWORK,
                     workdir=None, timeout=900.0).up() -> KubeCluster

minikube's own ``--cni`` is used where minikube supports the CNI (calico, cilium: minikube's bundled
versions, reported as such); for antrea the pinned upstream manifest (providers/cni/antrea.yaml) is
fetched, checked, overlaid and passed as ``--cni=<file>``.

Without a registry (``base_image``: a kicbase-like image already in the docker engine, e.g. the one
``scripts/minikube-offline.sh`` derives from the offline kind node image) nothing may be pulled or
downloaded: ``--base-image`` names it, ``--preload=false --cache-images=false --install-addons=false``
keep minikube from fetching the preload tarball, the component images and the storage-provisioner
addon, and the CNI is netslo's own installer, as on kind (``--cni=false``, then the pinned manifest,
overlaid, applied server-side, its workloads and the nodes waited for; its images must be in the
nodes). ``network`` names an existing docker network for the nodes (else minikube makes one in
192.168.49.0/24 onwards). As root, and always without a registry (``--cni=false`` with containerd, a
Kubernetes patch release newer than minikube's list), ``--force`` is passed: minikube refuses those
otherwise. Command lines come from ``*_command`` methods so tests can check what would run; timeouts
are seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.providers import cni as cni_mod
from netslo.providers.cni.install import install as install_cni
from netslo.providers.cni.install import render
from netslo.providers.kind import host as kind_host
from netslo.providers.kube import manifests as km
from netslo.providers.kube.api import KubeApi
from netslo.providers.kube.cluster import KubeCluster
from netslo.providers.tool import run_tool

MINIKUBE_VERSION = "v1.38.1"
# The newest Kubernetes minikube v1.38.1 supports (pkg/minikube/constants: NewestKubernetesVersion);
# without a registry the nodes run the offline kind node image's version instead (scripts/kind-offline.sh).
MINIKUBE_K8S_VERSION = "v1.35.1"
BUILTIN_CNIS = ("calico", "cilium")  # minikube start --cni=<name>
DRIVERS = ("docker", "kvm2", "qemu2", "podman")
MAX_NODES = 8
MINIKUBE_ENV = "NETSLO_MINIKUBE"                            # the minikube binary
BASE_IMAGE_ENV = "NETSLO_MINIKUBE_BASE_IMAGE"               # a local base image: no registry
KUBERNETES_VERSION_ENV = "NETSLO_MINIKUBE_KUBERNETES_VERSION"
NETWORK_ENV = "NETSLO_MINIKUBE_NETWORK"                     # an existing docker network for the nodes


class MinikubeProvider:
    name = "minikube"

    def __init__(self, cni: str = "calico", nodes: int = 2, profile: str = "netslo",
                 keep_cluster: bool = False, driver: str = "docker",
                 kubernetes_version: str | None = None, image: str | None = None,
                 minikube: str | None = None, workdir: str | None = None,
                 timeout: float = 900.0, run_id: str | None = None, encapsulation: str | None = None,
                 base_image: str | None = None, network: str | None = None):
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
        self.kubernetes_version = (kubernetes_version or os.environ.get(KUBERNETES_VERSION_ENV)
                                   or MINIKUBE_K8S_VERSION)
        self.image = image or os.environ.get("NETSLO_AGENT_IMAGE") or km.DEFAULT_IMAGE
        self.minikube = minikube or os.environ.get(MINIKUBE_ENV) or "minikube"
        self.base_image = base_image or os.environ.get(BASE_IMAGE_ENV) or None
        self.network = network or os.environ.get(NETWORK_ENV) or None
        self.cni_info: dict = {}
        self.workdir = Path(workdir) if workdir else Path(tempfile.gettempdir()) / f"netslo-minikube-{profile}"
        self.timeout = timeout
        self.run_id = run_id
        # the docker engine runs cgroup v1 (asked at up() for the docker driver; None until then)
        self.cgroup_v1: bool | None = None
        self._created = False

    @property
    def cni_manifest_path(self) -> str:
        return str(self.workdir / f"{self.cni.name}-{self.cni.version}.yaml")

    @property
    def installs_cni(self) -> bool:
        """Whether netslo installs the CNI after ``minikube start`` (without a registry: minikube's
        bundled CNIs pull their images)."""
        return self.base_image is not None

    def cni_flag(self) -> str:
        """--cni value: "false" when netslo installs the CNI, else minikube's name for a CNI it
        bundles, else our rendered manifest's path."""
        if self.installs_cni:
            return "false"
        return self.cni.name if self.cni.name in BUILTIN_CNIS else self.cni_manifest_path

    def status_command(self) -> list[str]:
        return [self.minikube, "status", "-p", self.profile, "-o", "json"]

    def start_command(self) -> list[str]:
        argv = [self.minikube, "start", "-p", self.profile, f"--driver={self.driver}",
                f"--nodes={self.nodes}", f"--kubernetes-version={self.kubernetes_version}",
                "--container-runtime=containerd", f"--cni={self.cni_flag()}",
                f"--extra-config=kubeadm.pod-network-cidr={self.cni.pod_subnet}",
                f"--service-cluster-ip-range={self.cni.service_subnet}",
                # without a CNI yet, nodes are NotReady: netslo's installer waits for them itself
                "--wait=apiserver" if self.installs_cni else "--wait=apiserver,system_pods,node_ready",
                f"--wait-timeout={int(self.timeout)}s"]
        if self.base_image:
            argv += [f"--base-image={self.base_image}", "--preload=false", "--cache-images=false",
                     "--install-addons=false"]
        if self.network:
            argv.append(f"--network={self.network}")
        if self.cgroup_v1:   # kubelet >= 1.35 refuses a cgroup v1 host unless told (KEP-5573)
            argv.append("--extra-config=kubelet.fail-cgroupv1=false")
        if self.base_image or os.geteuid() == 0:
            argv.append("--force")
        return argv

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
        if self.cni.name in BUILTIN_CNIS or self.installs_cni:
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
                    if self.driver == "docker":
                        self.cgroup_v1 = kind_host.engine_cgroup_version() == 1
                        argv = self.start_command()
                    self._created = True
                self._run(argv, self.timeout)
                if argv[:2] == [self.minikube, "start"] and self.installs_cni:
                    self.cni_info = install_cni(KubeApi(context=self.profile), self.cni,
                                                encapsulation=self.encapsulation,
                                                pod_subnet=self.cni.pod_subnet, timeout=self.timeout)
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
        bundled = self._mk.cni.name in BUILTIN_CNIS and not self._mk.installs_cni
        info = self._mk.cni_info
        env.update({"minikube": MINIKUBE_VERSION, "minikube_driver": self._mk.driver,
                    "cni": self._mk.cni.name,
                    "cni_version": "minikube-bundled" if bundled else info.get("cni_version", self._mk.cni.version)})
        if self._mk.base_image:
            env["minikube_base_image"] = self._mk.base_image
        if info.get("encapsulation"):
            env["encapsulation"] = info["encapsulation"]
        for key in ("cni_sha256", "cni_source"):
            if info.get(key):
                env[key] = info[key]
        return env

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._mk.teardown()
