"""Install a pinned CNI into a cluster: fetch, apply our overlays, wait until every component is ready.

Overlays (our own, applied to the fetched upstream documents in memory):
- calico: CALICO_IPV4POOL_CIDR = the cluster's pod subnet; IPIP/VXLAN per ``encapsulation`` (VXLAN-only:
  backend "vxlan" and calico-node's BIRD health flags dropped); a startup probe on calico-node and
  calico-kube-controllers (each one's readiness check every second until it first passes, see
  ``_add_startup_probe``). No bandwidth CNI
  plugin is chained: since v3.30 felix itself shapes pods with kubernetes.io/*-bandwidth annotations
  (its "QoS controls", tbf on the host veth and on an ifb "bwcali..."), and a chained plugin races
  felix for the same ingress qdisc (a second annotated pod on a node then fails "create ingress
  qdisc: file exists").
- antrea: trafficEncapMode/tunnelType in antrea-agent.conf per ``encapsulation``; Antrea's images at the
  pinned version (the checked-in manifest says ``latest``; see ``antrea_overlay``).
- cilium: Helm values (Bandwidth Manager on, routing mode per ``encapsulation``).
A pod subnet "v4,v6" (a dual-stack kind cluster) or a v6 one also turns on each CNI's IPv6.
With ``api_endpoint`` (the API server's own address: ``KubeApi.server_endpoint()``) Calico's and Cilium's agents
reach the API server there instead of through the ``kubernetes`` Service (Calico: its
``kubernetes-services-endpoint`` ConfigMap; Cilium: k8sServiceHost/k8sServicePort), so they can start
before kube-proxy runs on their node.
Timeouts are seconds; a component that never becomes ready raises InfrastructureError naming it.
"""

from __future__ import annotations

import logging
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from netslo.core.errors import InfrastructureError
from netslo.providers.cni import (
    WORKLOAD_KINDS,
    CniSpec,
    digest_status,
    fetch,
)
from netslo.providers.cni import (
    encapsulation as check_encapsulation,
)
from netslo.providers.cni import (
    source as cni_source,
)
from netslo.providers.kube.wait import wait_nodes_ready, wait_workload

log = logging.getLogger("netslo.cni")


def _set_env(container: dict, name: str, value: str) -> None:
    env = container.setdefault("env", [])
    for e in env:
        if e.get("name") == name:
            e.clear()
            e.update({"name": name, "value": value})
            return
    env.append({"name": name, "value": value})


def split_subnets(pod_subnet: str) -> tuple[str | None, str | None]:
    """(IPv4 CIDR, IPv6 CIDR) of a pod subnet setting: one CIDR, or kind's "v4,v6" of a dual-stack cluster."""
    v4 = v6 = None
    for cidr in filter(None, (c.strip() for c in pod_subnet.split(","))):
        if ":" in cidr:
            v6 = cidr
        else:
            v4 = cidr
    return v4, v6


def calico_overlay(docs: list[dict], encapsulation: str, pod_subnet: str) -> list[dict]:
    """Calico manifest documents with our pools and encapsulation settings. An IPv6 CIDR in
    ``pod_subnet`` ("v4,v6", or v6 alone) turns on Calico's IPv6 as its dual-stack guide says:
    calico-ipam assigns both families, calico-node autodetects the node's IPv6 address (IP6) and felix
    programs IPv6 (FELIX_IPV6SUPPORT); the IPv6 pool gets the same encapsulation (Calico's VXLAN carries
    IPv6 since v3.23; it has no IPv6-in-IPIP, so ipip leaves IPv6 routed natively by BIRD)."""
    v4, v6 = split_subnets(pod_subnet)
    ipip = "Always" if encapsulation == "ipip" else "Never"
    vxlan = "Always" if encapsulation == "vxlan" else "Never"
    seen_node = seen_cfg = False
    for d in docs:
        if d.get("kind") == "DaemonSet" and d["metadata"]["name"] == "calico-node":
            for c in d["spec"]["template"]["spec"]["containers"]:
                if c["name"] == "calico-node":
                    if v4:
                        _set_env(c, "CALICO_IPV4POOL_CIDR", v4)
                        _set_env(c, "CALICO_IPV4POOL_IPIP", ipip)
                        _set_env(c, "CALICO_IPV4POOL_VXLAN", vxlan)
                    else:
                        _set_env(c, "IP", "none")
                        _set_env(c, "CALICO_ROUTER_ID", "hash")   # BIRD's router id without an IPv4 address
                    if v6:
                        _set_env(c, "IP6", "autodetect")
                        _set_env(c, "FELIX_IPV6SUPPORT", "true")
                        _set_env(c, "CALICO_IPV6POOL_CIDR", v6)
                        _set_env(c, "CALICO_IPV6POOL_VXLAN", vxlan)
                    if encapsulation == "vxlan":  # no BIRD runs: its health flags would never pass
                        for probe in ("livenessProbe", "readinessProbe"):
                            cmd = c.get(probe, {}).get("exec", {}).get("command")
                            if cmd:
                                c[probe]["exec"]["command"] = [a for a in cmd if a not in ("-bird-live", "-bird-ready")]
                    _add_startup_probe(c, "calico-node")
                    seen_node = True
        if d.get("kind") == "Deployment" and d["metadata"]["name"] == "calico-kube-controllers":
            for c in d["spec"]["template"]["spec"]["containers"]:
                if c["name"] == "calico-kube-controllers":
                    _add_startup_probe(c, "calico-kube-controllers")
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "calico-config":
            if encapsulation == "vxlan":
                d["data"]["calico_backend"] = "vxlan"   # no BIRD/BGP needed for VXLAN-only pools
            if v6:
                ipam = '"type": "calico-ipam"'
                conf = d["data"].get("cni_network_config", "")
                if ipam not in conf:
                    raise InfrastructureError("CNI calico: calico-config's cni_network_config has no calico-ipam "
                                              "entry to give IPv6 assignment to; the overlay does not fit this version")
                d["data"]["cni_network_config"] = conf.replace(
                    ipam, f'{ipam}, "assign_ipv4": "{str(bool(v4)).lower()}", "assign_ipv6": "true"', 1)
            seen_cfg = True
    if not (seen_node and seen_cfg):
        raise InfrastructureError("CNI calico: manifest has no calico-node DaemonSet / calico-config "
                                  "ConfigMap; the overlay does not fit this version")
    return docs


# calico-node's and calico-kube-controllers' readiness probes run every 10 s: felix is ready a few
# seconds after it starts, and the pod was marked Ready up to 10 s later (2026-11-28, kind v1.34:
# started 46 s, probe failed 49 s, Ready 59 s into bring-up; kube-controllers, started beside the gate's
# pods, Ready 6 s after them on 2026-11-29). A startup probe with the same check every second finds
# it ready sooner, and the kubelet runs the readiness probe as soon as a container has started; after
# that only the upstream 10 s readiness and liveness probes run (nothing extra while the gate measures).
STARTUP_PERIOD_S = 1
STARTUP_FAILURES = 600      # 10 min at 1 s: longer than any install timeout


def _add_startup_probe(container: dict, name: str) -> None:
    """A startupProbe running ``container``'s readiness check every STARTUP_PERIOD_S."""
    ready = container.get("readinessProbe", {}).get("exec")
    if ready is None:
        raise InfrastructureError(f"CNI calico: {name} has no exec readinessProbe to start from; "
                                  "the overlay does not fit this version")
    container["startupProbe"] = {"exec": {"command": list(ready["command"])},
                                 "periodSeconds": STARTUP_PERIOD_S, "failureThreshold": STARTUP_FAILURES,
                                 "timeoutSeconds": container["readinessProbe"].get("timeoutSeconds", 10)}


def antrea_overlay(docs: list[dict], encapsulation: str, version: str) -> list[dict]:
    """Antrea documents with trafficEncapMode / tunnelType set in antrea-agent.conf, and Antrea's own
    images at ``version``. The pinned file is the standard manifest checked in at the release's tag,
    rendered by Antrea's Helm chart with the image tag left at ``latest``; its release asset is the same
    rendering with the tag set to the version (Antrea's hack/generate-standard-manifests.sh
    ``--mode release``), which is what the image step here does."""
    _pin_antrea_images(docs, version)
    mode = "noEncap" if encapsulation == "none" else "encap"
    found = False
    for d in docs:
        if d.get("kind") == "ConfigMap" and "antrea-agent.conf" in (d.get("data") or {}):
            conf = d["data"]["antrea-agent.conf"]
            conf = _set_conf_line(conf, "trafficEncapMode", mode)
            if encapsulation != "none":
                conf = _set_conf_line(conf, "tunnelType", encapsulation)
            d["data"]["antrea-agent.conf"] = conf
            found = True
    if not found:
        raise InfrastructureError("CNI antrea: manifest has no ConfigMap with antrea-agent.conf; "
                                  "the overlay does not fit this version")
    return docs


ANTREA_IMAGE = re.compile(r"^(antrea/antrea-[a-z-]+):(latest|v[0-9][^:@]*)$")   # agent and controller


def _pin_antrea_images(docs: list[dict], version: str) -> None:
    """Every ``antrea/antrea-*:latest`` container image -> ``:<version>``; an image of another version,
    or none at all, means the overlay does not fit this file (InfrastructureError naming it)."""
    seen = []
    for d in docs:
        pod = ((d.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
            m = ANTREA_IMAGE.match(str(c.get("image", "")))
            if not m:
                continue
            if m.group(2) not in ("latest", version):
                raise InfrastructureError(f"CNI antrea: image {c['image']} in {d.get('kind')} "
                                          f"{d.get('metadata', {}).get('name')} is not of the pinned {version}")
            c["image"] = f"{m.group(1)}:{version}"
            seen.append(c["image"])
    if not seen:
        raise InfrastructureError("CNI antrea: manifest has no antrea/antrea-* container image; "
                                  "the overlay does not fit this version")


def _set_conf_line(conf: str, key: str, value: str) -> str:
    """Set a top-level 'key: value' in a YAML text, uncommenting '#key:' if that is all there is."""
    pat = re.compile(rf"^#?{re.escape(key)}:.*$", re.M)
    line = f"{key}: {value}"
    if pat.search(conf):
        return pat.sub(line, conf, count=1)
    return conf.rstrip("\n") + "\n" + line + "\n"


def cilium_values(spec: CniSpec, encapsulation: str, pod_subnet: str) -> dict:
    """Helm --set values: the data file's, plus routing per encapsulation."""
    values = dict(spec.values)
    v4, v6 = split_subnets(pod_subnet)
    if v6:   # Cilium's dual-stack / IPv6 switches; its Kubernetes IPAM takes the nodes' podCIDRs of both
        values.update({"ipv6.enabled": "true", **({} if v4 else {"ipv4.enabled": "false"})})
    if encapsulation == "none":
        values.update({"routingMode": "native", "autoDirectNodeRoutes": "true",
                       **({"ipv4NativeRoutingCIDR": v4} if v4 else {}),
                       **({"ipv6NativeRoutingCIDR": v6} if v6 else {})})
    else:
        values.update({"routingMode": "tunnel", "tunnelProtocol": encapsulation})
    return values


def helm_command(spec: CniSpec, chart: str, values: dict, kubeconfig: str | None,
                 context: str | None, helm: str = "helm") -> list[str]:
    """``helm upgrade --install`` command line for a chart archive (no --wait: we wait ourselves)."""
    argv = [helm, "upgrade", "--install", spec.release, chart, "--namespace", spec.namespace]
    if kubeconfig:
        argv += ["--kubeconfig", kubeconfig]
    if context:
        argv += ["--kube-context", context]
    for k in sorted(values):
        argv += ["--set", f"{k}={values[k]}"]
    return argv


SERVICES_ENDPOINT = "kubernetes-services-endpoint"   # the ConfigMap Calico's manifest reads (envFrom, optional)


def _reads_services_endpoint(docs: list[dict]) -> bool:
    """Whether some container of the documents takes its environment from ``SERVICES_ENDPOINT``."""
    for d in docs:
        pod = d.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            if any(e.get("configMapRef", {}).get("name") == SERVICES_ENDPOINT for e in c.get("envFrom") or []):
                return True
    return False


def render(spec: CniSpec, data: bytes, encapsulation: str, pod_subnet: str) -> list[dict]:
    """Upstream manifest bytes -> documents with our overlay (manifest kinds only)."""
    docs = [d for d in yaml.safe_load_all(data) if d]
    if spec.name == "calico":
        return calico_overlay(docs, encapsulation, pod_subnet)
    if spec.name == "antrea":
        return antrea_overlay(docs, encapsulation, spec.version)
    return docs


@dataclass
class Installing:
    """A CNI on its way into a cluster (``prepare``): ``info`` is what to report; ``workloads`` the
    documents ``apply_workloads`` applies (a Helm chart: ``chart``, installed there instead),
    ``staged`` those ``apply_staged`` applies."""

    spec: CniSpec
    info: dict
    workloads: list = field(default_factory=list)
    staged: list = field(default_factory=list)
    chart: bytes | None = None
    values: dict = field(default_factory=dict)
    api_endpoint: tuple[str, int] | None = None   # where its agents reach the API server, if not the Service
    applied: bool = False                           # apply_workloads ran


def prepare(kubectl, spec: CniSpec, *, encapsulation: str | None = None, pod_subnet: str | None = None,
            allow_unrecorded: bool | None = None, api_endpoint: tuple[str, int] | None = None) -> Installing:
    """Fetch ``spec``'s pinned file and render our overlay; of a manifest, apply what configures the
    CNI but runs nothing (CRDs, RBAC, ConfigMaps, ServiceAccounts): an API server that answers is
    all it needs, nodes may still be joining. ``api_endpoint``: see the module's docstring (ignored
    by a CNI that has no such setting; ``Installing.api_endpoint`` says whether it was taken)."""
    enc = check_encapsulation(spec, encapsulation)
    subnet = pod_subnet or spec.pod_subnet
    data, digest = fetch(spec, allow_unrecorded=allow_unrecorded)
    info = {"cni": spec.name, "cni_version": spec.version, "encapsulation": enc, "cni_sha256": digest,
            "cni_sha256_recorded": digest_status(spec), "cni_source": cni_source(spec),
            "bandwidth": spec.bandwidth}
    if spec.kind != "manifest":
        values = cilium_values(spec, enc, subnet)
        if api_endpoint is not None:
            values.update({"k8sServiceHost": api_endpoint[0], "k8sServicePort": str(api_endpoint[1])})
        return Installing(spec, info, chart=data, values=values, api_endpoint=api_endpoint)
    docs = render(spec, data, enc, subnet)
    runs = [d for d in docs if d.get("kind") in WORKLOAD_KINDS]
    config = [d for d in docs if d not in runs]
    if api_endpoint is not None and spec.name == "calico" and _reads_services_endpoint(runs):
        config.append({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": SERVICES_ENDPOINT, "namespace": "kube-system"},
                       "data": {"KUBERNETES_SERVICE_HOST": api_endpoint[0],
                                "KUBERNETES_SERVICE_PORT": str(api_endpoint[1])}})
    else:
        api_endpoint = None
    kubectl.apply(config, what=f"install CNI {spec.name} {spec.version} (configuration)", server_side=True)
    return Installing(spec, info, workloads=[d for d in runs if not _staged(spec, d)],
                      staged=[d for d in runs if _staged(spec, d)], api_endpoint=api_endpoint)


def apply_workloads(kubectl, installing: Installing, timeout: float, helm: str = "helm") -> None:
    """The CNI's node agents and controllers but the staged ones (a Helm chart: ``helm upgrade
    --install``): at once when they reach the API server at ``installing.api_endpoint``, else once
    every node has registered and runs its Service proxy (``await_service_proxy``)."""
    spec = installing.spec
    if installing.api_endpoint is None:
        await_service_proxy(kubectl, f"CNI {spec.name}", timeout)
    if installing.chart is None:
        kubectl.apply(installing.workloads, what=f"install CNI {spec.name} {spec.version}", server_side=True)
        installing.applied = True
        return
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / f"{spec.name}-{spec.version}.tgz"
        chart.write_bytes(installing.chart)
        argv = helm_command(spec, str(chart), installing.values, kubectl.kubeconfig, kubectl.context, helm)
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout)
        except FileNotFoundError:
            raise InfrastructureError(f"CNI {spec.name}: helm not found ({helm})") from None
        if proc.returncode:
            raise InfrastructureError(f"CNI {spec.name}: helm exit {proc.returncode}: "
                                      f"{proc.stderr.decode(errors='replace').strip()[-400:]}")
    installing.applied = True


PROXY = ("kube-system", "kube-proxy")   # kubeadm's Service proxy DaemonSet


def await_service_proxy(kubectl, component: str, timeout: float) -> None:
    """Until kube-proxy runs on every node, where the cluster has it. A CNI's agents reach the API
    server through the ``kubernetes`` Service, which kube-proxy programs on each node: on kind v1.34
    Calico's install-cni, started 1 s before its node's kube-proxy, waited 31 s for a connect that
    could not answer."""
    ns, name = PROXY
    if kubectl.get("daemonset", name, ns, missing_ok=True) is not None:
        wait_workload(kubectl, "DaemonSet", ns, name, f"{component}: Service proxy", timeout)


def await_datapath(kubectl, installing: Installing, timeout: float) -> None:
    """After ``apply_workloads``: the workloads listed before the first staged one ready (the pod
    network works on every node), then every node Ready; then ``restart_unplaced`` pods."""
    spec = installing.spec
    for w in _ready_split(spec)[0]:
        wait_workload(kubectl, w.kind, w.namespace, w.name, f"CNI {spec.name}", timeout)
    wait_nodes_ready(kubectl, f"CNI {spec.name}: nodes", timeout)
    restart_unplaced(kubectl, spec)


def apply_staged(kubectl, installing: Installing) -> None:
    """After ``await_datapath``: the staged documents applied (pods on the pod network)."""
    if installing.staged:
        spec = installing.spec
        kubectl.apply(installing.staged, what=f"install CNI {spec.name} {spec.version} (staged)", server_side=True)


def await_staged(kubectl, installing: Installing, timeout: float) -> None:
    """After ``apply_staged``: every workload from the first staged one on ready. Nothing a
    measurement needs before its own pods do (Calico's kube-controllers), so a provider may ask this
    only once the run's pods are made."""
    for w in _ready_split(installing.spec)[1]:
        wait_workload(kubectl, w.kind, w.namespace, w.name, f"CNI {installing.spec.name}", timeout)


def _ready_split(spec: CniSpec) -> tuple[tuple, tuple]:
    """``spec.ready`` cut before its first staged workload: (the pod network's workloads, those
    awaited after them)."""
    first = next((i for i, w in enumerate(spec.ready) if w.staged), len(spec.ready))
    return spec.ready[:first], spec.ready[first:]


def install(kubectl, spec: CniSpec, *, encapsulation: str | None = None, pod_subnet: str | None = None,
            timeout: float = 300.0, helm: str = "helm", allow_unrecorded: bool | None = None) -> dict:
    """Install ``spec`` and wait for its components and the nodes (``prepare``, ``apply_workloads``,
    ``await_datapath``, ``apply_staged``, ``await_staged``); returns what to report."""
    installing = prepare(kubectl, spec, encapsulation=encapsulation, pod_subnet=pod_subnet,
                         allow_unrecorded=allow_unrecorded)
    apply_workloads(kubectl, installing, timeout, helm)
    await_datapath(kubectl, installing, timeout)
    apply_staged(kubectl, installing)
    await_staged(kubectl, installing, timeout)
    return installing.info


SANDBOX_FAILED = "FailedCreatePodSandBox"   # the kubelet's event: a pod's sandbox (its network) could not be made


def unplaced(pod: dict) -> bool:
    """Whether ``pod`` is on the pod network, made by a controller, and still has no sandbox: the
    kubelet tried to set it up before the CNI's node agent ran there, failed, and retries only 10-15 s
    later (its pod workers' back-off; on kind v1.34 with Calico CoreDNS was Ready 22 s after the
    network was)."""
    spec, st = pod.get("spec", {}), pod.get("status", {})
    owned = any(o.get("controller") for o in pod.get("metadata", {}).get("ownerReferences") or [])
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    return (owned and not spec.get("hostNetwork") and bool(spec.get("nodeName"))
            and st.get("phase") == "Pending" and conds.get("PodReadyToStartContainers") == "False")


def restart_unplaced(kubectl, spec: CniSpec) -> list[str]:
    """Delete the kube-system pods ``unplaced`` finds whose sandbox the kubelet failed to make (a
    ``SANDBOX_FAILED`` event names the pod), so their controllers make them again at once (CoreDNS's,
    scheduled as soon as the CNI's configuration file made the nodes Ready and failed before its agent
    ran); the names deleted. A pod without that event is still being set up and is left to finish:
    Cilium's CNI call waits for its agent's first endpoint program (kind 2026-11-29: CoreDNS deleted
    there was made again on the other node, which was still compiling, and Ready 10 s later)."""
    waiting = [pod for pod in kubectl.get("pods", namespace="kube-system") if unplaced(pod)]
    if not waiting:   # (the common case: no events to read)
        return []
    events, _ = kubectl.list("event", "kube-system", field_selector=f"reason={SANDBOX_FAILED}")
    failed = {e.get("involvedObject", {}).get("uid") for e in events}
    gone = []
    for pod in waiting:
        if pod["metadata"].get("uid") in failed:
            name = pod["metadata"]["name"]
            kubectl.delete("pod", name, "kube-system")
            gone.append(name)
    if gone:
        log.info("CNI %s: made again once the pod network ran: %s", spec.name, ", ".join(gone))
    return gone


def _staged(spec: CniSpec, doc: dict) -> bool:
    """Whether ``doc`` is a workload the data file stages (``Workload.staged``)."""
    meta = doc.get("metadata") or {}
    return any(w.staged and doc.get("kind") == w.kind and meta.get("name") == w.name
               and meta.get("namespace", "kube-system") == w.namespace for w in spec.ready)
