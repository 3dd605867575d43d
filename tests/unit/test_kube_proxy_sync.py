"""kube-proxy's minSyncPeriod as the Service programming study reads it (kube_proxy_sync), and the
quiet time a real cluster's Service programming object derives from it. The configuration text is
the one kind v1.34 writes (kubeadm's ConfigMap kube-system/kube-proxy), abridged; the API is a
stand-in holding that ConfigMap (kind reads the real one: the gate's test_service_programming)."""

import pytest

from netslo.core.errors import InfrastructureError, SpecError
from netslo.providers.base import Pod
from netslo.providers.kube import proxy_sync as kps
from netslo.providers.kube.service_program import QUIET_MARGIN_S, KubeServiceProgram

KIND_CONFIG = """\
apiVersion: kubeproxy.config.k8s.io/v1alpha1
clusterCIDR: 192.168.0.0/16,fd00:10:244::/56
iptables:
  masqueradeAll: false
  minSyncPeriod: 1s
  syncPeriod: 0s
ipvs:
  minSyncPeriod: 0s
kind: KubeProxyConfiguration
mode: iptables
nftables:
  minSyncPeriod: 0s
"""


@pytest.mark.parametrize("text, seconds", [("1s", 1.0), ("500ms", 0.5), ("1m0s", 60.0), ("1h2m3.5s", 3723.5),
                                           ("0s", 0.0), ("0", 0.0), ("250us", 250e-6)])
def test_go_durations_parse(text, seconds):
    assert kps.go_duration(text, "f") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1", "1 s", "s", "", "1sec", "-1s", True, None, 1.5])
def test_bad_go_durations_are_one_line_naming_the_field(text):
    with pytest.raises(SpecError) as e:
        kps.go_duration(text, "kube-proxy iptables.minSyncPeriod")
    assert "\n" not in str(e.value) and "kube-proxy iptables.minSyncPeriod" in str(e.value) and "Go duration" in str(e.value)


def test_the_mode_in_use_decides_and_zero_is_its_default():
    import yaml
    cfg = yaml.safe_load(KIND_CONFIG)
    assert kps.min_sync_period(cfg) == (1.0, "iptables")
    cfg["iptables"]["minSyncPeriod"] = "3s"
    assert kps.min_sync_period(cfg) == (3.0, "iptables")
    cfg["mode"] = ""                                   # "" is iptables on Linux
    assert kps.min_sync_period(cfg) == (3.0, "iptables")
    cfg["mode"] = "nftables"                           # 0s: the upstream default, 1 s
    assert kps.min_sync_period(cfg) == (1.0, "nftables")
    cfg["mode"] = "ipvs"                               # ipvs: no default limit
    assert kps.min_sync_period(cfg) == (0.0, "ipvs")
    with pytest.raises(SpecError, match="kube-proxy mode: value 'userspace'"):
        kps.min_sync_period(dict(cfg, mode="userspace"))


class Api:
    """Holds kube-system/kube-proxy (or not) and records the Service programming object's calls."""

    def __init__(self, config_text=None):
        self.config_text, self.calls = config_text, []

    def get(self, kind, name, namespace=None, missing_ok=False):
        if kind == "configmap":
            assert (namespace, name) == ("kube-system", "kube-proxy")
            return None if self.config_text is None else {"data": {"config.conf": self.config_text}}
        if name == "kubernetes":
            return {"spec": {"clusterIP": "10.96.0.1"}}
        return {"spec": {"clusterIP": "10.96.0.77", "ports": [{"nodePort": 31234}]}}

    def create(self, obj, what=None):
        self.calls.append("create")

    def delete(self, kind, name, namespace=None):
        self.calls.append("delete")

    def patch(self, *a, **k):
        self.calls.append("patch")

    def list(self, kind, namespace=None, **selection):   # a deleted Service is gone at once
        return [], "1"


def test_read_from_the_cluster_says_where_the_period_came_from():
    assert kps.read(Api(KIND_CONFIG)) == (1.0, "kube-proxy iptables minSyncPeriod 1 s (ConfigMap kube-system/kube-proxy)")
    seconds, why = kps.read(Api(None))
    assert seconds == 0.0 and "no ConfigMap kube-system/kube-proxy" in why
    with pytest.raises(InfrastructureError, match="kube-proxy configuration .ConfigMap kube-system/kube-proxy. "
                       "is not usable: kube-proxy iptables.minSyncPeriod: value '1 second'"):
        kps.read(Api(KIND_CONFIG.replace("minSyncPeriod: 1s", "minSyncPeriod: 1 second")))
    with pytest.raises(InfrastructureError, match="config.conf is not YAML") as e:
        kps.read(Api("mode: [iptables\n"))
    assert "\n" not in str(e.value)


def _program(api, change):
    from types import SimpleNamespace
    cluster = SimpleNamespace(api=api, namespace="ns", run_id="r1", k8s_pod_name=lambda p: f"k8s-{p.name}",
                              node_ip=lambda node: "172.18.0.2")
    return KubeServiceProgram(cluster, Pod("backend", "n0", "10.244.0.5"), 7001, "ClusterIP",
                              Pod("client", "n1", "10.244.1.5"), change)


@pytest.mark.parametrize("change", ["service", "endpoint"])
def test_quiet_time_is_two_sync_periods_and_a_margin_where_kube_proxy_limits(change):
    svc = _program(Api(KIND_CONFIG), change)
    assert svc.quiet_s == pytest.approx(2 * 1.0 + QUIET_MARGIN_S) and "minSyncPeriod 1 s" in svc.quiet_why
    slow = _program(Api(KIND_CONFIG.replace("minSyncPeriod: 1s", "minSyncPeriod: 5s")), change)
    assert slow.quiet_s == pytest.approx(10.0 + QUIET_MARGIN_S)
    assert _program(Api(None), change).quiet_s == 0.0      # no kube-proxy: nothing rate-limits
