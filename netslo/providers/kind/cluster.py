"""``kind``: a throwaway multi-node cluster in Docker, with a pinned CNI and the netslo agent image.

    KindProvider(cni="calico", nodes=2, name="netslo", keep_cluster=False, encapsulation=None,
                 image=DEFAULT_IMAGE, kind=$NETSLO_KIND or "kind", helm="helm",
                 node_image=$NETSLO_KIND_NODE_IMAGE or KIND_NODE_IMAGE, workdir=None,
                 timeout=600.0, archive=$NETSLO_AGENT_ARCHIVE or None).up() -> KubeCluster

``nodes`` counts the nodes pods run on: 1 = a single control-plane node, N >= 2 = one control plane +
N-1 workers, the control plane without its NoSchedule taint (a kubeadm patch), so ``--netslo-nodes 2``
is two kind nodes, not three. The config disables kind's default CNI and sets the pod/service subnets
the CNI's data file asks for. With ``keep_cluster`` an existing cluster of that name is reused (its
installed CNI must be the one asked for) and nothing but the run namespace is deleted at the end. A
cluster this provider started to create is deleted on any failure, also a ``kind create`` that timed
out half-way. Every command line is built by a method (``*_command``) so tests can check what would
run; timeouts are seconds. ``$NETSLO_KIND`` / ``$NETSLO_KIND_NODE_IMAGE`` name another kind binary and
node image, ``$NETSLO_AGENT_ARCHIVE`` a tarball of the agent image (docker-archive, or an OCI layout
that may leave out layers the node image's containerd already holds) for a new cluster's nodes to
import from a bind mount instead of the engine's copy (``scripts/kind-offline.sh env`` prints all
three for the self-built, registry-free toolchain). While ``kind create`` still runs the image goes
into the nodes as soon as their containerd answers, and the CNI's configuration into the cluster as
soon as its API server is ready, with the CNI's agents when they can reach the API server at its own
address (Calico, Cilium: they start on each node as it joins), else after the create (``cni.install``).

The nodes are containers of this host, so ``KindCluster`` also sees the datapath from here
(``kind_host``): ``node_netns``, ``netns_of`` and ``host_interface`` for the per-hop DSCP capture
(``observation_points``) and the bandwidth tests' qdisc reads; ``exec_in`` runs QoS helper flows in a
pod's network namespace from the host, as the embedded provider does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from pathlib import Path

import yaml

from netslo.core import families, progress
from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.core.phase_times import timed_call
from netslo.core.procs import CHILD_CWD, child_env
from netslo.impair import drop
from netslo.providers import cni as cni_mod
from netslo.providers.base import PathPoint, Pod
from netslo.providers.cni.install import (
    Installing,
    apply_staged,
    apply_workloads,
    await_datapath,
    await_staged,
    prepare,
)
from netslo.providers.kind import host as kind_host
from netslo.providers.kube import manifests as km
from netslo.providers.kube.api import KubeApi
from netslo.providers.kube.cluster import KubeCluster
from netslo.providers.kube.reap import reap_kind_clusters, remove_kind_owner, write_kind_owner
from netslo.providers.tool import run_tool

KIND_VERSION = "v0.33.0"  # go install sigs.k8s.io/kind@v0.33.0
# kind v0.33.0's default node image (pkg/apis/config/defaults/image.go at tag v0.33.0): Kubernetes
# v1.37.0, the version scripts/kind-offline.sh builds (NETSLO_KVER=v1.34.4 builds the old one).
KIND_NODE_IMAGE = ("kindest/node:v1.37.0@sha256:"
                   "a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5")
# kind has no hard limit; every node is a privileged container running systemd, containerd and kubelet
# (~0.5 GB and a busy core while it joins), so more than this is refused as a usage error up front.
MAX_NODES = 8
# The node image scripts/kind-offline.sh builds (its Calico has no BIRD: only the VXLAN backend runs)
OFFLINE_NODE_IMAGE = "localhost/netslo-kind-node:"
# IPv6 CIDRs of dual-stack and IPv6 clusters: kind's own defaults for those families
# (kind.sigs.k8s.io, "Configuration" > "IP Family"); the IPv4 ones come from the CNI's data file.
POD_SUBNET6 = "fd00:10:244::/56"
SERVICE_SUBNET6 = "fd00:10:96::/112"
KIND_ENV = "NETSLO_KIND"
ARCHIVE_ENV = "NETSLO_AGENT_ARCHIVE"   # a tarball of the agent image (scripts/kind-offline.sh env)
NODE_IMAGE_ENV = "NETSLO_KIND_NODE_IMAGE"
CNI_LABEL = "netslo.io/cni"
# DaemonSets that identify an installed CNI (kube-system), for a reused cluster made without our label.
CNI_DAEMONSETS = {"calico-node": "calico", "cilium": "cilium", "antrea-agent": "antrea"}
# The kind control plane runs pods too when nodes >= 2 (kubeadm would taint it NoSchedule).
UNTAINT_PATCH = "kind: InitConfiguration\nnodeRegistration:\n  taints: []\n"
# kubelet >= 1.35 refuses a cgroup v1 host unless its configuration says so (KEP-5573; it then warns
# that cgroup v1 is deprecated); set only where the engine runs cgroup v1.
CGROUP_V1_PATCH = "kind: KubeletConfiguration\nfailCgroupV1: false\n"
_IMAGE_MINOR = re.compile(r":v1\.(\d+)\.\d+(?:@|$)")


def refuses_cgroup_v1(node_image: str) -> bool:
    """Whether the node image's kubelet may refuse a cgroup v1 host (Kubernetes >= 1.35, or a tag
    that does not say its version: the patch is harmless from 1.31 on)."""
    m = _IMAGE_MINOR.search(node_image)
    return m is None or int(m.group(1)) >= 35


LOAD_POLL_S = 0.5   # how often bring-up asks whether the nodes' containerd answers (to start the image load)
API_POLL_S = 0.5    # how often bring-up asks whether the new API server is ready (to apply the CNI)
# Cilium's VXLAN device and port (its defaults.VxlanDevice, defaults.TunnelPortVXLAN), made on every node
# before its agent starts: see KindProvider._cilium_tunnel_first.
CILIUM_VXLAN = ("cilium_vxlan", 8472)
EARLY_KUBECONFIG = "kubeconfig-early"   # in the workdir: kind's kubeconfig read while kind create runs
ARCHIVE_IN_NODE = "/opt/netslo-agent/agent.tar"   # $NETSLO_AGENT_ARCHIVE as a node sees it (bind mount)
OCI_NAME = "io.containerd.image.name"   # an OCI layout's image name annotation, as ctr import reads it


def _in_thread(name: str, fn, *args) -> Future:
    """``fn(*args)`` in a thread of its own; its Future."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)   # (the submitted call still runs to its end)
    return future


def archive_tags(tar: tarfile.TarFile) -> list[str]:
    """The image names an image archive holds: a docker-archive's ``manifest.json`` RepoTags, or an
    OCI layout's ``index.json`` manifests named by containerd's ``io.containerd.image.name``
    annotation (what ``ctr images import`` names the image by). KeyError when it has neither file."""
    names = tar.getnames()
    if "manifest.json" in names:
        return [t for m in json.load(tar.extractfile("manifest.json")) for t in m.get("RepoTags") or []]
    index = json.load(tar.extractfile("index.json"))
    return [m["annotations"][OCI_NAME] for m in index.get("manifests") or []
            if OCI_NAME in (m.get("annotations") or {})]


def check_archive(path: str, image: str) -> None:
    """SpecError unless ``path`` is an image archive (docker-archive or OCI layout) holding ``image``."""
    try:
        with tarfile.open(path, "r:") as tar:   # uncompressed, as docker save and kind-offline write it
            tags = archive_tags(tar)
    except (OSError, KeyError, tarfile.TarError, ValueError) as e:
        why = (str(e).splitlines() or [type(e).__name__])[0]
        raise SpecError(f"${ARCHIVE_ENV}", path, "a docker-archive or OCI-layout tarball of the agent image "
                                                 f"({why})") from None
    if image not in tags:
        raise SpecError(f"${ARCHIVE_ENV}", path, f"an archive of {image} (it holds {', '.join(tags) or 'no tag'})")


class KindProvider:
    name = "kind"

    def __init__(self, cni: str = "calico", nodes: int = 2, name: str = "netslo",
                 keep_cluster: bool = False, encapsulation: str | None = None,
                 image: str | None = None, kind: str | None = None,
                 helm: str = "helm", node_image: str | None = None, workdir: str | None = None,
                 timeout: float = 600.0, run_id: str | None = None, ip_family: str = "dual",
                 archive: str | None = None):
        if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
            raise SpecError("--netslo-nodes", nodes, f"a whole number 1..{MAX_NODES}")
        if not km._DNS_LABEL.match(name):
            raise SpecError("kind cluster name", name, "lowercase letters, digits and '-'")
        self.cni = cni_mod.load(cni)
        self.encapsulation = cni_mod.encapsulation(self.cni, encapsulation)
        self.families = families.families_of(ip_family, "--netslo-ip-family")
        self.ip_family = ip_family
        self.nodes = nodes
        self.cluster_name = name
        self.keep_cluster = keep_cluster
        self.image = image or os.environ.get("NETSLO_AGENT_IMAGE") or km.DEFAULT_IMAGE
        self.archive = archive or os.environ.get(ARCHIVE_ENV) or None
        if self.archive:
            check_archive(self.archive, self.image)
        self.kind = kind or os.environ.get(KIND_ENV) or "kind"
        self.helm = helm
        self.node_image = node_image or os.environ.get(NODE_IMAGE_ENV) or KIND_NODE_IMAGE
        if self.cni.name == "calico" and self.encapsulation != "vxlan" and self.node_image.startswith(OFFLINE_NODE_IMAGE):
            # else calico-node's startup probe waits for a BIRD that is not there until the 600 s timeout
            raise SpecError("encapsulation", self.encapsulation,
                            f"vxlan with the offline node image {self.node_image}: its Calico is built without "
                            "BIRD, which ipip and none (BGP-routed) need")
        self.workdir = Path(workdir) if workdir else Path(tempfile.gettempdir()) / f"netslo-kind-{name}"
        self.timeout = timeout
        self.run_id = run_id
        # the engine's host runs cgroup v1 (asked at up(); None until then): kubelet must be told
        self.cgroup_v1: bool | None = None
        self._created_cluster = False
        self._create_ok = False          # kind create exited 0 (the CNI may not be installed yet)
        self._create_complete = False
        self.cni_info: dict = {}

    # ---- what would run ---------------------------------------------------------------------
    @property
    def kubeconfig(self) -> str:
        return str(self.workdir / "kubeconfig")

    @property
    def config_path(self) -> str:
        return str(self.workdir / "kind-config.yaml")

    def config(self) -> dict:
        """The kind Cluster config (kind.x-k8s.io/v1alpha4)."""
        roles = ["control-plane"] + ["worker"] * (self.nodes - 1)
        cfg = {
            "kind": "Cluster",
            "apiVersion": "kind.x-k8s.io/v1alpha4",
            "name": self.cluster_name,
            "networking": {
                "disableDefaultCNI": True,
                **({} if self.ip_family == "ipv4" else {"ipFamily": self.ip_family}),
                "podSubnet": ",".join(self.subnets("pod")),
                "serviceSubnet": ",".join(self.subnets("service")),
                "kubeProxyMode": "iptables",
            },
            "nodes": [{"role": r, "image": self.node_image,
                       "labels": {CNI_LABEL: self.cni.name}, **self._archive_mount()} for r in roles],
        }
        patches = ([UNTAINT_PATCH] if self.nodes >= 2 else []) + ([CGROUP_V1_PATCH] if self.cgroup_v1 else [])
        if patches:
            cfg["kubeadmConfigPatches"] = patches
        return cfg

    def _archive_mount(self) -> dict:
        """A node's ``extraMounts`` showing it the agent image's archive (read-only), if there is one."""
        if not self.archive:
            return {}
        return {"extraMounts": [{"hostPath": os.path.abspath(self.archive), "containerPath": ARCHIVE_IN_NODE,
                                 "readOnly": True}]}

    def subnets(self, kind: str) -> list[str]:
        """The cluster's ``pod`` or ``service`` CIDRs, IPv4 first (kind's order for dual-stack)."""
        v4 = self.cni.pod_subnet if kind == "pod" else self.cni.service_subnet
        v6 = POD_SUBNET6 if kind == "pod" else SERVICE_SUBNET6
        return {"ipv4": [v4], "ipv6": [v6], "dual": [v4, v6]}[self.ip_family]

    def config_yaml(self) -> str:
        return "# written by netslo (netslo/providers/kind/cluster.py)\n" + yaml.safe_dump(self.config(), sort_keys=False)

    def list_command(self) -> list[str]:
        return [self.kind, "get", "clusters"]

    def create_command(self) -> list[str]:
        # --wait 0s: nodes stay NotReady until the CNI is installed; we wait for that ourselves.
        return [self.kind, "create", "cluster", "--name", self.cluster_name, "--config", self.config_path,
                "--image", self.node_image, "--kubeconfig", self.kubeconfig, "--wait", "0s"]

    def kubeconfig_command(self) -> list[str]:
        return [self.kind, "export", "kubeconfig", "--name", self.cluster_name, "--kubeconfig", self.kubeconfig]

    def node_names(self) -> list[str]:
        """kind's names of the node containers (and nodes): <name>-control-plane, <name>-worker,
        <name>-worker2, ..."""
        return [f"{self.cluster_name}-control-plane"] + [
            f"{self.cluster_name}-worker{i if i > 1 else ''}" for i in range(1, self.nodes)]

    def import_command(self, node: str, snapshotter: str) -> list[str]:
        """Into a new cluster with an archive: node ``node``'s containerd imports it from the bind mount
        that shows it there (``ARCHIVE_IN_NODE``), with the flags of ``kind load image-archive``,
        which instead streams the archive through the engine into every node (on this project's 2-CPU
        host 21 CPU-seconds for 276 MB into 2 nodes, 15 even when the nodes had it already)."""
        return [kind_host.DOCKER_CLI, "exec", node, "ctr", "--namespace=k8s.io", "images", "import",
                "--all-platforms", "--digests", f"--snapshotter={snapshotter}", ARCHIVE_IN_NODE]

    def reload_command(self) -> list[str]:
        """The engine's image, into a reused cluster or a new one without an archive (kind skips the
        nodes that have it already)."""
        return [self.kind, "load", "docker-image", self.image, "--name", self.cluster_name]

    def delete_command(self) -> list[str]:
        return [self.kind, "delete", "cluster", "--name", self.cluster_name, "--kubeconfig", self.kubeconfig]

    def plan(self, exists: bool) -> list[list[str]]:
        """The kind commands ``up()`` runs, in order (CNI install and waits go through the API and
        helm; an archive's import into a new cluster's nodes is ``import_command``)."""
        if exists and self.keep_cluster:
            return [self.list_command(), self.kubeconfig_command(), self.reload_command()]
        if exists:
            raise InfrastructureError(f"kind cluster {self.cluster_name!r} exists and keep_cluster is off; "
                                      f"delete it (kind delete cluster --name {self.cluster_name}) or reuse it")
        return [self.list_command(), self.create_command()] + ([] if self.archive else [self.reload_command()])

    # ---- doing it ---------------------------------------------------------------------------
    def _run(self, argv: list[str], timeout: float) -> str:
        return run_tool(argv, timeout, install=f"install kind {KIND_VERSION}").stdout.decode()

    def preflight(self) -> None:
        """What can be checked before anything is created: the kind binary and the CNI's source."""
        if not (shutil.which(self.kind) if os.sep not in self.kind else os.access(self.kind, os.X_OK)):
            raise Unsupported(f"kind not found ({self.kind}); install kind {KIND_VERSION} "
                              f"or set ${KIND_ENV}")
        cni_mod.check_source(self.cni)

    def exists(self) -> bool:
        if not (shutil.which(self.kind) if os.sep not in self.kind else os.access(self.kind, os.X_OK)):
            raise Unsupported(f"kind not found ({self.kind}); install kind {KIND_VERSION} "
                              f"or set ${KIND_ENV}")
        out = self._run(self.list_command(), 30)
        return self.cluster_name in out.split()

    def up(self) -> KubeCluster:
        # kind clusters a killed run left (owner record naming a dead process) go first
        for line in reap_kind_clusters(self.kind, keep_cluster=self.keep_cluster):
            progress.note(line)
        exists = self.exists()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not exists and refuses_cgroup_v1(self.node_image):
            self.cgroup_v1 = kind_host.engine_cgroup_version() == 1
        Path(self.config_path).write_text(self.config_yaml())
        steps = self.plan(exists)[1:]  # the list command already ran
        loading = applying = None
        try:
            for argv in steps:
                creating = argv[:3] == [self.kind, "create", "cluster"]
                # Set before the command: a create that fails or times out half-way has made node
                # containers already, and teardown() must delete them.
                self._created_cluster = self._created_cluster or creating
                if creating:   # a later run reaps it if this process dies without deleting it
                    write_kind_owner(self.cluster_name)
                    # While kubeadm brings the cluster up (mostly waiting for its components): the agent
                    # image goes into the nodes as soon as their containerd answers, the CNI into the
                    # cluster as soon as its API server is ready (docs/performance.md).
                    created = threading.Event()
                    loading = _in_thread("kind-load", self._load_when_nodes_run, created)
                    applying = _in_thread("kind-cni", self._prepare_cni_when_api_ready, created)
                if argv == self.reload_command() and loading is not None:
                    continue   # started beside kind create above
                try:
                    with progress.phase(" ".join(argv[1:4]) + f" {self.cluster_name}"):
                        self._run(argv, self.timeout)
                    self._create_ok = self._create_ok or creating
                finally:
                    if creating:
                        created.set()
                if creating:
                    kubectl = KubeApi(self.kubeconfig)
                    installing = self._prepared_early(applying) or self._prepare_cni(kubectl, "configuration")
                    with progress.phase(f"CNI {self.cni.name} install and readiness"):
                        if not installing.applied:
                            self._apply_agents(kubectl, installing)
                        await_datapath(kubectl, installing, self.timeout)
                        apply_staged(kubectl, installing)
                    self.cni_info = installing.info
                    loading.result()   # (its error, if any, is the bring-up's)
                elif argv[:3] == [self.kind, "export", "kubeconfig"]:
                    self.cni_info = self.installed_cni(KubeApi(self.kubeconfig))
            kubectl = KubeApi(self.kubeconfig)
            cluster = KindCluster(self, kubectl, provider=self.name, image=self.image, pull_policy="Never",
                                  datapath=self.cni.name, run_id=self.run_id, single_kernel=True)
            cluster.families = self.families
            if applying is not None:   # the CNI's last workloads: awaited once the run's pods are made
                cluster.defer(f"CNI {self.cni.name}: its remaining workloads",
                              lambda: self._await_staged(kubectl, installing))
            return cluster.open(self.timeout)
        except BaseException as e:
            futures_wait([f for f in (loading, applying) if f is not None])   # never delete under them
            try:
                self.teardown()
            except InfrastructureError as te:   # keep the cause; say what is left behind
                raise InfrastructureError(f"{e}; and deleting the cluster failed: {te}") from e
            raise

    # ---- the CNI, prepared while kind create runs ---------------------------------------------
    def _prepare_cni(self, api, how: str, endpoint: tuple[str, int] | None = None) -> Installing:
        with progress.phase(f"CNI {self.cni.name} {how}"):
            return prepare(api, self.cni, encapsulation=self.encapsulation, pod_subnet=",".join(self.subnets("pod")),
                           api_endpoint=endpoint)

    def _prepare_cni_when_api_ready(self, created: threading.Event) -> Installing | None:
        """The CNI's configuration (``cni.install.prepare``: CRDs, RBAC, ConfigMaps) applied once the
        control plane's API server is ready, while kind still joins the workers (on kind v1.34 ready
        14 s into a 24 s create; the configuration took 2-4 s to apply). The kubeconfig is kind's own
        (``kind get kubeconfig``: read from the control plane node once kubeadm wrote it). When the CNI's
        agents can reach the API server at its own address (``Installing.api_endpoint``: Calico,
        Cilium) they are applied then too and start on each node as it joins; else only after the
        create, once kube-proxy runs everywhere (``apply_workloads``). None when kind create ended first."""
        api = None
        while not created.is_set():
            api = api or self._early_api()
            if api is not None and api.ready() and api.get("namespace", "kube-system", missing_ok=True):
                installing = self._prepare_cni(api, "configuration (beside kind create)", api.server_endpoint())
                if installing.api_endpoint is not None:
                    with progress.phase(f"CNI {self.cni.name} agents (beside kind create, API server at "
                                        f"{installing.api_endpoint[0]}:{installing.api_endpoint[1]})"):
                        self._apply_agents(api, installing)
                return installing
            created.wait(API_POLL_S)
        return None

    def _apply_agents(self, api, installing: Installing) -> None:
        """The CNI's agents (``apply_workloads``), Cilium's tunnel device made first."""
        self._cilium_tunnel_first(installing)
        apply_workloads(api, installing, self.timeout, self.helm)

    def _cilium_tunnel_first(self, installing: Installing) -> None:
        """Cilium in VXLAN mode: its tunnel device made on every node before its agent starts, so that
        each node compiles its BPF templates once. A new node's agent hashes its datapath configuration
        before it creates ``cilium_vxlan``; that configuration names the device's ifindex, so the hash
        fails and is dropped, the templates are compiled under an empty hash, and the next datapath
        reinitialisation (seconds later: the host endpoint's id arrives) compiles every template again
        and reloads every endpoint (Cilium 1.20.2 pkg/datapath/loader/base.go Reinitialize,
        pkg/datapath/tunnel/tunnel.go; on kind 2026-11-29 the second compile ran while the first
        measurements did). The agent keeps a device of that name and port (setupVxlanDevice)."""
        if installing.spec.name != "cilium" or installing.info.get("encapsulation") != "vxlan":
            return
        name, port = CILIUM_VXLAN
        for node in self.node_names():
            kind_host.add_external_vxlan(kind_host.node_netns(node), name, port)

    def _early_api(self):
        """A KubeApi on the new cluster's kubeconfig, once kind can read it from the control plane."""
        proc = run_tool([self.kind, "get", "kubeconfig", "--name", self.cluster_name], 30,
                        install=f"install kind {KIND_VERSION}", check=False)
        if proc.returncode or not proc.stdout.strip():
            return None
        path = self.workdir / EARLY_KUBECONFIG
        path.write_bytes(proc.stdout)
        return KubeApi(str(path))

    def _prepared_early(self, applying: Future) -> Installing | None:
        """The CNI prepared beside kind create; None if it was not (kind create was done first) or it
        failed (said, and prepared again now that the cluster is complete)."""
        try:
            return applying.result()
        except InfrastructureError as e:
            progress.note(f"CNI {self.cni.name}: its configuration beside kind create failed ({e}); applying it again")
            return None
        finally:
            (self.workdir / EARLY_KUBECONFIG).unlink(missing_ok=True)

    def _await_staged(self, api, installing: Installing) -> None:
        await_staged(api, installing, self.timeout)
        self._create_complete = True

    def _load_when_nodes_run(self, created: threading.Event) -> None:
        """Load the agent image once every node's containerd answers (asked every ``LOAD_POLL_S``),
        or once ``kind create`` has ended if that comes first; nothing if the create failed."""
        while not created.is_set() and not kind_host.runtimes_up(self.cluster_name, self.nodes):
            created.wait(LOAD_POLL_S)
        if created.is_set() and not self._create_ok:
            return      # up() deletes what the failed create made
        self._load()

    def _load(self) -> None:
        if not self.archive:
            argv = self.reload_command()
            with progress.phase(" ".join(argv[1:4]) + f" {self.cluster_name}"):
                self._run(argv, self.timeout)
            return
        nodes = self.node_names()
        with progress.phase(f"agent image import in {', '.join(nodes)}"), \
                ThreadPoolExecutor(len(nodes), thread_name_prefix="kind-import") as pool:
            for f in [pool.submit(self._import, n) for n in nodes]:
                f.result()

    def _import(self, node: str) -> None:
        argv = self.import_command(node, kind_host.cri_snapshotter(node))
        run_tool(argv, self.timeout, install=kind_host.DOCKER)

    def installed_cni(self, kubectl) -> dict:
        """What a reused cluster runs: the CNI of its nodes' netslo label, else of its DaemonSets.

        A cluster made for another CNI is an error: its results would be reported under the wrong name.
        """
        names = {n.get("metadata", {}).get("labels", {}).get(CNI_LABEL) for n in kubectl.get("nodes")}
        names.discard(None)
        found, image = None, ""
        for ds, cni in CNI_DAEMONSETS.items():
            obj = kubectl.get("daemonset", ds, "kube-system", missing_ok=True)
            if obj is not None:
                found = cni
                containers = obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
                image = containers[0].get("image", "") if containers else ""
                break
        installed = found or (names.pop() if len(names) == 1 else None)
        if installed != self.cni.name:
            raise InfrastructureError(
                f"kind cluster {self.cluster_name!r} (kept) runs CNI {installed or 'none found'}, not the "
                f"requested {self.cni.name}; delete it (kind delete cluster --name {self.cluster_name}) "
                f"or ask for --netslo-cni {installed}" if installed else
                f"kind cluster {self.cluster_name!r} (kept) runs no CNI netslo knows "
                f"({', '.join(CNI_DAEMONSETS)} absent from kube-system); delete it and let netslo create it")
        version = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "unknown"
        return {"cni": installed, "cni_version": version, "cni_image": image,
                "encapsulation": "unknown (reused cluster)", "reused": "true"}

    @property
    def deletes_cluster(self) -> bool:
        """Whether ``teardown()`` deletes the kind cluster (this provider made it and does not keep it)."""
        return self._created_cluster and (not self.keep_cluster or not self._create_complete)

    def teardown(self) -> None:
        """Delete the kind cluster if this provider created it (never a reused one). With
        ``keep_cluster`` a cluster whose creation or CNI install did not finish is deleted too: kept,
        it would be reused half-made."""
        owned = self._created_cluster
        if self.deletes_cluster:
            self._run(self.delete_command(), 300)   # raises: the owner record stays for a later reap
            self._created_cluster = False
            for f in (self.kubeconfig, self.config_path, self.workdir / EARLY_KUBECONFIG):   # what up() wrote
                Path(f).unlink(missing_ok=True)
            try:
                self.workdir.rmdir()    # when nothing else is in it
            except OSError:
                pass
        if owned:
            remove_kind_owner(self.cluster_name)    # deleted, or kept on purpose: nothing to reap


class KindCluster(KubeCluster):
    """A KubeCluster that also deletes its kind cluster on close (unless kept).

    ``owner`` is the KindProvider; not named ``provider``, which is KubeCluster's keyword (the provider's
    name): ``KindCluster(p, api, provider="kind")`` must bind each to its own parameter."""

    def __init__(self, owner: KindProvider, *args, **kw):
        super().__init__(*args, **kw)
        self._kind = owner
        self._node_ns: dict[str, str] = {}
        self._pod_ns: dict[str, tuple[str, str]] = {}

    def open(self, ready_timeout: float = 60.0) -> "KindCluster":
        """``KubeCluster.open``, after removing a partition (``netslo.impair.drop``) that a run killed
        while it held one left on a node of a kept cluster: under it the node would not be Ready."""
        said = []
        for node in self._kind.node_names():
            try:
                ns = self.node_netns(node)
            except (InfrastructureError, OSError):
                continue          # no such node container (a kept cluster of fewer nodes)
            line = drop.reap(ns, "eth0")
            if line:
                said.append(f"kind reap: node {node}: {line}, left by a killed run")
                progress.note(said[-1])
        super().open(ready_timeout)
        self.reaped = said + self.reaped     # open() sets what it reaped of dead runs' namespaces
        return self

    # ---- the datapath seen from this host (kind nodes are local containers) ---------------------
    @property
    def bandwidth_mechanism(self) -> str:
        """What honours bandwidth annotations here (the CNI data file's ``bandwidth``)."""
        return self._kind.cni.bandwidth

    @property
    def kind_provider(self) -> KindProvider:
        """The provider that made this cluster (its name, node containers, kind binary)."""
        return self._kind

    def node_netns(self, node: str) -> str:
        """``/proc/<pid>/ns/net`` of kind node ``node``'s container."""
        if node not in self._node_ns:
            self._node_ns[node] = kind_host.node_netns(node)
        return self._node_ns[node]

    def _pod_netns(self, pod: Pod) -> tuple[str, str]:
        """(namespace path, host-side interface) of a pod-network pod: the inode of its namespace and
        its eth0's peer index, read in the pod, found on this host."""
        if pod.name not in self._pod_ns:
            if pod.host_network:
                raise Unsupported(f"pod {pod.name} is a hostNetwork pod: it has no namespace of its own")
            ids = json.loads(self.exec_agent(pod, ["netns-id", "eth0"], 30))   # the pod's warm session
            path = kind_host.netns_by_inode(ids["inode"])
            self._pod_ns[pod.name] = (path, kind_host.interface_name(self.node_netns(pod.node), ids["iflink"]))
        return self._pod_ns[pod.name]

    def netns_of(self, pod: Pod) -> str:
        return self._pod_netns(pod)[0]

    def host_interface(self, pod: Pod) -> str:
        """The pod's veth peer on its node (cali..., lxc...): where the CNI's bandwidth plugin shapes."""
        return self._pod_netns(pod)[1]

    @timed_call("bulk flows and pod commands")
    def exec_in(self, pod: Pod, argv: list[str], timeout: float = 60.0) -> bytes:
        """Run a helper program (a bulk flow, sysctl) in the pod's network namespace from this host,
        as the embedded provider does: the same sockets, sysctls and datapath as the pod's own
        processes, and root may choose any congestion control the kernel has (the agent's user may
        choose only the host's tcp_allowed_congestion_control). stdout; InfrastructureError if it fails."""
        what = f"{' '.join(a for a in argv[:3] if a != sys.executable)} in the namespace of pod {pod.name}"
        try:
            proc = subprocess.run(["nsenter", f"--net={self.netns_of(pod)}", *argv], capture_output=True,
                                  timeout=timeout, env=child_env(), cwd=CHILD_CWD)
        except subprocess.TimeoutExpired:
            raise InfrastructureError(f"{what}: no answer within {timeout:.0f} s") from None
        if proc.returncode:
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            raise InfrastructureError(f"{what}: exit {proc.returncode}: {lines[-1] if lines else 'no output'}")
        return proc.stdout

    def disruptions(self):
        """The Kubernetes actions and a partition of a node done from this host
        (``netslo.providers.kind.disruption``)."""
        from netslo.providers.kind.disruption import KindDisruptions
        return KindDisruptions(self)

    def observation_points(self, client: Pod, server: Pod) -> list[PathPoint]:
        """Where client -> server traffic can be captured from this host, in path order: the pods'
        eth0, their host-side veths, and across nodes the CNI's tunnel device on each node and the
        nodes' underlay eth0 (VXLAN/Geneve-encapsulated there when the CNI tunnels)."""
        cns, sns = self.node_netns(client.node), self.node_netns(server.node)
        chost, shost = self.host_interface(client), self.host_interface(server)
        points = [PathPoint("client pod eth0", self.netns_of(client), "eth0"),
                  PathPoint(f"{client.node} {chost}", cns, chost)]
        if client.node != server.node:
            ctun, stun = kind_host.tunnel_devices(cns), kind_host.tunnel_devices(sns)
            points += [PathPoint(f"{client.node} {t}", cns, t) for t in ctun]
            points += [PathPoint(f"underlay {client.node} eth0", cns, "eth0", bool(ctun)),
                       PathPoint(f"underlay {server.node} eth0", sns, "eth0", bool(stun))]
            points += [PathPoint(f"{server.node} {t}", sns, t) for t in stun]
        points += [PathPoint(f"{server.node} {shost}", sns, shost),
                   PathPoint("server pod eth0", self.netns_of(server), "eth0")]
        return points

    def environment(self) -> dict[str, str]:
        env = super().environment()
        info = self._kind.cni_info
        env.update({"kind": KIND_VERSION, "kind_node_image": self._kind.node_image,
                    "cni": info.get("cni", self._kind.cni.name),
                    "cni_version": info.get("cni_version", self._kind.cni.version),
                    "encapsulation": info.get("encapsulation", self._kind.encapsulation)})
        for key in ("cni_sha256", "cni_source", "cni_image"):
            if info.get(key):
                env[key] = info[key]
        return env

    def close(self) -> None:
        try:
            if self._kind.keep_cluster and self._kind.deletes_cluster:
                self.settle()   # a cluster kept for the next run is complete: its CNI all ready
        except InfrastructureError as e:
            progress.note(f"kind cluster {self._kind.cluster_name}: not kept, its bring-up did not finish ({e})")
        try:
            if self._kind.deletes_cluster:   # the namespace goes with the cluster: no delete, no wait
                self._closed = True
                self.end_sessions()
            else:   # the cluster outlives the run (kept, or not netslo's): its namespace ends on its own
                super().close(wait=False)
        finally:
            self._kind.teardown()
