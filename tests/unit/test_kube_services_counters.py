"""kube-proxy (iptables mode) rule counters -> packets per exposure path (text as iptables-save -c prints)."""

import pytest

from netslo.providers.kube.services import parse_kube_proxy_counters

NS = "netslo-6b03990b57c5"
SAVE = f"""\
[0:0] -A KUBE-EXT-OJ4V -m comment --comment "masquerade traffic for {NS}/srv-nodeport-cluster:http external destinations" -j KUBE-MARK-MASQ
[7:420] -A KUBE-NODEPORTS -p tcp -m comment --comment "{NS}/srv-nodeport-local:http" -m tcp --dport 32111 -j KUBE-EXT-AAAA
[2:120] -A KUBE-NODEPORTS -p tcp -m comment --comment "{NS}/srv-nodeport-cluster:http" -m tcp --dport 32112 -j KUBE-EXT-OJ4V
[5:300] -A KUBE-SERVICES -d 10.96.91.14/32 -p tcp -m comment --comment "{NS}/srv-clusterip:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-SUAY
[9:540] -A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -m comment --comment "other/srv-clusterip:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-OTHER
[3:180] -A KUBE-SVC-SUAY ! -s 10.244.0.0/24 -d 10.96.91.14/32 -p tcp -m comment --comment "{NS}/srv-clusterip:http cluster IP" -j KUBE-MARK-MASQ
[4:240] -A KUBE-EXT-OJ5V -m comment --comment "masquerade traffic for {NS}/srv-nodeport-cluster:http external destinations" -j KUBE-MARK-MASQ
"""
NAMES = {"clusterip": "srv-clusterip", "nodeport-local": "srv-nodeport-local",
         "nodeport-cluster": "srv-nodeport-cluster"}


def test_counts_only_this_runs_rules_in_the_entry_chains():
    assert parse_kube_proxy_counters(SAVE, NS, NAMES) == {
        "clusterip": 5, "nodeport-local": 7, "nodeport-cluster": 2, "masquerade": 4}


def test_no_rules_yet_is_all_zero():
    assert parse_kube_proxy_counters("", NS, NAMES) == {
        "clusterip": 0, "nodeport-local": 0, "nodeport-cluster": 0, "masquerade": 0}


class _RefusingCluster:
    """A cluster whose probes are refused ``refusals[target]`` times per target, then answered."""

    nodes = ["n1", "n2"]

    def __init__(self, refusals):
        self.refusals, self.calls = dict(refusals), []

    def node_ip(self, node):
        return {"n1": "172.18.0.2", "n2": "172.18.0.3"}[node]

    def probe(self, pod, spec):
        import numpy as np

        from netslo.core.errors import InfrastructureError
        from netslo.stats.samples import SampleSet, empty
        target = (spec.host, spec.port)
        self.calls.append(target)
        if self.refusals.get(target, 0) > 0:
            self.refusals[target] -= 1
            raise InfrastructureError(f"python -m netslo.agent probe http: exit 1: Connect call failed {target}")
        rows = empty(1)
        rows["recv_ns"] = np.int64(5)
        return SampleSet(rows)


def _services(cluster):
    from types import SimpleNamespace

    from netslo.providers.base import Pod
    from netslo.providers.kube.services import KubeServices
    svc = KubeServices.__new__(KubeServices)
    svc.cluster, svc.backend, svc.port = cluster, Pod("server", "n1", "10.244.0.5"), 7080
    svc.services = {"clusterip": SimpleNamespace(cluster_ip="10.96.0.10", node_ports={}),
                    "nodeport-local": SimpleNamespace(cluster_ip="10.96.0.11", node_ports={"http": 30001}),
                    "nodeport-cluster": SimpleNamespace(cluster_ip="10.96.0.12", node_ports={"http": 30002})}
    return svc


def test_services_are_awaited_until_each_answers_from_the_client():
    """kube-proxy programs a new Service in its next sync: until then the connect is refused. The
    wait asks each path again until it answers, then stops asking that one."""
    from netslo.providers.base import Pod
    cluster = _RefusingCluster({("10.96.0.10", 80): 2, ("172.18.0.3", 30002): 1})
    _services(cluster).await_reachable(Pod("client-cross", "n2", "10.244.1.7"), timeout=10)
    assert cluster.calls.count(("10.96.0.10", 80)) == 3 and cluster.calls.count(("172.18.0.3", 30002)) == 2
    assert cluster.calls.count(("172.18.0.2", 30001)) == 1


def test_a_service_never_answering_is_an_infrastructure_error_naming_it():
    from netslo.core.errors import InfrastructureError
    from netslo.providers.base import Pod
    cluster = _RefusingCluster({("10.96.0.10", 80): 10 ** 6})
    with pytest.raises(InfrastructureError, match=r"after 0\.5s \(kube-proxy has not programmed them\): clusterip "
                                                  r"10\.96\.0\.10:80: .*Connect call failed"):
        _services(cluster).await_reachable(Pod("client-cross", "n2", "10.244.1.7"), timeout=0.5)
