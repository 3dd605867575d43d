"""Where the installed netslo package is, and the data files it ships (found through
``importlib.resources``, the same in a checkout, an editable install and a wheel).

netslo is not zip-safe: its data files are handed to other programs (kubectl, docker, gcc, a
user-mode-linux guest) by path, so the package must be installed as files (pip always does).

- ``PACKAGE_DIR``: the ``netslo`` package directory;
- ``IMPORT_ROOT``: the ``sys.path`` entry it is imported from (site-packages, or a checkout); a child
  interpreter given it on ``PYTHONPATH`` imports this same netslo (``procs.child_env``);
- ``data(*parts)``: a shipped file or folder, e.g. ``data("providers", "cni", "calico.yaml")``;
- ``shipped_slo(name)``: one of the gate's SLO files (``slo.yaml``, ``slo-qos.yaml``,
  ``slo-impairments.yaml``, ``slo-protocols.yaml``) in ``netslo.gate``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

PACKAGE_DIR = Path(str(files("netslo")))
IMPORT_ROOT = PACKAGE_DIR.parent
SLO_FILES = ("slo.yaml", "slo-qos.yaml", "slo-impairments.yaml", "slo-protocols.yaml")


def data(*parts: str) -> Path:
    """Path of a file or folder shipped inside the netslo package."""
    return PACKAGE_DIR.joinpath(*parts)


def shipped_slo(name: str = "slo.yaml") -> Path:
    """Path of one of the gate's shipped SLO files (see ``SLO_FILES``)."""
    if name not in SLO_FILES:
        raise ValueError(f"shipped SLO file {name!r}: expected one of {', '.join(SLO_FILES)}")
    return data("gate", name)
