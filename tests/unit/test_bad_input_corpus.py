"""The bad-input corpus (tests/corpus/bad_input.yaml): every case ends in one line naming the field,
the value and the expected form, with a usage exit code, and the gate creates nothing first."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netslo.core.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
CASES = yaml.safe_load((ROOT / "tests" / "corpus" / "bad_input.yaml").read_text())


def test_corpus_is_large_and_ids_are_unique():
    assert len(CASES) >= 50
    assert len({c["id"] for c in CASES}) == len(CASES)


def _one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    return lines[0]


def _run(argv, **kw):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "slo"], ids=lambda c: c["id"])
def test_slo_file_case(case, tmp_path):
    f = tmp_path / "slo.yaml"
    f.write_text(case["content"])
    run = _run([sys.executable, "-m", "netslo", "validate", str(f)])
    assert run.returncode == 2
    line = _one_line(run.stderr)
    assert str(f) in line and "expected" in line
    for part in case["expect"]:
        assert part in line, (part, line)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "agent"], ids=lambda c: c["id"])
def test_agent_case(case):
    run = _run([sys.executable, "-m", "netslo.agent", *case["args"]])
    assert run.returncode == 2 and run.stdout == ""
    line = _one_line(run.stderr)
    for part in case["expect"]:
        assert part in line, (part, line)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "cli"], ids=lambda c: c["id"])
def test_gate_option_case_stops_before_creating_anything(case, tmp_path):
    args = list(case["args"])
    if case.get("slo"):
        (tmp_path / "bad.yaml").write_text(case["slo"])
        args.append(f"--netslo-slo={tmp_path / 'bad.yaml'}")
    user = []
    if case.get("unreadable"):
        f = tmp_path / "secret.yaml"
        f.write_text("version: 1\n")
        os.chmod(f, 0o000)  # root reads it anyway unless it loses CAP_DAC_OVERRIDE/READ_SEARCH:
        args.append(f"--netslo-slo={f}")
        user = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]
    run_id = "badbad"
    env = dict(os.environ, NETSLO_RUN_ID=run_id)
    run = _run([*user, sys.executable, "-m", "pytest", "-m", "cni", "-p", "no:cacheprovider", *args], env=env)
    assert run.returncode == 4, run.stdout[-800:] + run.stderr[-800:]   # pytest usage error
    line = _one_line(run.stderr)
    assert line.startswith("ERROR: netslo: ")
    for part in case["expect"]:
        assert part in line, (part, line)
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"nsl-{run_id}")] if os.path.isdir("/run/netns") else True
    assert not Path(f"/run/netslo/{run_id}").exists()


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "impairment"], ids=lambda c: c["id"])
def test_impairment_spec_case(case):
    from netslo.impair.spec import parse
    with pytest.raises(SpecError) as e:
        parse(case["doc"])
    line = _one_line(str(e.value))
    for part in case["expect"]:
        assert part in line, (part, line)


def _set(doc, dotted: str, value):
    *path, last = dotted.split(".")
    for key in path:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    if isinstance(doc, list):
        doc[int(last)] = value
    else:
        doc[last] = value


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "qos"], ids=lambda c: c["id"])
def test_qos_spec_case(case):
    from netslo.studies.qos.spec import parse
    doc = copy.deepcopy(yaml.safe_load((ROOT / "netslo" / "gate" / "slo-qos.yaml").read_text()))
    for dotted, value in case["set"].items():
        _set(doc, dotted, value)
    with pytest.raises(SpecError) as e:
        parse(doc, "slo-qos.yaml")
    line = _one_line(str(e.value))
    assert line.startswith("slo-qos.yaml: ")
    for part in case["expect"]:
        assert part in line, (part, line)
