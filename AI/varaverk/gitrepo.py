"""The one way the library runs git: the ``git`` command on a work tree, never a shell.

``spawn`` starts ``git -C ROOT ARGS...`` with stdout and stderr piped (bytes), so callers can
overlap two commands; ``short_head`` answers the abbreviated HEAD for reports; ``STATE`` and
``state_text`` give HEAD with where the work tree's git index file lies. The pull of
``git-pull-execute`` goes through GitPython instead (pyproject.toml says why).
"""

from __future__ import annotations

import os
import subprocess

# No credential prompt can ever block a job that runs unattended.
_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
# The arguments of the one git command a no-op refresh runs: the git index file (its path as
# git resolves it, GIT_INDEX_FILE and worktrees included), the folder's prefix in its work
# tree, then HEAD's commit (none, and exit code 1, before the first commit). With the index
# file unchanged, what `git ls-files` lists under that prefix is unchanged.
STATE = ("rev-parse", "--git-path", "index", "--show-prefix", "--verify", "-q", "HEAD")


def spawn(root: str | os.PathLike, *args: str) -> subprocess.Popen:
    """``git -C root args...`` started with piped stdout/stderr (bytes).

    Raises:
        OSError: git is not installed or cannot be started.
    """
    return subprocess.Popen(["git", "-C", os.fspath(root), *args], stdout=subprocess.PIPE,
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


def state_text(returncode: int, out: bytes) -> str:
    """The output of ``git rev-parse`` with ``STATE`` and its exit code as one string
    (``"0\\n.git/index\\n\\n<sha>\\n"``): what the no-op refresh compares."""
    return f"{returncode}\n{os.fsdecode(out)}"


def state_index_file(root: str | os.PathLike, text: str) -> str | None:
    """The git index file named by ``state_text`` output ``text`` of the work tree ``root``
    (None when git failed)."""
    code, _, out = text.partition("\n")
    if code not in ("0", "1") or "\n" not in out:
        return None
    return os.path.join(os.fspath(root), out.partition("\n")[0])
