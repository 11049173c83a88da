"""Where a repository's index file lives: one index per repository under ``AI_DATA_DIR``.

An index is keyed by its repository's identity, the resolved work-tree path of
``AI_REPO_ROOT``: ``AI_DATA_DIR/indexes/<folder name>-<12 hex of sha256(path)>.sqlite``. The
path, not the root commit, because what the index records (each file's size, times, inode and
device, and the work tree's HEAD) belongs to one work tree: two clones of one history would
fight over one index, and an empty repository has no root commit. It also costs no git call,
so the no-op refresh stays cheap. A moved repository is a new one (its first run builds anew).

An index of the older layout, ``AI_DATA_DIR/index.sqlite``, keeps serving the repository it
records in its ``meta`` (``repo_root``), adopted where it lies, and never another repository's
(``index_file``). One it cannot read is taken as ours, so that its damage is reported rather
than passed over, and ``ai-index --force`` moves it aside (``move_aside``).

Only the standard library: ``varaverk.config`` imports this for ``Settings.index_path``.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import sqlite3
from pathlib import Path
from urllib.parse import quote

LEGACY_NAME = "index.sqlite"
INDEXES_DIR = "indexes"
SIDE_FILES = ("-wal", "-shm")


def repo_identity(repo_root: str | os.PathLike) -> str:
    """The repository's identity: its resolved work-tree path (symlinks followed)."""
    return os.path.realpath(os.fspath(repo_root))


def keyed_path(data_dir: str | os.PathLike, repo_root: str | os.PathLike) -> Path:
    """``data_dir/indexes/<name>-<digest>.sqlite`` for the repository at ``repo_root``."""
    identity = repo_identity(repo_root)
    digest = hashlib.sha256(os.fsencode(identity)).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(identity))[:40] or "root"
    return Path(data_dir) / INDEXES_DIR / f"{name}-{digest}.sqlite"


def index_file(data_dir: str | os.PathLike, repo_root: str | os.PathLike) -> Path:
    """The index file of the repository at ``repo_root`` (it may not exist yet).

    The keyed file (``keyed_path``) when it exists or no older-layout index lies in
    ``data_dir``; else the older-layout ``data_dir/index.sqlite`` when it records this
    repository, or cannot be read (``recorded_repo``); else the keyed file.
    """
    keyed = keyed_path(data_dir, repo_root)
    legacy = Path(data_dir) / LEGACY_NAME
    if keyed.exists() or not legacy.is_file():
        return keyed
    try:
        owner = recorded_repo(legacy)
    except sqlite3.DatabaseError:
        return legacy
    if owner and repo_identity(owner) == repo_identity(repo_root):
        return legacy
    return keyed


def read_meta(path: str | os.PathLike, key: str) -> str | None:
    """The value of ``key`` in the ``meta`` table of the index file at ``path``, read only;
    None when the table or the key is missing.

    Raises:
        sqlite3.DatabaseError: the file cannot be read as an SQLite database.
    """
    uri = "file:" + quote(os.path.abspath(os.fspath(path)), safe="/") + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
            return None
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def recorded_repo(path: str | os.PathLike) -> str:
    """The ``repo_root`` an index file records in its ``meta`` ("" when none: never written).

    Raises:
        sqlite3.DatabaseError: the file cannot be read as an index of ours.
    """
    return read_meta(path, "repo_root") or ""


def move_aside(path: str | os.PathLike) -> Path:
    """Rename a damaged index file, with its ``-wal`` and ``-shm``, to
    ``<name>.damaged-<UTC time>`` beside it (never deleted); returns the new main path."""
    path = Path(path)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    for side in SIDE_FILES:
        extra = Path(str(path) + side)
        if extra.exists():
            os.replace(extra, Path(str(target) + side))
    os.replace(path, target)
    return target


def discard_unwritten(path: str | os.PathLike) -> bool:
    """Remove the index file at ``path`` (with its ``-wal`` and ``-shm``) when no run ever
    finished writing it (no ``generation`` in its ``meta``): what a failed first build
    leaves. Call it under the index lock. Returns whether it removed anything."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        written = read_meta(path, "generation") is not None
    except sqlite3.DatabaseError:
        return False  # not ours to judge: leave it for --status and --force
    if written:
        return False
    for side in SIDE_FILES:
        Path(str(path) + side).unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    return True
