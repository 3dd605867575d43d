"""Process helpers shared by providers that start and reap processes (netns, user-mode-linux)."""

from __future__ import annotations

import os

from netslo.core.resources import IMPORT_ROOT

# Working directory of the children netslo starts: none of them reads or writes a relative path, and
# a neutral directory keeps them from holding (or importing from) whatever directory pytest ran in.
CHILD_CWD = "/"


def child_env() -> dict:
    """This process's environment with netslo's import root first on PYTHONPATH, so a child
    ``python -m netslo...`` (run from the host's interpreter) imports this same netslo."""
    return dict(os.environ, PYTHONPATH=str(IMPORT_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def alive(pid: int) -> bool:
    """True if a process with this PID exists (also when it belongs to another user)."""
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# Run ids owned by live objects of THIS process. Reaping skips them; a run dir that names this PID
# but is not registered here is stale (its PID was reused), so it is reaped like any dead run.
LIVE_RUNS: set[str] = set()


def owned_elsewhere_or_here(run_id: str, owner_pid: int | None) -> bool:
    """True if the run is still in use: registered in this process, or owned by another live process."""
    if run_id in LIVE_RUNS:
        return True
    return owner_pid is not None and owner_pid != os.getpid() and alive(owner_pid)
