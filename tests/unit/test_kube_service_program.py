"""A real cluster's Service programming objects, against a recording API (no cluster): the endpoint
change makes the Service once with a selector no pod meets, adds and removes the backend by one label
patch each, and leaves nothing when closed; the service change reserves an address and creates and
deletes the Service itself. (kind runs them for real: the gate's test_service_programming.)"""

from types import SimpleNamespace

import pytest

from netslo.core.errors import SpecError
from netslo.providers.base import Pod
from netslo.providers.kube.service_program import MEMBER_LABEL, KubeServiceProgram


class Api:
    def __init__(self):
        self.calls, self.services = [], {}

    def create(self, obj, what=None):
        self.calls.append(("create", obj["metadata"]["name"], dict(obj["spec"]["selector"])))
        self.services[obj["metadata"]["name"]] = obj

    def get(self, kind, name, namespace=None, missing_ok=False):
        if name == "kubernetes":
            return {"spec": {"clusterIP": "10.96.0.1"}}
        if name not in self.services:
            return None
        return {"spec": {"clusterIP": self.services[name]["spec"].get("clusterIP", "10.96.0.77"),
                         "ports": [{"nodePort": 31234}]}}

    def delete(self, kind, name, namespace=None):
        self.calls.append(("delete", kind, name))
        self.services.pop(name, None)

    def patch(self, kind, name, namespace, body, what=None):
        self.calls.append(("patch", kind, name, body["metadata"]["labels"]))


def _cluster():
    return SimpleNamespace(api=Api(), namespace="ns", run_id="r1", k8s_pod_name=lambda p: f"k8s-{p.name}",
                           node_ip=lambda node: "172.18.0.2")


BACKEND, CLIENT = Pod("backend", "n0", "10.244.0.5"), Pod("client", "n1", "10.244.1.5")


def test_the_endpoint_change_patches_the_backend_label_in_and_out():
    c = _cluster()
    svc = KubeServiceProgram(c, BACKEND, 7001, "ClusterIP", CLIENT, change="endpoint")
    name = svc.name
    (verb, made, selector), = c.api.calls
    assert verb == "create" and made == name and selector[MEMBER_LABEL] == name   # no pod has it yet
    assert svc.target == ("10.96.0.77", 7001)
    svc.create()
    svc.delete()
    assert c.api.calls[1:] == [("patch", "pod", "k8s-backend", {MEMBER_LABEL: name}),
                               ("patch", "pod", "k8s-backend", {MEMBER_LABEL: None})]
    svc.close()
    svc.close()   # idempotent
    assert c.api.calls[3:] == [("patch", "pod", "k8s-backend", {MEMBER_LABEL: None}), ("delete", "service", name)]


def test_the_service_change_reserves_an_address_then_creates_and_deletes_the_service(monkeypatch):
    import netslo.providers.kube.service_program as ksp
    monkeypatch.setattr(ksp, "wait_deleted", lambda *a: None)
    c = _cluster()
    svc = KubeServiceProgram(c, BACKEND, 7001, "NodePort", CLIENT)
    assert [v for v, *_ in c.api.calls] == ["create", "delete"] and MEMBER_LABEL not in c.api.calls[0][2]
    assert svc.target[0] == "172.18.0.2" and 30000 <= svc.target[1] <= 32767
    svc.create()
    svc.delete()
    assert [v for v, *_ in c.api.calls] == ["create", "delete", "create", "delete"]


def test_an_unknown_change_is_one_line():
    with pytest.raises(SpecError) as e:
        KubeServiceProgram(_cluster(), BACKEND, 7001, "ClusterIP", CLIENT, change="scale")
    assert "service change" in str(e.value) and "scale" in str(e.value) and "service, endpoint" in str(e.value)
