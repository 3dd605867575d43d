"""The shell scripts CI runs: pitfalls that make a step fail at random.

Under ``set -o pipefail`` a pipeline ``cmd | grep -q PATTERN`` fails when grep, having found the
pattern, exits before ``cmd`` has written all its output: ``cmd`` dies of SIGPIPE (status 141) and the
pipeline's status is that. Seen on 2026-11-29: a fresh Calico build was refused because
``calico-node -v | grep -qE '^Version: ...'`` failed although the version printed was right.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIPE_INTO_QUIET_GREP = re.compile(r"\|\s*grep\s+-[A-Za-z]*q")


def scripts() -> list[Path]:
    return sorted([*ROOT.glob("scripts/**/*.sh"), ROOT / ".ci" / "run"])


def _bash(script: str) -> int:
    return subprocess.run(["bash", "-c", script], capture_output=True, timeout=30).returncode


def test_quiet_grep_in_a_pipeline_fails_under_pipefail():
    """The failure the check below prevents: the writer's later line meets a closed pipe."""
    writer = "(echo Version: v1; sleep 0.3; echo Build date: x)"
    assert _bash(f"set -o pipefail; {writer} | grep -qE '^Version: v1$'") == 141
    assert _bash(f"set -o pipefail; grep -qE '^Version: v1$' <<<\"$( {writer} )\"") == 0
    assert _bash(f"set -o pipefail; grep -qE '^Version: v2$' <<<\"$( {writer} )\"") == 1


def test_no_pipe_into_quiet_grep_under_pipefail():
    found = []
    for path in scripts():
        text = path.read_text()
        if "pipefail" not in text:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if PIPE_INTO_QUIET_GREP.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert scripts() and not found, "pipes into grep -q under pipefail:\n" + "\n".join(found)
