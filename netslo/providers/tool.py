"""A cluster tool's command line (kind, minikube) run to completion; failures are one line naming it.

    run_tool(argv, timeout, install="install kind v0.33.0") -> CompletedProcess

A missing binary is ``Unsupported`` ('<tool> not found; <install>'); no answer within ``timeout``
seconds, or (with ``check``) a non-zero exit, is ``InfrastructureError`` with the first words of the
command and the last three lines of its stderr.
"""

from __future__ import annotations

import subprocess

from netslo.core.errors import InfrastructureError, Unsupported


def run_tool(argv: list[str], timeout: float, install: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise Unsupported(f"{argv[0]} not found; {install}") from None
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"{' '.join(argv[:4])}: no answer within {timeout:.0f}s") from None
    if check and proc.returncode:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise InfrastructureError(f"{' '.join(argv[:4])}: exit {proc.returncode}: {' | '.join(err[-3:])}")
    return proc
