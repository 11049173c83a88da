"""The one way the library runs git: the ``git`` command on a work tree, never a shell.

``spawn`` starts ``git -C ROOT ARGS...`` with stdout and stderr piped (bytes), so callers can
overlap two commands; ``short_head`` answers the abbreviated HEAD for reports. The pull of
``git-pull-execute`` goes through GitPython instead (pyproject.toml says why).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# No credential prompt can ever block a job that runs unattended.
_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}


def spawn(root: str | os.PathLike, *args: str) -> subprocess.Popen:
    """``git -C root args...`` started with piped stdout/stderr (bytes).

    Raises:
        OSError: git is not installed or cannot be started.
    """
    return subprocess.Popen(["git", "-C", str(Path(root)), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_ENV)


def short_head(root: str | os.PathLike, timeout: float = 5.0) -> str | None:
    """The abbreviated commit id of HEAD, or None (no git, no commits, not a work tree)."""
    try:
        proc = spawn(root, "rev-parse", "--short", "HEAD")
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    except OSError:
        return None
    head = out.decode("ascii", "replace").strip()
    return head if proc.returncode == 0 and head else None
