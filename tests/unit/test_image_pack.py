"""scripts/kind-offline/image_pack.py: the agent image as an OCI layout without its base layer's blob
(what the offline kind nodes import on top of the base layer their node image carries)."""

import hashlib
import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[2] / "scripts" / "kind-offline" / "image_pack.py"
spec = importlib.util.spec_from_file_location("image_pack", HERE)
image_pack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(image_pack)


def _layer(tmp_path: Path, name: str, content: bytes) -> str:
    root = tmp_path / f"root-{name}"
    (root / "opt").mkdir(parents=True)
    (root / "opt" / name).write_bytes(content)
    out = str(tmp_path / f"{name}.tar")
    image_pack.layer_from_dir(str(root), out)
    return out


def test_the_oci_archive_is_the_same_image_without_the_omitted_layer(tmp_path):
    base, app = _layer(tmp_path, "base", b"b" * 100_000), _layer(tmp_path, "app", b"a" * 10)
    oci = str(tmp_path / "delta.tar")
    image_id = image_pack.image("localhost/agent:1", [base, app], ["A=1"], "/opt", ["python"], None,
                                str(tmp_path / "full.tar"), oci=oci, oci_without=[base])
    with tarfile.open(oci) as t:
        files = {m.name: t.extractfile(m).read() for m in t.getmembers()}
    index = json.loads(files["index.json"])
    (desc,) = index["manifests"]
    assert desc["annotations"] == {"io.containerd.image.name": "localhost/agent:1"}
    manifest = json.loads(files[f"blobs/sha256/{desc['digest'][7:]}"])
    assert manifest["config"]["digest"] == image_id                     # the docker-archive's image, same ID
    digests = [d["digest"][7:] for d in manifest["layers"]]
    assert digests == [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (base, app)]
    blobs = {n[len("blobs/sha256/"):] for n in files if n.startswith("blobs/")}
    assert digests[1] in blobs and digests[0] not in blobs               # the base layer's blob left out
    for name, data in files.items():                                    # every blob is what it is named
        if name.startswith("blobs/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]


def test_a_layer_to_leave_out_must_be_one_of_the_layers(tmp_path, capsys):
    app = _layer(tmp_path, "app", b"a")
    with pytest.raises(SystemExit, match=r"--oci-without: value \['other.tar'\] — expected some of the --layer files"):
        image_pack.main(["image", "--tag", "x:1", "--layer", app, "--oci", str(tmp_path / "o.tar"),
                         "--oci-without", "other.tar", str(tmp_path / "f.tar")])
