"""Process helpers shared by providers that start and reap processes (netns, user-mode-linux)."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True if a process with this PID exists (also when it belongs to another user)."""
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
