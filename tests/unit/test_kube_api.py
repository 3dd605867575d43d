"""The client boundary without a cluster: kubeconfig errors are one line naming the file, exec status
parsing, kind names, and the reaper's owner record."""

import os
import socket

import pytest
import yaml

from netslo.core.errors import InfrastructureError
from netslo.providers.existing import ExistingProvider
from netslo.providers.kube import reap as kube_reap
from netslo.providers.kube.api import KubeApi, _exit_code, _kind_key, kubeconfig_files


def test_missing_kubeconfig_is_one_line_naming_the_path(monkeypatch):
    monkeypatch.delenv("NETSLO_KUBECONFIG", raising=False)
    with pytest.raises(InfrastructureError) as e:
        ExistingProvider(kubeconfig="/nonexistent/kubeconfig")
    assert "\n" not in str(e.value) and str(e.value).startswith("kubeconfig /nonexistent/kubeconfig: no such file")
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/a:/nonexistent/b")
    with pytest.raises(InfrastructureError, match=r"^kubeconfig /nonexistent/a, /nonexistent/b: no such file "
                                                  r"\(from \$KUBECONFIG"):
        KubeApi()


def test_unknown_context_names_context_and_file(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "a",
                                  "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                                  "users": [{"name": "u", "user": {"token": "t"}}],
                                  "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}]}))
    with pytest.raises(InfrastructureError, match=rf"^kubeconfig context 'nope' of {kc}: "):
        KubeApi(str(kc), "nope")
    api = KubeApi(str(kc), "a")   # loading contacts nobody
    assert api.host == "https://127.0.0.1:1"


def test_kubeconfig_files_default_and_list(monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert kubeconfig_files(None) == [os.path.expanduser("~/.kube/config")]
    assert kubeconfig_files(f"/a{os.pathsep}/b") == ["/a", "/b"]


def test_exec_status_channel():
    assert _exit_code(b'{"metadata":{},"status":"Success"}', "exec x") == 0
    failed = (b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: '
              b'error executing command [sh -c exit 7], exit code 7","reason":"NonZeroExitCode",'
              b'"details":{"causes":[{"reason":"ExitCode","message":"7"}]}}')
    assert _exit_code(failed, "exec x") == 7
    with pytest.raises(InfrastructureError, match='^exec x: container "nope" not found'):
        _exit_code(b'{"status":"Failure","message":"container \\"nope\\" not found"}', "exec x")
    with pytest.raises(InfrastructureError, match="without an exit status"):
        _exit_code(b"", "exec x")


def test_kind_names():
    assert _kind_key("DaemonSet") == _kind_key("daemonsets") == "daemonset"
    assert _kind_key("endpointslices") == "endpointslice"
    with pytest.raises(ValueError, match="kind: value 'widget'"):
        _kind_key("widget")


def test_owner_record_of_this_process_is_alive_and_of_a_dead_pid_gone():
    rec = kube_reap.owner_record()
    assert rec["host"] == socket.gethostname() and rec["pid"] == str(os.getpid()) and rec["start"]
    assert kube_reap.owner_gone(rec, age_s=10 * 86400) is None      # alive, however old
    dead = {**rec, "pid": "999999999"}
    assert "is gone" in kube_reap.owner_gone(dead, age_s=0)
    reused = {**rec, "start": "1"}                                    # same pid, another process
    assert "belongs to another process" in kube_reap.owner_gone(reused, age_s=0)
    rebooted = {**rec, "boot": "another-boot"}
    assert "reboot" in kube_reap.owner_gone(rebooted, age_s=0)


def test_owner_elsewhere_or_unknown_counts_as_gone_only_when_old():
    other = {"host": "elsewhere", "pid": "1", "start": "1", "boot": "x"}
    assert kube_reap.owner_gone(other, age_s=60) is None
    assert "owner on host elsewhere, 3.2 h old" in kube_reap.owner_gone(other, age_s=3.2 * 3600)
    assert "no owner record" in kube_reap.owner_gone({}, age_s=4 * 3600)


def test_kind_cluster_of_a_dead_owner_is_deleted_unless_kept(tmp_path, monkeypatch):
    """With a stand-in kind binary (the real one needs Docker): which clusters are deleted."""
    log = tmp_path / "kind.log"
    kind = tmp_path / "kind"
    kind.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                    "[ \"$1 $2\" = 'get clusters' ] && printf 'netslo\\nmine\\nhandmade\\n'\nexit 0\n")
    kind.chmod(0o755)
    monkeypatch.setattr(kube_reap, "kind_owner_dir", lambda: tmp_path / "owners")
    kube_reap.write_kind_owner("netslo", pid=999999999)      # its creator was killed
    kube_reap.write_kind_owner("mine")                       # this process: alive
    kube_reap.write_kind_owner("vanished", pid=999999999)    # cluster already gone
    said = kube_reap.reap_kind_clusters(str(kind), dry_run=True)
    assert said == ["kind reap: would delete kind cluster netslo (owner pid 999999999 on "
                    f"{socket.gethostname()} is gone)"]
    kept = kube_reap.reap_kind_clusters(str(kind), keep_cluster=True)
    assert kept and "kept kind cluster netslo" in kept[0]
    assert "delete" not in log.read_text()
    kube_reap.write_kind_owner("netslo", pid=999999999)
    said = kube_reap.reap_kind_clusters(str(kind))
    assert said == [said[0]] and "deleted kind cluster netslo" in said[0]
    assert "delete cluster --name netslo" in log.read_text() and "handmade" not in log.read_text().split("get clusters")[-1]
    assert sorted(p.name for p in (tmp_path / "owners").iterdir()) == ["mine.json"]
