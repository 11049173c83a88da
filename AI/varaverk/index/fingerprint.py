"""The no-op shortcut: a fingerprint of everything a refresh's "nothing to do" rests on.

When a full refresh (``varaverk.index.refresh``) finds nothing to do, it records beside the
index, in ``<index file>.fingerprint``, the index's ``generation`` and a SHA-256 over: the
settings (``repr``, secrets left out), the code that lists, classifies and chunks (the
stats of the modules of ``varaverk.index``, the chunkers and masking; the globs' classifier
stamp), HEAD, every tracked path with its git mode and its ``lstat`` (size, mtime, ctime,
inode, device, or the error), and the ``lstat`` of every folder holding one. A later run
(``unchanged_summary``) whose fingerprint is the same, under the same generation, is up to
date without loading the refresh machinery, logging or argparse: one SQLite read, ``git ls-files`` and a stat per path.

Nothing is recorded when any of those stats is racy (git's rule, as in
``varaverk.index.change_detection``): a time at or after the full run's start less
``RACY_SLACK_NS``. So a path changed at any time after that check began has a newer ctime
than the recorded one (no user tool sets ctime back) and its fingerprint differs. Only the
repository itself is fingerprinted: with ``AI_SOURCES`` nothing is recorded and every run takes
the full path. The file is a cache: a missing, unreadable or foreign one only costs the full
path, which writes it again.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from varaverk.documents import tracked_files
from varaverk.documents.stamp import STAMPED_PACKAGES

SUFFIX = ".fingerprint"
FORMAT = "varaverk-fingerprint 1"
# Git's racy-timestamp slack: file times may come from a coarse kernel clock, up to a tick
# behind ours (shared with change_detection's racy rule).
RACY_SLACK_NS = 10_000_000
# The code whose verdicts a fingerprint stands for: the index package besides the chunkers.
_INDEX_PACKAGE = Path(__file__).parent


def fingerprint_path(index_path: str | os.PathLike) -> Path:
    """The fingerprint file of the index at ``index_path``."""
    return Path(str(index_path) + SUFFIX)


def digest(settings, listing: tracked_files.Listing, generation: str,
           racy_from_ns: int | None = None) -> str | None:
    """The hex SHA-256 of the repository's state as a refresh sees it (see the module), or
    None when ``racy_from_ns`` is given and a stat is at or after it (a racy file or folder).

    ``listing``: ``tracked_files.list_tracked`` of ``settings.ai_repo_root``.
    """
    h = hashlib.sha256()
    stamps = (_code_stats((_INDEX_PACKAGE, *STAMPED_PACKAGES)), tracked_files.classifier_stamp())
    h.update(repr((FORMAT, repr(settings), str(settings.index_path), generation, stamps,
                   str(listing.root), listing.head)).encode("utf-8", "surrogateescape"))
    root = os.fspath(listing.root)
    folders = set()
    for entry in listing.entries:
        h.update(f"\0{entry.mode} {entry.path}\0".encode("utf-8", "surrogateescape"))
        key = _stat_key(os.path.join(root, entry.path), racy_from_ns)
        if key is None:
            return None
        h.update(key)
        folder = os.path.dirname(entry.path)
        while folder and folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
    for folder in sorted(folders):
        key = _stat_key(os.path.join(root, folder), racy_from_ns)
        if key is None:
            return None
        h.update(f"\0{folder}\0".encode("utf-8", "surrogateescape") + key)
    return h.hexdigest()


def _code_stats(packages) -> list[tuple[str, int, int, int]]:
    """``(path, size, mtime, inode)`` of every module of ``packages``: an upgrade or an edit
    of the code changes them. Stats, not contents: reading the files cost this run more than
    its stats of the repository, and a changed stat only sends the run down the full path,
    which compares the contents' stamps."""
    out = []
    for package in packages:
        for folder, subfolders, names in os.walk(package):
            subfolders[:] = sorted(f for f in subfolders if f != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    out.append((os.path.join(folder, name), st.st_size, st.st_mtime_ns,
                                st.st_ino))
    return out


def _stat_key(path: str, racy_from_ns: int | None) -> bytes | None:
    """``lstat`` of ``path`` as bytes (size, mtime, ctime, inode, device, mode; or the error
    number), None when its mtime or ctime is at or after ``racy_from_ns``."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"error {exc.errno}".encode()
    if racy_from_ns is not None and max(st.st_mtime_ns, st.st_ctime_ns) >= racy_from_ns:
        return None
    return (f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev} "
            f"{st.st_mode}").encode()


def record(settings, listing: tracked_files.Listing, generation: str, started_ns: int,
           summary_head: str) -> bool:
    """Record the fingerprint after a full refresh that started at ``started_ns``
    (``time.time_ns()``, before it listed anything) found nothing to do in the index of that
    ``generation``; ``listing`` is what it checked and ``summary_head`` its log line without
    the time (``IndexReport.summary_head``). Returns whether it was recorded (not when a stat
    is racy, or the file cannot be written)."""
    try:
        generation = index_identity(settings.index_path, generation)
    except OSError:
        return False
    found = digest(settings, listing, generation, started_ns - RACY_SLACK_NS)
    if found is None:
        return False
    body = f"{FORMAT}\n{generation}\n{found}\n{summary_head}\n"
    from varaverk.atomic_files import write_atomic  # tempfile: only when recording

    try:
        write_atomic(fingerprint_path(settings.index_path), body.encode("utf-8"),
                     durable=False)  # a cache: one lost to a power cut costs one full run
    except OSError:
        return False
    return True


def unchanged_summary(settings) -> str | None:
    """The log line of the last full run that found nothing to do (without its time), when
    the repository's fingerprint is still the one it recorded under the index's current
    generation; else None (the full path decides). Never writes anything.

    Raises:
        OSError, sqlite3.Error, tracked_files.SourcesError: the caller takes the full path.
    """
    if settings.ai_sources:
        return None
    index_path = Path(settings.index_path)
    try:
        form, generation, recorded, summary_head = \
            fingerprint_path(index_path).read_text(encoding="utf-8").split("\n")[:4]
    except (FileNotFoundError, ValueError):
        return None
    if form != FORMAT or generation != index_identity(index_path, _generation(index_path)):
        return None
    listing = tracked_files.list_tracked(settings.ai_repo_root)
    return summary_head if digest(settings, listing, generation) == recorded else None


def index_identity(index_path: str | os.PathLike, generation: str | None) -> str:
    """``generation``, inode and device of the index file: a file rebuilt, moved aside or
    restored from a backup is another index even where its write counter is the same."""
    st = os.stat(index_path)
    return f"{generation}:{st.st_ino}:{st.st_dev}"


def _generation(index_path: Path) -> str | None:
    """The index's ``generation`` (its write counter), read only."""
    uri = "file:" + quote(os.path.abspath(index_path), safe="/") + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    finally:
        conn.close()
    return row[0] if row else None
