"""scripts/kind-offline/image_pack.py: the agent image as a docker-archive and as an OCI layout that
leaves out a layer the nodes already hold (kind-offline's nodes import that one). The archives are
imported by a real containerd in the kind gate; here their structure is checked against the specs."""

import hashlib
import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

PACK = Path(__file__).resolve().parents[2] / "scripts" / "kind-offline" / "image_pack.py"


@pytest.fixture(scope="module")
def pack():
    spec = importlib.util.spec_from_file_location("image_pack", PACK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _layer(pack, tmp_path, name, files):
    root = tmp_path / f"root-{name}"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out = tmp_path / f"{name}.tar"
    pack.layer_from_dir(str(root), str(out))
    return str(out)


def _json(tar, name):
    return json.load(tar.extractfile(name))


def test_oci_layout_lists_every_layer_and_holds_only_the_blobs_not_omitted(pack, tmp_path):
    base = _layer(pack, tmp_path, "base", {"opt/venv/lib/x.py": "x = 1\n"})
    app = _layer(pack, tmp_path, "app", {"opt/netslo/netslo/__init__.py": "__version__ = '0'\n"})
    docker, oci = tmp_path / "agent.tar", tmp_path / "agent-thin.tar"
    cfg = pack.image("localhost/netslo-agent:0.1.0", [base, app], ["A=1"], "/opt/netslo", ["python"], None,
                     str(docker), oci=str(oci), oci_omit=(base,))
    digests = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (base, app)]
    with tarfile.open(oci) as t:
        names = set(t.getnames())
        index = _json(t, "index.json")
        (entry,) = index["manifests"]
        assert entry["annotations"]["io.containerd.image.name"] == "localhost/netslo-agent:0.1.0"
        man_raw = t.extractfile(f"blobs/sha256/{entry['digest'][7:]}").read()
        assert hashlib.sha256(man_raw).hexdigest() == entry["digest"][7:] and len(man_raw) == entry["size"]
        manifest = json.loads(man_raw)
        assert [layer["digest"] for layer in manifest["layers"]] == [f"sha256:{d}" for d in digests]
        assert manifest["config"]["digest"] == cfg       # the same image config as the docker-archive's
        assert f"blobs/sha256/{digests[1]}" in names and f"blobs/sha256/{digests[0]}" not in names
        assert _json(t, "oci-layout") == {"imageLayoutVersion": "1.0.0"}
    with tarfile.open(docker) as t:
        (m,) = _json(t, "manifest.json")
        assert m["Config"] == f"{cfg[7:]}.json" and m["Layers"] == [f"{d}/layer.tar" for d in digests]


def test_omitting_a_file_that_is_not_a_layer_is_one_line(pack, tmp_path):
    base = _layer(pack, tmp_path, "base", {"a": "1"})
    with pytest.raises(SystemExit, match=r"^--oci-omit: '/nope.tar' is not one of the --layer files$"):
        pack.image("r/a:1", [base], [], "/", None, None, str(tmp_path / "a.tar"), oci=str(tmp_path / "o.tar"),
                   oci_omit=("/nope.tar",))
    assert not (tmp_path / "o.tar").exists() and not (tmp_path / "a.tar").exists()   # nothing half-written


def test_timestamp_pyc_finds_the_bytecode_a_zero_mtime_layer_makes_stale(pack, tmp_path):
    import py_compile
    src = tmp_path / "lib"
    src.mkdir()
    for name, mode in (("stamp", py_compile.PycInvalidationMode.TIMESTAMP),
                       ("hashed", py_compile.PycInvalidationMode.CHECKED_HASH),
                       ("trusted", py_compile.PycInvalidationMode.UNCHECKED_HASH)):
        (src / f"{name}.py").write_text("x = 1\n")
        py_compile.compile(str(src / f"{name}.py"), invalidation_mode=mode, doraise=True)
    found = pack.timestamp_pyc([str(tmp_path)])
    assert [Path(f).name.split(".")[0] for f in found] == ["stamp"]
    Path(found[0]).unlink()
    assert pack.timestamp_pyc([str(tmp_path)]) == []
    assert pack.main(["timestamp-pyc", str(tmp_path)]) == 0
