"""Whether a failed read means a damaged index file: ``PRAGMA quick_check`` confirms it.

Only confirmed damage becomes ``IndexDamaged``; any other ``sqlite3.DatabaseError`` (a busy
file, a full disk) is left as it was, since moving such a file aside would lose a good index.
"""

from __future__ import annotations

import sqlite3

# SQLite's primary result codes for a damaged image and for a file that is no database.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def is_damage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's own report of a damaged file or of one that is no
    database (its primary result code)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def quick_check(conn: sqlite3.Connection) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with the file behind ``conn`` (its first
    finding, or SQLite's error when the check itself cannot read the file), None when the
    file is sound, or when the check could not run for another reason (busy, locked).

    Reads every page: O(file size); call it only after a read failed, or before a rebuild.
    """
    try:
        row = conn.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        return str(exc) if is_damage_error(exc) else None
    finding = row[0] if row else "no answer"
    return None if finding == "ok" else finding


def file_damage(path: str) -> str | None:
    """``quick_check`` of the file at ``path`` on a connection of its own (None when it is
    sound or cannot be opened at all, e.g. a folder)."""
    try:
        conn = sqlite3.connect(path, timeout=30)
    except sqlite3.Error:
        return None
    try:
        return quick_check(conn)
    finally:
        conn.close()
