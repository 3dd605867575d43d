"""Emulated NetworkPolicy for the embedded provider: iptables rules at the server pod's interface.

Calico and Cilium enforce ingress policy where traffic enters the pod (Calico: the host-side veth's
chains; Cilium: the pod's tc/BPF program). The emulation puts each isolated pod's policy in the pod's
own namespace: ``filter INPUT`` jumps to chain ``NETSLO-POL``, which holds, in order, one ACCEPT rule
per decoy policy (sources 10.255.x.y that no pod has), the ACCEPT rule of each admitted client, and
DROP for everything else while the pod is isolated. Rules admit TCP to the port (the studies probe
with a connection per request) and are evaluated linearly, without conntrack (every packet meets the
policy, where Calico's rules meet a connection's first packet only): with 1000 decoys each packet to
the pod traverses 1000 rules, which is the cost the decoy study shows. Each change is one
``iptables-restore --noflush`` that replaces the chain atomically. ``clear()`` removes the jump and the
chain from every pod it touched (the namespaces go with the cluster anyway). Reports say "emulated".
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.providers.base import Pod
from netslo.providers.policy import Policies

CHAIN = "NETSLO-POL"
MAX_DECOYS = 60_000


@dataclass
class _PodPolicy:
    isolated: bool = False
    decoys: int = 0
    port: int = 0
    admitted: dict = field(default_factory=dict)   # client ip -> port


def decoy_source(i: int) -> str:
    """The source address decoy policy ``i`` admits: 10.255.0.0/16, outside every pod CIDR."""
    return f"10.255.{i // 250}.{i % 250 + 1}"


def chain_rules(p: _PodPolicy) -> list[str]:
    """The ``NETSLO-POL`` rules of one pod's policy state, in evaluation order."""
    rules = ["-i lo -j ACCEPT"]
    rules += [f"-s {decoy_source(i)}/32 -p tcp --dport {p.port} -j ACCEPT" for i in range(p.decoys)]
    rules += [f"-s {ip}/32 -p tcp --dport {port} -j ACCEPT" for ip, port in p.admitted.items()]
    if p.isolated:
        rules.append("-j DROP")
    return rules


class NetnsPolicies(Policies):
    emulated = True
    description = "emulated: iptables rules in the server pod's namespace (no conntrack; linear rule walk)"

    settle_bursts = 2   # iptables-restore has applied the rules when it returns

    def __init__(self, cluster):
        if shutil.which("iptables-restore") is None:
            raise Unsupported("emulated NetworkPolicy needs iptables (Debian package 'iptables')", "tool")
        self.cluster = cluster
        self._pods: dict[str, _PodPolicy] = {}
        self._hooked: dict[str, Pod] = {}

    def _run(self, pod: Pod, argv: list[str], script: str | None = None, check: bool = True) -> str:
        ns = self.cluster.netns_of(pod)
        run = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", *argv], input=script, capture_output=True,
                             text=True, timeout=60)
        if check and run.returncode:
            raise InfrastructureError(f"{argv[0]} in pod {pod.name}: {run.stderr.strip() or run.returncode}")
        return run.stdout

    def _program(self, server: Pod) -> None:
        p = self._pods[server.name]
        if server.name not in self._hooked:
            self._hooked[server.name] = server
            self._run(server, ["iptables", "-w", "5", "-N", CHAIN])
            self._run(server, ["iptables", "-w", "5", "-I", "INPUT", "1", "-j", CHAIN])
        body = "".join(f"-A {CHAIN} {r}\n" for r in chain_rules(p))
        self._run(server, ["iptables-restore", "-w", "5", "--noflush"], f"*filter\n:{CHAIN} - [0:0]\n{body}COMMIT\n")

    def _state(self, server: Pod, port: int) -> _PodPolicy:
        if server.host_network:
            raise Unsupported(f"pod {server.name} is a hostNetwork pod: NetworkPolicy does not select it", "provider")
        p = self._pods.setdefault(server.name, _PodPolicy())
        p.port, p.isolated = port, True    # any policy selecting a pod isolates it (Kubernetes semantics)
        return p

    def deny(self, client: Pod, server: Pod, port: int) -> None:
        p = self._state(server, port)
        p.admitted.pop(client.ip, None)
        self._program(server)

    def allow(self, client: Pod, server: Pod, port: int) -> None:
        p = self._state(server, port)
        p.admitted[client.ip] = port
        self._program(server)

    def decoys(self, server: Pod, port: int, n: int) -> None:
        if not isinstance(n, int) or not 0 <= n <= MAX_DECOYS:
            raise SpecError("decoy policies", n, f"a whole number 0..{MAX_DECOYS}")
        self._state(server, port).decoys = n
        self._program(server)

    def path_rules(self, server: Pod, port: int, n: int) -> None:
        """``n`` decoy rules that every packet to ``server`` walks, without isolating it (nothing is
        denied): a change of the data path of known direction, for comparing two clusters."""
        if not isinstance(n, int) or not 0 <= n <= MAX_DECOYS:
            raise SpecError("rules", n, f"a whole number 0..{MAX_DECOYS}")
        p = self._pods.setdefault(server.name, _PodPolicy())
        p.port, p.decoys = port, n
        self._program(server)

    def rules(self, server: Pod) -> list[str]:
        """The pod's ``NETSLO-POL`` rules as iptables lists them now (empty without the chain)."""
        out = self._run(server, ["iptables", "-w", "5", "-S"], check=False)
        return [line for line in out.splitlines() if CHAIN in line]

    def clear(self) -> None:
        pods, self._hooked, self._pods = self._hooked, {}, {}
        errors = []
        for pod in pods.values():
            for argv in (["-D", "INPUT", "-j", CHAIN], ["-F", CHAIN], ["-X", CHAIN]):
                try:
                    self._run(pod, ["iptables", "-w", "5", *argv])
                except (InfrastructureError, OSError, subprocess.TimeoutExpired) as e:
                    errors.append(str(e))
        if errors and any("No such file" not in e and "does not exist" not in e for e in errors):
            raise InfrastructureError("emulated policies not removed: " + "; ".join(errors))
