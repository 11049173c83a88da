"""Real git repositories for tests, made in temporary folders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared"
if not SHARED.is_dir():  # CI clones main into another folder with shared/ beside it
    SHARED = Path(os.environ.get("VARAVERK_SHARED", SHARED))
FIXTURES = SHARED / "fixtures"
EVAL = SHARED / "eval"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return stdout; raises CalledProcessError on failure."""
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def make_repo(root: Path, files: dict[str, bytes | str], commit: bool = True) -> Path:
    """A git repository at ``root`` tracking ``files`` (path -> content), committed once."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "core.autocrlf", "false")
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    if files:
        git(root, "add", "-A")
    if commit and files:
        git(root, "commit", "-q", "-m", "fixture")
    return root


def make_harborlab(dest: Path) -> Path:
    """The harborlab fixture as a real repository at ``dest`` (59 tracked files)."""
    subprocess.run(["bash", str(FIXTURES / "make-harborlab-repo.sh"), str(dest)], check=True,
                   capture_output=True)
    return dest


def make_frigate(dest: Path) -> Path:
    """The Frigate docs fixture as a real repository at ``dest``."""
    subprocess.run(["bash", str(FIXTURES / "make-frigate-repo.sh"), str(dest)], check=True,
                   capture_output=True)
    return dest
