"""An index file taken back to an older schema, for migration tests: the same chunks and meta
in a new file made by the first migrations only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from varaverk.index.store.schema import MIGRATIONS, split_sql


def rewrite_at_schema(path: Path, version: int, columns: tuple[str, ...]) -> sqlite3.Connection:
    """Rewrite the index at ``path`` as schema ``version`` held it: its chunks' ``columns``
    (those that schema has) in id order and its meta, in a new file made by migrations 1 to
    ``version``, the chunks inserted through that schema's triggers. Returns the connection,
    its transaction open, for the caller to add rows and commit."""
    conn = sqlite3.connect(path)
    rows = conn.execute(f"SELECT {', '.join(columns)} FROM chunks ORDER BY id").fetchall()
    meta = conn.execute("SELECT key, value FROM meta").fetchall()
    conn.close()
    path.unlink()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT "
                 "NULL, applied_at TEXT NOT NULL)")
    for number, name, sql in MIGRATIONS[:version]:
        for statement in split_sql(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (number, name))
    conn.executemany(f"INSERT INTO chunks ({', '.join(columns)}) VALUES "
                     f"({', '.join('?' * len(columns))})", rows)
    conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
    return conn
