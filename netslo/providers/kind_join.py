"""The signature a kind worker's ``kubeadm join`` waits for, written as soon as it can be.

``kubeadm join`` with token discovery reads the ConfigMap kube-public/cluster-info and accepts it only
with a detached JWS signature of its ``kubeconfig`` under ``jws-kubeconfig-<token id>`` (RFC 7515,
HS256 keyed by the token's secret), which kube-controller-manager's bootstrap signer adds once its
controllers run. On a new 2-node kind cluster (v1.34, 2026-11-29) kubeadm init created the ConfigMap,
the worker's join asked 2.7 s later and found no signature, the controller manager signed it 5.1 s
after its creation, and the join asked again only after its 5 s retry interval: 5 s of every
``kind create`` spent waiting. kind's bootstrap token is a constant of kind
(``abcdef.0123456789abcdef``, sigs.k8s.io/kind pkg/cluster/internal/kubeadm/const.go), so bring-up
signs the ConfigMap itself the moment it exists, with the same bytes the bootstrap signer writes
(k8s.io/cluster-bootstrap token/jws: go-jose's compact serialization without its payload). Should
the signature ever differ, the join retries as before and the signer writes its own.

    detached_signature(content, token) -> "<protected header>..<signature>" (base64url, unpadded)
    sign_cluster_info(api, token)      -> True once cluster-info carries the token's signature
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

KIND_TOKEN = "abcdef.0123456789abcdef"   # kind's fixed bootstrap token: "<id>.<secret>"
CLUSTER_INFO = ("kube-public", "cluster-info")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def detached_signature(content: str, token: str = KIND_TOKEN) -> str:
    """The detached HS256 JWS of ``content`` for bootstrap ``token`` ("id.secret")."""
    token_id, secret = token.split(".", 1)
    header = _b64(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    mac = hmac.new(secret.encode(), f"{header}.{_b64(content.encode())}".encode(), hashlib.sha256)
    return f"{header}..{_b64(mac.digest())}"


def sign_cluster_info(api, token: str = KIND_TOKEN) -> bool:
    """Add ``token``'s signature to cluster-info if it exists without one; True once it has one
    (ours or the bootstrap signer's), False while the ConfigMap or its kubeconfig is not there."""
    namespace, name = CLUSTER_INFO
    key = f"jws-kubeconfig-{token.split('.', 1)[0]}"
    cm = api.get("configmap", name, namespace, missing_ok=True)
    data = (cm or {}).get("data") or {}
    if "kubeconfig" not in data:
        return False
    if key not in data:
        api.patch("configmap", name, namespace, {"data": {key: detached_signature(data["kubeconfig"], token)}},
                  what=f"sign configmap {namespace}/{name} for kind's bootstrap token")
    return True
