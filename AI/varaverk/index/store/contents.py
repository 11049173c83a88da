"""What the index holds, counted for ``ai-index --status`` and the dock's status panel."""

from __future__ import annotations

import sqlite3
from typing import Any


def _files_with(conn: sqlite3.Connection, where: str) -> list[dict[str, str]]:
    """``[{"path", "kind", "reason"}]`` of the file rows matching ``where``, by path."""
    return [{"path": p, "kind": k, "reason": r} for p, k, r in conn.execute(
        f"SELECT path, kind, reason FROM files WHERE {where} ORDER BY path")]


def _by_source(conn: sqlite3.Connection) -> dict[str, dict[str, int]]:
    """``{source name: {"files", "skipped", "chunks"}}``."""
    by_source: dict[str, dict[str, int]] = {}
    for src, status, n in conn.execute(
            "SELECT source, status, count(*) FROM files GROUP BY source, status"):
        entry = by_source.setdefault(src, {"files": 0, "skipped": 0, "chunks": 0})
        entry["skipped" if status == "skipped" else "files"] += n
    for src, n in conn.execute("SELECT source, count(*) FROM chunks GROUP BY source"):
        by_source.setdefault(src, {"files": 0, "skipped": 0, "chunks": 0})["chunks"] = n
    return by_source


def contents(conn: sqlite3.Connection) -> dict[str, Any]:
    """The counts and lists of ``Index.status`` read from the tables (all but ``path`` and
    ``size_bytes``); see that method for the keys."""
    files = dict(conn.execute("SELECT status, count(*) FROM files GROUP BY status"))
    files_by_kind = dict(conn.execute(
        "SELECT kind, count(*) FROM files WHERE status != 'skipped' GROUP BY kind"))
    chunks_by_kind = dict(conn.execute("SELECT kind, count(*) FROM chunks GROUP BY kind"))
    skipped = _files_with(conn, "status = 'skipped'")
    partial = _files_with(conn, "status = 'partial'")
    masked = _files_with(conn, "status = 'indexed' AND reason != ''")
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    return {
        "meta": meta, "files": files, "tracked": sum(files.values()),
        "files_by_kind": files_by_kind, "chunks_by_kind": chunks_by_kind,
        "chunks": sum(chunks_by_kind.values()), "skipped": skipped, "partial": partial,
        "masked": masked, "sources": _by_source(conn),
    }
