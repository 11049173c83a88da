"""The ``summaries`` table: one document summary per stored file, keyed by content hash and
model (``varaverk.index.store.schema``, migration 5).

A summary is *current* when its ``sha256`` equals the file row's and its ``model`` is the one
the settings name; otherwise it is *stale* (kept, shown as such, remade by the next pass). A
file counts for summaries when it is indexed (or partial) with at least one chunk: skipped
files have nothing to summarise. Every function runs inside the caller's lock; ``put`` is its
own transaction, so a pass killed mid-way keeps every summary it finished and none half.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

_SUMMARISABLE = "status IN ('indexed', 'partial') AND chunk_count > 0"
_SUMMARISABLE_F = "f.status IN ('indexed', 'partial') AND f.chunk_count > 0"


class Summary(NamedTuple):
    """One stored summary (a named tuple: no dataclasses on the no-op refresh's path).

    Attributes:
        path: the stored file path (``NAME:relative/path`` for another source).
        sha256: hex hash of the file content it was made from.
        model: ``extractive`` (no model) or ``backend/model`` of the generation model.
        made_at: when it was made, UTC ISO 8601 (seconds).
        text: the summary, plain text (first line the document's title).
        stale_content: (``read`` only) the file's content changed since, or the index no longer
            holds the file.
    """

    path: str
    sha256: str
    model: str
    made_at: str
    text: str
    stale_content: bool = False


def read(conn: sqlite3.Connection, path: str) -> Summary | None:
    """The stored summary of ``path`` (current or stale: ``stale_content`` says), or None."""
    row = conn.execute(
        "SELECT s.path, s.sha256, s.model, s.made_at, s.text, "
        "f.sha256 IS NULL OR f.sha256 != s.sha256 FROM summaries s "
        "LEFT JOIN files f ON f.path = s.path WHERE s.path = ?", (path,)).fetchone()
    return Summary(*row[:5], stale_content=bool(row[5])) if row else None


def read_many(conn: sqlite3.Connection, paths: list[str]) -> dict[str, Summary]:
    """``path -> Summary`` for those of ``paths`` that have a *current-content* summary (its
    hash equals the file row's), whatever model made it."""
    out: dict[str, Summary] = {}
    for start in range(0, len(paths), 500):
        part = paths[start:start + 500]
        marks = ",".join("?" * len(part))
        for row in conn.execute(
                "SELECT s.path, s.sha256, s.model, s.made_at, s.text FROM summaries s "
                "JOIN files f ON f.path = s.path AND f.sha256 = s.sha256 "
                f"WHERE s.path IN ({marks})", part):
            out[row[0]] = Summary(*row)
    return out


def put(conn: sqlite3.Connection, summary: Summary) -> None:
    """Store (or replace) one summary in its own transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?)",
                     (summary.path, summary.sha256, summary.model, summary.made_at,
                      summary.text))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def todo(conn: sqlite3.Connection, model: str) -> list[tuple[str, str]]:
    """``[(path, sha256)]`` of the summarisable files without a current summary by ``model``,
    in path order (a resumed pass starts where the killed one was)."""
    return conn.execute(
        "SELECT f.path, f.sha256 FROM files f LEFT JOIN summaries s ON s.path = f.path "
        f"WHERE {_SUMMARISABLE_F} AND (s.path IS NULL "
        "OR s.sha256 != f.sha256 OR s.model != ?) ORDER BY f.path", (model,)).fetchall()


def counts(conn: sqlite3.Connection, model: str) -> dict[str, int]:
    """``{"files", "current", "stale", "missing", "orphaned"}``: summarisable files, those with
    a current summary by ``model``, with an outdated one (other content or model), with none;
    and summaries of files the index no longer holds."""
    files, current, stale = conn.execute(
        "SELECT count(*), "
        "coalesce(sum(s.sha256 = f.sha256 AND s.model = ?), 0), "
        "coalesce(sum(s.path IS NOT NULL AND (s.sha256 != f.sha256 OR s.model != ?)), 0) "
        "FROM files f LEFT JOIN summaries s ON s.path = f.path "
        f"WHERE {_SUMMARISABLE_F}", (model, model)).fetchone()
    orphaned = conn.execute(
        "SELECT count(*) FROM summaries WHERE path NOT IN "
        f"(SELECT path FROM files WHERE {_SUMMARISABLE})").fetchone()[0]
    return {"files": files, "current": current, "stale": stale,
            "missing": files - current - stale, "orphaned": orphaned}


def drop_orphans(conn: sqlite3.Connection) -> int:
    """Delete the summaries of files the index no longer holds (deleted, renamed, now skipped);
    returns how many, in its own transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        gone = conn.execute("DELETE FROM summaries WHERE path NOT IN "
                            f"(SELECT path FROM files WHERE {_SUMMARISABLE})").rowcount
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return gone
