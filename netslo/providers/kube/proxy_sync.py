"""kube-proxy's rate limit on rule syncs, read from its configuration.

kube-proxy batches Service and EndpointSlice changes into syncs and starts a sync at most once per
``minSyncPeriod`` (``KubeProxyConfiguration``: ``iptables.minSyncPeriod``, ``nftables.minSyncPeriod``,
``ipvs.minSyncPeriod``, per the mode in ``mode``; "" is iptables on Linux). The upstream default is
1 s for iptables and nftables (kubernetes/kubernetes#92836; a zero value is defaulted to it) and 0
for ipvs. A change that arrives within that period of the last sync waits for the period to end, so
the time a change takes to reach the data plane depends on the changes just before it: on kind +
Calico (2026-11-28), with a Service created and deleted every 1.92 s, kube-proxy synced every 1.03 s
back to back and the create's latency measured 0.34 s; with changes 2.4 s apart, 1.1-1.2 s.

``min_sync_period(config)`` reads the period (s) from a parsed configuration; ``read(api)`` from the
cluster's ``kube-system/kube-proxy`` ConfigMap (kubeadm's, which kind and minikube use): (seconds,
where it came from), or (0.0, why not) when no kube-proxy runs there; a configuration it cannot
read is an InfrastructureError.
"""

from __future__ import annotations

import re

import yaml

from netslo.core.errors import InfrastructureError, SpecError

DEFAULT_S = {"iptables": 1.0, "nftables": 1.0, "ipvs": 0.0}    # s, upstream defaults for a zero value
CONFIG_MAP = ("kube-system", "kube-proxy", "config.conf")     # namespace, name, key (kubeadm)
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
GO_FORM = "a Go duration, e.g. '1s', '500ms', '1m0s'"


def go_duration(text, field: str) -> float:
    """A Go ``time.Duration`` string ('1s', '1m0s', '0') -> seconds; SpecError naming ``field`` otherwise."""
    s = str(text).strip() if isinstance(text, (str, int)) and not isinstance(text, bool) else None
    if s is None or not s:
        raise SpecError(field, text, GO_FORM)
    if s == "0":
        return 0.0
    parts = _GO_PART.findall(s)
    if "".join(n + u for n, u in parts) != s:
        raise SpecError(field, text, GO_FORM)
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def min_sync_period(config: dict) -> tuple[float, str]:
    """(seconds, mode) of a parsed KubeProxyConfiguration; a zero or absent period is the mode's default."""
    if not isinstance(config, dict):
        raise SpecError("kube-proxy configuration", config, "a KubeProxyConfiguration mapping")
    mode = config.get("mode") or "iptables"
    if mode not in DEFAULT_S:
        raise SpecError("kube-proxy mode", mode, f"one of {', '.join(DEFAULT_S)}")
    section = config.get(mode) or {}
    raw = section.get("minSyncPeriod") if isinstance(section, dict) else None
    seconds = 0.0 if raw in (None, "") else go_duration(raw, f"kube-proxy {mode}.minSyncPeriod")
    return (seconds or DEFAULT_S[mode]), mode


def read(api) -> tuple[float, str]:
    """(minSyncPeriod s, a phrase saying where it came from) of the cluster's kube-proxy; (0.0, why)
    when the cluster has no kube-proxy ConfigMap (e.g. a CNI that replaces kube-proxy)."""
    namespace, name, key = CONFIG_MAP
    cm = api.get("configmap", name, namespace, missing_ok=True)
    if not cm:
        return 0.0, f"no ConfigMap {namespace}/{name}: no kube-proxy rate limit assumed"
    where = f"ConfigMap {namespace}/{name}"
    data = cm.get("data") or {}
    try:       # the cluster's state, not the user's input: an InfrastructureError
        if key not in data:
            raise SpecError(where, sorted(data), f"a key {key!r}")
        seconds, mode = min_sync_period(yaml.safe_load(data[key]))
    except yaml.YAMLError as e:
        raise InfrastructureError(f"the cluster's kube-proxy configuration ({where}) is not usable: "
                                  f"{key} is not YAML ({' '.join(str(e).split())})") from e
    except SpecError as e:
        raise InfrastructureError(f"the cluster's kube-proxy configuration ({where}) is not usable: {e}") from e
    return seconds, f"kube-proxy {mode} minSyncPeriod {seconds:g} s ({where})"
