"""The agent image, made from the installed netslo package (no checkout needed).

``python -m netslo image context DIR`` writes a Docker build context: the shipped recipe
(``netslo/agent/recipe/Dockerfile``), ``requirements.txt`` pinning each distribution the agent
imports (``netslo/agent/recipe/packages.txt``: a subset of netslo's runtime requirements) to the
version installed here (the image runs the same code and libraries as the client that drives it),
and a copy of the installed ``netslo`` package. ``image build`` runs
``docker build`` on it, tagged ``localhost/netslo-agent:<netslo version>`` (the tag the providers
use by default; ``--netslo-agent-image`` / ``$NETSLO_AGENT_IMAGE`` name another), and ``image load``
puts it into a kind cluster (``kind load docker-image``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from netslo import __version__
from netslo.core import resources
from netslo.core.errors import InfrastructureError

DEFAULT_TAG = f"localhost/netslo-agent:{__version__}"
RECIPE = resources.data("agent", "recipe", "Dockerfile")
PACKAGES = resources.data("agent", "recipe", "packages.txt")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503: case and runs of -_. do not matter)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def agent_packages() -> list[str]:
    """The distributions the agent image installs (``packages.txt``, comments left out)."""
    lines = (line.split("#", 1)[0].strip() for line in Path(PACKAGES).read_text().splitlines())
    return [line for line in lines if line]


def runtime_pins(dist: str = "netslo", only: list[str] | None = None) -> list[str]:
    """``name==version`` for each runtime requirement of ``dist`` (no extras; with ``only``, those of
    these names), at the version installed in this environment. InfrastructureError naming the first
    that is not installed, or a name of ``only`` that is not a requirement of ``dist``."""
    pins, wanted = [], None if only is None else {canonical(n) for n in only}
    for req in metadata.requires(dist) or []:
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        name = _NAME.match(req).group(1)
        if wanted is not None:
            if canonical(name) not in wanted:
                continue
            wanted.discard(canonical(name))
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            raise InfrastructureError(f"agent image: netslo requires {req!r}, which is not installed here; "
                                      "install netslo with its dependencies first") from None
    if wanted:
        raise InfrastructureError(f"agent image: {', '.join(sorted(wanted))} in {PACKAGES} "
                                  f"{'is' if len(wanted) == 1 else 'are'} not a requirement of {dist}")
    return pins


def write_context(directory: str | Path) -> Path:
    """Write the build context into ``directory`` (created; must be empty or absent). Returns it."""
    ctx = Path(directory)
    ctx.mkdir(parents=True, exist_ok=True)
    if any(ctx.iterdir()):
        raise InfrastructureError(f"agent image: build context {ctx} is not empty")
    shutil.copyfile(RECIPE, ctx / "Dockerfile")
    (ctx / "requirements.txt").write_text(
        f"# what netslo {__version__}'s agent imports, as installed where this context was made\n"
        + "\n".join(runtime_pins(only=agent_packages())) + "\n")
    shutil.copytree(resources.PACKAGE_DIR, ctx / "netslo", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return ctx


def _run(argv: list[str], what: str) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise InfrastructureError(f"{what}: {argv[0]} not found on PATH") from None
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise InfrastructureError(f"{what}: {' '.join(argv[:3])} exited {proc.returncode}: {' | '.join(tail)}")


def build(tag: str = DEFAULT_TAG, docker: str = "docker") -> str:
    """``docker build`` of a fresh context; returns the tag."""
    with tempfile.TemporaryDirectory(prefix="netslo-image-") as tmp:
        ctx = write_context(Path(tmp) / "context")
        _run([docker, "build", "-t", tag, str(ctx)], f"agent image {tag}")
    return tag


def load(cluster: str, tag: str = DEFAULT_TAG, kind: str = "kind") -> None:
    """Load the image into every node of kind cluster ``cluster``."""
    _run([kind, "load", "docker-image", tag, "--name", cluster], f"agent image {tag} into kind cluster {cluster}")
