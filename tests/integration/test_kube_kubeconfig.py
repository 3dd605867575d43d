"""Kubeconfigs the client loads, against a real cluster (kube_target: kind, by scripts/ci-kind.sh): an
``exec`` credential plugin, a context chosen by name, and a $KUBECONFIG list of files, each through a
whole run (namespace, pod, exec in it, deletion). Skips with the reason when no cluster answers.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from netslo.core.errors import InfrastructureError
from netslo.providers.existing import ExistingProvider

from . import kube_target

pytestmark = pytest.mark.skipif(kube_target.why_not_up() is not None,
                                reason=str(kube_target.why_not_up()))

PLUGIN = """import json, sys
open(sys.argv[2], "a").write("called\\n")
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": json.load(open(sys.argv[1]))}))
"""


def _credential(user: dict) -> dict:
    """ExecCredential status carrying the admin's own credential: a bearer token (the local
    cluster) or a client certificate and key (kind)."""
    if "token" in user:
        return {"token": user["token"]}
    if "client-certificate-data" in user:
        import base64
        return {"clientCertificateData": base64.b64decode(user["client-certificate-data"]).decode(),
                "clientKeyData": base64.b64decode(user["client-key-data"]).decode()}
    raise AssertionError(f"admin user has neither a token nor client certificate data: {sorted(user)}")


def _admin() -> dict:
    with open(kube_target.kubeconfig()) as f:
        return yaml.safe_load(f)


def _write(path, doc) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _a_run_works(p: ExistingProvider) -> None:
    c = p.up()
    try:
        c.add_pod("kc", c.nodes[0], responders=())
        assert c.api.exec(c.namespace, "kc", "agent", ["id", "-u"], timeout=30).strip() == b"65534"
    finally:
        c.close()


def test_exec_credential_plugin(tmp_path):
    admin = _admin()
    token = tmp_path / "credential.json"
    token.write_text(json.dumps(_credential(admin["users"][0]["user"])))
    calls = tmp_path / "calls"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    doc = {**admin, "users": [{"name": admin["users"][0]["name"], "user": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(plugin), str(token), str(calls)], "interactiveMode": "Never"}}}]}
    _a_run_works(ExistingProvider(kubeconfig=_write(tmp_path / "kc", doc), pull_policy="Never"))
    assert calls.read_text().count("called") >= 1   # the credential came from the plugin


def test_context_by_name_and_a_broken_current_context(tmp_path):
    admin = _admin()
    good = admin["contexts"][0]
    doc = {**admin,
           "clusters": admin["clusters"] + [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}],
           "contexts": [good, {"name": "broken", "context": {"cluster": "nowhere", "user": good["context"]["user"]}}],
           "current-context": "broken"}
    kc = _write(tmp_path / "kc", doc)
    _a_run_works(ExistingProvider(kubeconfig=kc, context=good["name"], pull_policy="Never"))
    with pytest.raises(InfrastructureError, match=r"127\.0\.0\.1:1"):
        ExistingProvider(kubeconfig=kc, pull_policy="Never", ready_timeout=5).up()


def test_kubeconfig_list_in_the_environment(tmp_path, monkeypatch):
    admin = _admin()
    # kubectl's rule: the first file that sets current-context wins (here b's, not a's)
    creds = _write(tmp_path / "a", {**admin, "contexts": [], "current-context": "not-this-one"})
    ctx = _write(tmp_path / "b", {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
                                  "contexts": admin["contexts"], "current-context": admin["current-context"]})
    monkeypatch.delenv("NETSLO_KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"{ctx}:{creds}")
    _a_run_works(ExistingProvider(pull_policy="Never"))
