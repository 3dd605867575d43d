"""The interface every provider implements: a cluster of nodes, pods on them, agents in the pods.

A provider turns options into a ``Cluster`` (``up()``) and removes everything it created
(``Cluster.close()``). Pods run the one agent (``python -m netslo.agent``); probes come back as raw
samples (npz bytes on the agent's stdout), never as parsed log text.
"""

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass, field
from typing import Callable

from netslo.agent.responder_set import RESPONDER_PORTS  # noqa: F401  (the providers' name for them)
from netslo.core.errors import InfrastructureError, Unsupported
from netslo.core.families import IPV4, host_port
from netslo.core.families import check as check_family
from netslo.core.phase_times import scheduled, timed_call
from netslo.stats.samples import SampleSet
from netslo.traffic.probes import ProbeSpec


@dataclass
class Pod:
    """A pod (or, with ``host_network``, the node itself) as the tests see it. ``ip``: its IPv4
    address (its IPv6 one on an IPv6-only cluster); ``ip6``: its IPv6 address, "" when it has none."""

    name: str
    node: str
    ip: str
    host_network: bool = False
    annotations: dict = field(default_factory=dict)
    ip6: str = ""

    def address(self, family: str) -> str:
        """The pod's address of ``family`` ("ipv4" or "ipv6"); Unsupported (skip category
        ``ip_family``) naming the pod when it has none of that family."""
        check_family(family)
        if family == IPV4:
            found = self.ip if self.ip and ":" not in self.ip else ""
        else:
            found = self.ip6 or (self.ip if ":" in self.ip else "")
        if not found:
            raise Unsupported(f"pod {self.name} has no {family} address: the cluster gives its pods none "
                              f"(pod addresses: {', '.join(a for a in (self.ip, self.ip6) if a) or 'none'})",
                              "ip_family")
        return found


@dataclass(frozen=True)
class PathPoint:
    """A place this host can capture a pod's traffic: ``ifname`` in network namespace ``netns`` (a
    name under /run/netns or a path such as /proc/<pid>/ns/net); ``encap``: frames there are
    tunnel-encapsulated (an outer and an inner IP header)."""

    name: str
    netns: str
    ifname: str
    encap: bool = False


def probe_argv(spec: ProbeSpec, out: str = "-") -> list[str]:
    """``python -m netslo.agent`` arguments of the probe ``spec``, its samples to ``out`` (``-``: stdout)."""
    args = ["probe", spec.protocol, "--target", host_port(spec.host, spec.port),
            "--count", str(spec.count), "--interval", f"{spec.interval * 1e6:.3f}us",
            "--req-size", str(spec.req_bytes), "--resp-size", str(spec.resp_bytes),
            "--tos", f"0x{spec.tos:02x}", "--wait", f"{spec.wait:.6f}s", "--out", out]
    if not spec.nodelay:
        args.append("--no-nodelay")
    if spec.cpu is not None:
        args += ["--cpu", str(spec.cpu)]
    if spec.sender != "python":
        args += ["--sender", spec.sender]
    if spec.dns is not None:
        args += spec.dns.cli_args()
    if spec.give_up is not None:
        args += ["--give-up", f"{spec.give_up * 1e6:.0f}us"]
    if spec.source_ports != "kernel":
        args += ["--source-ports", spec.source_ports]
    return args


def probe_budget(spec: ProbeSpec) -> float:
    """s a probe may take: its schedule, its wait for late answers and 30 s of start-up."""
    return spec.count * spec.interval + spec.wait + 30.0 + (spec.dns.longest_s() if spec.dns else 0.0)


class Cluster(abc.ABC):
    """A running cluster: nodes, pods, responders; knows how to run the agent in a pod."""

    provider: str = "?"
    emulated: bool = False
    shared_clock: bool = False  # True when every pod reads the same CLOCK_MONOTONIC (one kernel)
    datapath: str = ""          # what SLO selectors call 'datapath' (netns datapath or CNI name)
    families: tuple[str, ...] = (IPV4,)   # IP families its pods have addresses of (netslo.core.families)

    @property
    @abc.abstractmethod
    def nodes(self) -> list[str]:
        """Node names, in a stable order."""

    def node_labels(self, node: str) -> dict[str, str]:
        """The labels of ``node`` (a Kubernetes node's; an emulated node's zone and pool)."""
        return {}

    @abc.abstractmethod
    def add_pod(self, name: str, node: str, *, host_network: bool = False,
                annotations: dict | None = None, responders=None, cpu: str | None = None) -> Pod:
        """Create a pod on ``node`` able to run agent probes; returns once it is ready. ``responders``:
        the protocols its own process serves from the start (a Kubernetes pod's container; None: the
        provider's default); providers that start responders only on demand (``start_responders``)
        ignore it. ``cpu``: the pod's CPU request on Kubernetes (a quantity, e.g. "100m": its CPU weight
        under contention; None: the provider's default); where a pod is a namespace, ignored."""

    def add_pods(self, requests: list[dict]) -> list[Pod]:
        """Several pods (each request: ``add_pod``'s arguments as a dict), in the order asked; a
        provider that can create them together and wait for them at once overrides this."""
        return [self.add_pod(r["name"], r["node"], **{k: v for k, v in r.items() if k not in ("name", "node")})
                for r in requests]

    @abc.abstractmethod
    def start_responders(self, pod: Pod, protocols=("udp", "tcp", "http")) -> dict[str, int]:
        """Start the responders in ``pod``; returns protocol -> port once they listen."""

    @abc.abstractmethod
    def exec_agent(self, pod: Pod, args: list[str], timeout: float) -> bytes:
        """Run ``python -m netslo.agent ARGS`` in ``pod``; stdout bytes, InfrastructureError if it fails."""

    @abc.abstractmethod
    def environment(self) -> dict[str, str]:
        """What a report must state about this cluster (provider, kernel, datapath, MTU, ...)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Remove everything this cluster created. Idempotent."""

    def policies(self):
        """This cluster's NetworkPolicy implementation (``netslo.providers.policy.Policies``)."""
        raise Unsupported(f"provider {self.provider} has no NetworkPolicy implementation", "provider")

    def disruptions(self):
        """This cluster's disruption actions (``netslo.providers.disruption.Disruptions``)."""
        raise Unsupported(f"provider {self.provider} has no disruption actions", "provider")

    def service_program(self, backend: Pod, port: int, type: str, client: Pod, change: str = "service"):
        """A Service to ``backend``:``port`` (TCP), created and deleted on demand, or made once with its
        one endpoint added and removed on demand (``change``; ``service_program.ServiceProgram``)."""
        raise Unsupported(f"provider {self.provider} cannot create Services", "provider")

    @timed_call("probing")
    def probe(self, pod: Pod, spec: ProbeSpec) -> SampleSet:
        """Run one probe in ``pod`` and return its raw samples."""
        scheduled(spec.count * spec.interval, "probing")
        data = self.exec_agent(pod, probe_argv(spec), timeout=probe_budget(spec))
        return self.samples_of(pod, data)

    def samples_of(self, pod: Pod, data: bytes) -> SampleSet:
        """The samples a probe in ``pod`` wrote (``data``: its output file's bytes), with where they came from."""
        try:
            result = SampleSet.from_bytes(data)
        except Exception as e:  # a crashed or confused agent
            raise InfrastructureError(f"probe in pod {pod.name}: unreadable samples ({e})") from e
        result.meta.update(shared_clock=self.shared_clock, client_pod=pod.name, client_node=pod.node,
                           provider=self.provider)
        return result

    def probe_detached(self, pod: Pod, spec: ProbeSpec) -> Callable[[float], SampleSet]:
        """Start a probe in ``pod`` that goes on when this process's connection to the pod breaks (a
        Kubernetes exec stream ends with the API server); returns ``collect(timeout_s)``, which waits for
        it and returns its samples. Here (no such connection to lose): ``probe_in_thread``."""
        return self.probe_in_thread(pod, spec)

    def probe_in_thread(self, pod: Pod, spec: ProbeSpec) -> Callable[[float], SampleSet]:
        """``probe`` started in a thread; ``collect(timeout_s)`` waits for it and returns its samples or
        raises what it raised (an InfrastructureError when it has not ended within ``timeout_s``)."""
        box: dict = {}

        def run():
            try:
                box["samples"] = self.probe(pod, spec)
            except BaseException as e:   # handed to collect()
                box["error"] = e
        t = threading.Thread(target=run, name=f"probe-{pod.name}-{spec.protocol}", daemon=True)
        t.start()

        def collect(timeout_s: float) -> SampleSet:
            t.join(timeout_s)
            if t.is_alive():
                raise InfrastructureError(f"probe {spec.protocol} in pod {pod.name} did not end within its schedule "
                                          f"and {timeout_s:.0f} s more")
            if "error" in box:
                raise box["error"]
            return box["samples"]
        return collect

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
