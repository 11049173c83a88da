"""The ledger file, one per host: locked appends, pruning on write, locked reads.

Writers (``append_row``) never rewrite the file on an ordinary append: each row goes out as a
single ``os.write`` of the whole encoded line on an ``O_APPEND`` descriptor under ``fcntl.flock``,
so a concurrent CLI writer and dock writer cannot interleave. Pruning to the newest
``retain_rows`` happens on write, only once the file passes a size threshold, atomically (temp
file + ``os.replace``) under the same lock; an appender that waited on the lock notices the file
was replaced and re-opens it, so no concurrent append is lost.

Readers (``read_rows``) take a shared lock, then skip malformed lines and report each one as
``file:line: reason`` (``varaverk.ledger.rows.parse_text``).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from varaverk.atomic_files import write_atomic
from varaverk.ledger.rows import LedgerRow, format_row, parse_text

DEFAULT_RETAIN_ROWS = 20000
# Bytes per retained row before a prune is considered. A typical row is 45-70 bytes, so the file
# grows to roughly twice its pruned size between prunes: one rewrite per ~15k appends.
PRUNE_BYTES_PER_ROW = 128


def default_prune_threshold(retain_rows: int) -> int:
    """File size in bytes past which an append considers pruning (``retain_rows`` × 128)."""
    return max(retain_rows, 1) * PRUNE_BYTES_PER_ROW


def _open_locked(path: Path) -> int:
    """An O_APPEND descriptor on ``path`` holding an exclusive flock on the current file.

    A pruner replaces the file by rename while we may be waiting on the lock of the old inode;
    after locking we check that the path still names our inode and re-open if not, so the row
    never lands in an unlinked file.
    """
    # O_RDWR, not O_WRONLY: the trailing-newline check preads the last byte.
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    while True:
        fd = os.open(path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            mine = os.fstat(fd)
            if current is not None and (current.st_ino, current.st_dev) == (mine.st_ino,
                                                                           mine.st_dev):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # replaced under us: try again on the new file


def append_row(path: str | os.PathLike, row: LedgerRow, *,
               retain_rows: int | None = DEFAULT_RETAIN_ROWS,
               prune_threshold_bytes: int | None = None) -> None:
    """Append one row to the ledger at ``path`` (created with its folder when missing).

    Args:
        path: the ledger file.
        row: the row; validated first (LedgerError before anything is written).
        retain_rows: keep at most this many newest lines when pruning; ``None`` or 0 never
            prunes (the CLI does not prune).
        prune_threshold_bytes: prune only once the file is larger than this (default
            ``default_prune_threshold(retain_rows)``), so an ordinary append costs one fstat.

    The whole line goes out in one ``os.write`` on an ``O_APPEND`` descriptor under an
    exclusive ``fcntl.flock``. If the file does not end in a newline (a line cut off by a
    crash or a bad copy), a newline is written first in the same call, so the broken line stays
    broken on its own and this row stays whole. Raises OSError when the write fails or is short.
    """
    data = (format_row(row) + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_locked(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(errno.EIO,
                          f"short write to ledger {path}: {written} of {len(data)} bytes")
        size += written
        if retain_rows:
            threshold = (prune_threshold_bytes if prune_threshold_bytes is not None
                         else default_prune_threshold(retain_rows))
            if size > threshold:
                _prune_locked(path, fd, retain_rows)
    finally:
        os.close(fd)  # releases the flock


def _prune_locked(path: Path, fd: int, retain_rows: int) -> bool:
    """Keep the newest ``retain_rows`` lines; the caller holds the flock on ``fd``.

    Lines are kept byte for byte (malformed ones too: pruning is not the place to judge them).
    Returns True when the file was rewritten.
    """
    with open(path, "rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    if len(lines) <= retain_rows:
        return False
    keep = lines[-retain_rows:]
    # Appenders waiting on the old inode's lock see the rename when they get the lock and
    # re-open the new file (see _open_locked), so their rows are not lost.
    write_atomic(path, b"".join(keep), mode=os.fstat(fd).st_mode & 0o777)
    return True


def read_bytes_locked(path: str | os.PathLike) -> tuple[bytes, os.stat_result]:
    """The whole ledger file and its fstat, read under a shared flock (no half-written row).

    Raises FileNotFoundError when there is no ledger.
    """
    with open(path, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        data = handle.read()
        return data, os.fstat(handle.fileno())


def read_rows(path: str | os.PathLike, host: str | None = None
              ) -> tuple[list[LedgerRow], list[str]]:
    """Read a ledger file.

    Args:
        path: the ledger (a missing file reads as no rows and no problems).
        host: when given, only rows whose host column equals it are returned; rows of other
            hosts are reported once per host (a partner file contributes only its slot's rows).

    Returns:
        ``(rows, problems)``: the well-formed rows in file order, and one ``file:line: reason``
        string per skipped line (malformed, not UTF-8, empty, or a last line without newline).
    """
    path = Path(path)
    try:
        data, _ = read_bytes_locked(path)
    except FileNotFoundError:
        return [], []
    return parse_text(data, str(path), host)
