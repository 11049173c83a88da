"""How one index run's ``IndexChanges`` become rows: chunks with their vectors and keywords,
file rows, and the meta entries every write updates (``generation``, counts, the embedder).
``Index.write`` runs ``apply_changes`` inside its one transaction."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from varaverk.index.store.compatibility import check_compatible
from varaverk.index.store.labels import chunk_label
from varaverk.index.store.records import IndexChanges
from varaverk.index.store.vectors import vector_blobs

if TYPE_CHECKING:  # pragma: no cover
    from varaverk.documents.chunks import Chunk

_INSERT_CHUNK = ("INSERT INTO chunks (path, kind, section, title, start_line, end_line, part,"
                 " text, context, meta, vec, source, keywords, label)"
                 " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
_INSERT_FILE = ("INSERT OR REPLACE INTO files (path, kind, size, mtime_ns, sha256, status,"
                " reason, chunk_count, encoding, source, ctime_ns, inode, device)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")


def apply_changes(conn: sqlite3.Connection, ch: IndexChanges) -> None:
    """Write ``ch`` through ``conn``, inside the caller's transaction.

    Raises IndexMismatch when the new vectors come from another embedder (or length) than
    the stored ones and ``ch.replace_all`` is false; ValueError for an unusable vector
    (``vector_blobs``). Either leaves the transaction for the caller to roll back.
    """
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    if ch.replace_all:
        conn.execute("DELETE FROM chunks")
        conn.execute("DELETE FROM files")
        meta.pop("embed_backend", None)  # the new vectors define the model (below)
    blobs, width = vector_blobs([vec for _, vec in ch.new_chunks])
    rows = [(chunk.path, chunk.kind, chunk.section, chunk.title, chunk.start_line,
             chunk.end_line, chunk.part, chunk.text, chunk.context,
             json.dumps(chunk.meta, default=str, ensure_ascii=False), blob,
             chunk.source, chunk_keywords(chunk),
             chunk_label(chunk.path, chunk.section, chunk.title))
            for (chunk, _), blob in zip(ch.new_chunks, blobs)]
    if rows:
        # Never mix: new vectors must come from the model (and length) already stored.
        backend, model, _ = ch.embedder or ("?", "?", None)
        check_compatible(meta, backend, model, width)
    _delete(conn, ch, meta)
    conn.executemany(_INSERT_CHUNK, rows)
    conn.executemany(_INSERT_FILE, [
        (f.path, f.kind, f.size, f.mtime_ns, f.sha256, f.status, f.reason, f.chunk_count,
         f.encoding, f.source, f.ctime_ns, f.inode, f.device) for f in ch.file_rows])
    updates = _meta_updates(conn, ch, meta, bool(rows), width)
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                     [(k, str(v)) for k, v in updates.items()])


def chunk_keywords(chunk: Chunk) -> str:
    """The lexical-only keywords of a chunk (the ``keywords`` column): its ``meta["keywords"]``
    (tags, aliases) joined by spaces; ``""`` when it has none."""
    words = chunk.meta.get("keywords") if isinstance(chunk.meta, dict) else None
    if not words:
        return ""
    return " ".join(str(w) for w in words if str(w).strip())


def _delete(conn: sqlite3.Connection, ch: IndexChanges, meta: dict) -> None:
    """Drop the rows ``ch`` replaces or deletes; an index left without chunks forgets its
    embedder (the rows about to be written, if any, define it again)."""
    for path in ch.delete_paths:
        conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))
    for path in ch.replace_chunks_of:
        conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
    if not conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
        # No vectors left: the index belongs to no model until these rows are written.
        for key in ("embed_backend", "embed_model", "embed_dimension"):
            meta.pop(key, None)
            conn.execute("DELETE FROM meta WHERE key = ?", (key,))


def _meta_updates(conn: sqlite3.Connection, ch: IndexChanges, meta: dict, wrote_chunks: bool,
                  width: int) -> dict:
    """The meta entries this write sets: the run's own, the configured and actual embedder,
    the next ``generation`` and the file and chunk counts."""
    updates = dict(ch.meta)
    if ch.configured is not None:
        updates.update(config_backend=ch.configured[0], config_model=ch.configured[1])
    if ch.embedder is not None and (wrote_chunks or ch.replace_all
                                    or not meta.get("embed_backend")):
        backend, model, dim = ch.embedder
        dim = width or dim
        if dim:
            updates.update(embed_backend=backend, embed_model=model, embed_dimension=str(dim))
    updates["generation"] = str(int(meta.get("generation", "0")) + 1)
    updates["files"] = str(conn.execute(
        "SELECT count(*) FROM files WHERE status != 'skipped'").fetchone()[0])
    updates["chunks"] = str(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    return updates
