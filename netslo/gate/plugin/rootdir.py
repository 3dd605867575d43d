"""An option's value that moved pytest's rootdir is a usage error, not a different run.

pytest picks its rootdir and configuration file before it loads plugins from their entry points, so
at that moment ``--netslo-results /runner/tmp/results`` (or ``--alluredir DIR``, ``--netslo-baseline
DIR``) is an unknown option followed by a word, and an existing path given that way counts as a test
path (pytest's docs, "Initialization: determining rootdir and configfile", and pytest issue #1435;
``--opt=value`` is one word and is not read so). A results or baseline directory outside the project
that exists (the second run into it, a downloaded baseline) then moves the rootdir out of the
project: its pytest.ini or pyproject.toml is ignored, with its ``testpaths`` and markers, and the gate
collects something else. A netslo session stops with one line naming the option and the
``--opt=value`` spelling (``check_rootdir``, called by the plugin's ``pytest_configure``).
"""

from __future__ import annotations

import inspect
import os
import shlex
from pathlib import Path

import pytest

try:   # no public API computes the rootdir again; pytest 8.0-9.x have this one
    from _pytest.config.findpaths import determine_setup
except ImportError:   # a later pytest: the check is not made
    determine_setup = None


def values_read_as_paths(args: list[str], positional: list[str], invocation_dir: Path) -> list[tuple[str, str]]:
    """(option, value) pairs of ``args`` written ``--opt value`` whose value is an existing path and
    not one of the run's own ``positional`` arguments: what pytest read as test paths for its rootdir."""
    own = set(positional)
    return [(opt, val) for opt, val in zip(args, args[1:])
            if opt.startswith("--") and "=" not in opt and not val.startswith("-") and val not in own
            and (invocation_dir / val).exists()]


def _setup(args: list[str], config: pytest.Config) -> tuple[Path, Path | None]:
    """(rootdir, configuration file) pytest chooses for path arguments ``args`` and this run's
    ``-c``/``--rootdir``/``-o``."""
    ns = config.known_args_namespace
    given = {"inifile": ns.inifilename, "override_ini": ns.override_ini, "args": args,
             "rootdir_cmd_arg": ns.rootdir or None, "invocation_dir": config.invocation_params.dir}
    accepted = inspect.signature(determine_setup).parameters   # (pytest 8 has no override_ini)
    found = determine_setup(**{k: v for k, v in given.items() if k in accepted})
    return found[0], found[1]


def check_rootdir(config: pytest.Config) -> None:
    """A ``pytest.UsageError`` when option values read as paths moved the rootdir or configuration file
    pytest would have had without them (netslo's sessions only: another session is not netslo's to stop)."""
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + list(config.invocation_params.args)
    positional = [str(a) for a in config.known_args_namespace.file_or_dir]
    taken = values_read_as_paths(args, positional, config.invocation_params.dir)
    if not taken or determine_setup is None:
        return
    rootdir, inifile = _setup(positional, config)
    if (rootdir, inifile) == (config.rootpath, config.inipath):
        return
    # the ones that move it (an option pytest itself knows, e.g. --junitxml, was never read as a path)
    taken = [t for t in taken if _setup(positional + [t[1]], config) != (rootdir, inifile)] or taken
    opts = ", ".join(f"{opt} {val}" for opt, val in taken)
    fixed = " ".join(f"{opt}={val}" for opt, val in taken)
    raise pytest.UsageError(
        f"netslo: {opts}: pytest read this existing path as a test path before netslo's options were known, so its "
        f"rootdir is {config.rootpath} with configuration file {config.inipath or 'none'} (without it: {rootdir}, "
        f"{inifile or 'none'}); write {fixed}")
