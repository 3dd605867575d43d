"""netslo as a user gets it: ``python -m build`` makes a wheel and an sdist that ``twine check``
accepts, the wheel holds everything a run needs (and none of netslo's own tests), and in an empty
directory holding only a ``slo.yaml``, a fresh virtual environment with just that wheel runs the gate
(``pytest --pyargs netslo.gate -m cni``) on the embedded provider, with no checkout on ``sys.path``."""

import email
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import netslo
from netslo.providers.kube import manifests as kube_manifests

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# What a run needs from the package besides its modules (netslo.core.resources finds them there).
SHIPPED = ["netslo/gate/test_latency.py", "netslo/gate/test_impairments.py", "netslo/gate/test_protocols.py",
           "netslo/gate/test_policy.py", "netslo/gate/test_service_programming.py",
           "netslo/gate/test_qos.py", "netslo/gate/slo.yaml", "netslo/gate/slo-qos.yaml",
           "netslo/gate/slo-impairments.yaml", "netslo/gate/slo-protocols.yaml",
           "netslo/agent/recipe/Dockerfile", "netslo/agent/recipe/packages.txt",
           "netslo/agent/recipe/pins.sh",
           "netslo/providers/kube/templates/impairment-daemonset.yaml",
           "netslo/providers/cni/calico.yaml", "netslo/providers/cni/cilium.yaml",
           "netslo/providers/cni/antrea.yaml", "netslo/providers/kind/kind-calico.yaml",
           "netslo/traffic/probes/udp_sender.c"]
USER_SLO = """\
version: 1
defaults: {samples: 400, max_samples: 400, interval: 2ms}
objectives:
  - name: udp
    select: {protocol: udp}
    thresholds: {rtt.p50: 1ms, loss: 1%}
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True,
                   capture_output=True, text=True, timeout=600)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return wheels[0], sdists[0]


def test_twine_accepts_the_wheel_and_the_sdist(dist):
    p = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.count("PASSED") == 2, p.stdout + p.stderr


def test_the_wheel_ships_what_a_run_needs_and_no_own_tests(dist):
    names = zipfile.ZipFile(dist[0]).namelist()
    assert not [n for n in SHIPPED if n not in names]
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/"))]
    info = f"netslo-{netslo.__version__}.dist-info"
    assert f"{info}/licenses/LICENSE" in names
    meta = email.message_from_bytes(zipfile.ZipFile(dist[0]).read(f"{info}/METADATA"))
    assert meta["Version"] == netslo.__version__ and meta["License-Expression"] == "Apache-2.0"
    assert any(r.startswith("kubernetes") for r in meta.get_all("Requires-Dist"))
    # the agent image the providers ask for by default is the one `netslo image build` tags
    assert kube_manifests.DEFAULT_IMAGE.endswith(f":{netslo.__version__}")


def test_a_fresh_venv_with_only_the_wheel_runs_the_gate_from_an_empty_directory(dist, tmp_path):
    project = tmp_path / "user-repo"
    project.mkdir()
    (project / "slo.yaml").write_text(USER_SLO)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # The same pins as CI (requirements.txt as constraints): a user's own would do as well.
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(ROOT / "requirements.txt"),
                    str(dist[0])], check=True, env=env, cwd=project, timeout=900)

    def run(*argv, timeout=600):
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=project, timeout=timeout)

    where = run(py, "-c", "import netslo, sys; print(netslo.__file__); print(sys.path)")
    assert str(venv) in where.stdout.splitlines()[0] and str(ROOT) not in where.stdout, where.stdout
    assert run(str(venv / "bin" / "netslo"), "--version").stdout.strip() == f"netslo {netslo.__version__}"
    collected = run(py, "-m", "pytest", "--pyargs", "netslo.gate", "-m", "cni", "--collect-only", "-q",
                    "-p", "no:cacheprovider")
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert collected.returncode == 0 and len(ids) > 50, collected.stdout[-2000:] + collected.stderr[-2000:]
    assert any("test_latency_slo[same-node-udp-1k]" in i for i in ids)
    # one scenario measured for real, against the project's own slo.yaml (found in the directory)
    gate = run(py, "-m", "netslo", "gate", "-k", "same-node-udp-1k", "-p", "no:cacheprovider",
               "--netslo-results", str(tmp_path / "results"))
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]
    assert "1 passed" in gate.stdout and "n=400" in gate.stdout, gate.stdout[-3000:]
    assert "warning" not in gate.stdout.splitlines()[-1], gate.stdout[-1000:]   # no PytestAssertRewriteWarning
