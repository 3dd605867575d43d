"""netslo.providers.kind_join: cluster-info signed for kind's bootstrap token as the controller
manager signs it. The reference is a real signature: a kind cluster's cluster-info as its
kube-controller-manager wrote it (tests/unit/data/cluster-info-kind.json)."""

import json
from pathlib import Path

import pytest

from netslo.providers import kind_join

REAL = json.loads((Path(__file__).parent / "data" / "cluster-info-kind.json").read_text())


def test_the_signature_is_the_one_kube_controller_manager_wrote():
    assert kind_join.detached_signature(REAL["kubeconfig"]) == REAL["jws-kubeconfig-abcdef"]


@pytest.mark.parametrize("change", ["content", "secret"])
def test_another_content_or_secret_gives_another_signature(change):
    content, token = REAL["kubeconfig"], kind_join.KIND_TOKEN
    if change == "content":
        content = content.replace("netslo-control-plane", "other-control-plane")
    else:
        token = "abcdef.0123456789abcdeX"
    assert kind_join.detached_signature(content, token) != REAL["jws-kubeconfig-abcdef"]


class _Api:
    def __init__(self, data):
        self.data, self.patches = data, []

    def get(self, kind, name=None, namespace=None, selector=None, missing_ok=False):
        assert (kind, name, namespace) == ("configmap", "cluster-info", "kube-public") and missing_ok
        return None if self.data is None else {"data": dict(self.data)}

    def patch(self, kind, name, namespace, body, what=None):
        self.patches.append(body)
        self.data.update(body["data"])


@pytest.mark.parametrize("data,signed,patched", [
    (None, False, False),                                                   # kubeadm has not made it yet
    ({}, False, False),                                                     # no kubeconfig in it yet
    ({"kubeconfig": REAL["kubeconfig"]}, True, True),                        # signed by us
    (dict(REAL), True, False),                                               # the signer was first
], ids=["absent", "empty", "unsigned", "already signed"])
def test_cluster_info_is_signed_once_it_exists_and_only_if_unsigned(data, signed, patched):
    api = _Api(data)
    assert kind_join.sign_cluster_info(api) == signed
    assert api.patches == ([{"data": {"jws-kubeconfig-abcdef": REAL["jws-kubeconfig-abcdef"]}}] if patched else [])
