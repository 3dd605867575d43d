"""NetworkPolicy as the studies use it, behind one small interface every provider can implement.

    pol = cluster.policies()            # Unsupported where the provider has none
    pol.deny(client, server, port)      # server isolated for ingress; client not admitted
    pol.allow(client, server, port)     # a policy admitting client -> server:port (tcp)
    pol.decoys(server, port, n)         # exactly n more policies selecting server, admitting no real pod
    pol.path_rules(server, port, n)     # n decoys every packet to server meets, nothing of the run denied
    pol.clear()                         # every policy this object made is gone

Semantics are Kubernetes' (``networking.k8s.io/v1``): a pod selected by any ingress policy is isolated
and admits the union of the policies' ingress rules. ``deny`` is one change in steady state: the
first call creates the server's default-deny policy, later calls delete the allowing policy (the
revocation an operator makes). Decoys select the server pod (so they are evaluated on its path) and
admit sources that match no pod: they cost, they never decide.
"""

from __future__ import annotations

import abc
import contextlib

from netslo.providers.base import Pod


class Policies(contextlib.AbstractContextManager, abc.ABC):
    """The provider's NetworkPolicy implementation (real, or an emulation that says so)."""

    emulated: bool = False
    description: str = ""
    # steady bursts after a change before the cost study measures (``policy_cost.settle``): a CNI's
    # agent applies policy objects after the API accepted them, and goes on for seconds after 1000
    settle_bursts: int = 10

    @abc.abstractmethod
    def deny(self, client: Pod, server: Pod, port: int) -> None:
        """Isolate ``server`` for ingress and stop admitting ``client`` (returns once requested)."""

    @abc.abstractmethod
    def allow(self, client: Pod, server: Pod, port: int) -> None:
        """Admit ``client`` -> ``server``:``port`` (TCP)."""

    @abc.abstractmethod
    def decoys(self, server: Pod, port: int, n: int) -> None:
        """Have exactly ``n`` decoy policies on ``server`` (added or removed)."""

    @abc.abstractmethod
    def path_rules(self, server: Pod, port: int, n: int) -> None:
        """``n`` decoys on ``server`` that every packet to it meets, nothing of the run denied."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every policy (rule, chain, object) this object created. Idempotent."""

    def __exit__(self, *exc):   # (AbstractContextManager's __enter__ returns self)
        self.clear()
