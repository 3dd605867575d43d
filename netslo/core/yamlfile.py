"""Read a YAML file for a spec parser: every problem is a one-line SpecError naming the file."""

from __future__ import annotations

from pathlib import Path

import yaml

from netslo.core.errors import SpecError


def read(path, option: str):
    """The parsed document of ``path``; ``option`` names the CLI option that chose the file."""
    return _parse(path, option, yaml.safe_load)


def read_all(path, option: str) -> list:
    """Every document of a multi-document file (``---`` between them), empty ones left out."""
    return [d for d in _parse(path, option, lambda text: list(yaml.safe_load_all(text))) if d is not None]


def _parse(path, option: str, load):
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError(option, str(path), f"a readable YAML file ({e.strerror})") from None
    try:
        return load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "?"
        raise SpecError(where, getattr(e, "problem", str(e)), "valid YAML", where=str(path)) from None
