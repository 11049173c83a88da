"""Real git repositories for tests, made in temporary folders."""

from __future__ import annotations

import functools
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
# Ours, shipped with the tests: the harborlab fixture (one archive, so that indexing this
# repository never takes the fictional homelab's documents for ours) and its question set.
FIXTURES = TESTS / "fixtures"
HARBORLAB_ARCHIVE = FIXTURES / "harborlab.tar.gz"
HARBORLAB_QUESTIONS = FIXTURES / "harborlab-qa-dev.jsonl"
# Not ours to ship: third-party corpora (Frigate's and Synapse's docs, their question sets) live
# in the developers' shared folder beside the clone, or where VARAVERK_SHARED points.
SHARED = Path(os.environ.get("VARAVERK_SHARED") or TESTS.parents[1] / "shared")


def shared_corpus(rel: str) -> Path:
    """``SHARED/rel`` (e.g. ``fixtures/frigate-docs``); skips the test when it is absent."""
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"third-party corpus {rel} is not shipped with the tests: it needs the "
                    f"shared folder at {SHARED} (or VARAVERK_SHARED)")
    return path


def shared_files(rel: str) -> list[Path]:
    """Every file under ``SHARED/rel`` in path order; [] when it is absent (a benchmark
    measures the corpora at hand instead of skipping)."""
    path = SHARED / rel
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []


@functools.cache
def harborlab_files() -> dict[str, bytes]:
    """Every file of the harborlab fixture (relative path -> bytes), read from its archive;
    includes the git-ignored and untracked ones that hold canary secrets."""
    with tarfile.open(HARBORLAB_ARCHIVE) as archive:
        return {m.name.removeprefix("./"): archive.extractfile(m).read()
                for m in archive.getmembers() if m.isfile()}


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


# How long before "now" make_repo stamps the files it writes. A real repository's files are
# older than the build that indexes them; a file stamped within the racy-timestamp slack of a
# build is re-hashed by every later run until a run writes, which on a fast machine made
# tests that count the files a run reads depend on how quickly they reached the build.
FILE_AGE_S = 5


def make_repo(root: Path, files: dict[str, bytes | str], commit: bool = True) -> Path:
    """A git repository at ``root`` tracking ``files`` (path -> content), committed once;
    each file's mtime is FILE_AGE_S seconds in the past."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "core.autocrlf", "false")
    past = time.time_ns() - FILE_AGE_S * 1_000_000_000
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        os.utime(path, ns=(past, past), follow_symlinks=False)
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
    """The Frigate docs fixture as a real repository at ``dest``; skips without ../shared."""
    script = shared_corpus("fixtures/make-frigate-repo.sh")
    subprocess.run(["bash", str(script), str(dest)], check=True,
                   capture_output=True)
    return dest
