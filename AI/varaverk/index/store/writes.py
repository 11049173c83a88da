"""How one index run's ``IndexChanges`` become rows: chunks with their vectors and keywords,
file rows, and the meta entries every write updates (``generation``, counts, the embedder).
A run writes batch by batch (``Transaction``) inside one transaction that ``Index.writing``
opens and commits; ``Index.write`` writes one ``IndexChanges`` as a single batch."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from varaverk.index.store.compatibility import check_compatible
from varaverk.index.store.errors import IndexMismatch
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


class Transaction:
    """One index run's write inside the caller's open transaction, batch by batch: ``add``
    any number of times (each batch's chunks, vectors and file rows go to SQLite at once, so
    the caller holds no more than a batch), then ``finish`` once (deletions of files that
    left, the meta entries). Nothing is committed here: the caller commits or rolls back the
    whole run.

    Raises (from ``add`` and ``finish``) IndexMismatch when new vectors come from another
    embedder (or length) than the stored ones, or than an earlier batch's, and
    ``replace_all`` is false for the former; ValueError for an unusable vector
    (``vector_blobs``). Either leaves the transaction for the caller to roll back.
    """

    def __init__(self, conn: sqlite3.Connection, replace_all: bool = False):
        self.conn = conn
        self.meta = dict(conn.execute("SELECT key, value FROM meta"))
        self.width = 0              # the vectors' dimension, set by the first batch with rows
        self.wrote_chunks = False
        self.touched_chunks = replace_all  # whether the full-text index changed (merge it)
        if replace_all:
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM files")
            self.meta.pop("embed_backend", None)  # the new vectors define the model (below)

    def add(self, ch: IndexChanges) -> None:
        """Write one batch: drop the chunks of ``ch.replace_chunks_of``, insert
        ``ch.new_chunks`` and ``ch.file_rows`` (``ch.delete_paths`` and ``ch.meta`` wait for
        ``finish``)."""
        blobs, width = vector_blobs([vec for _, vec in ch.new_chunks])
        if blobs:
            # Never mix: new vectors must come from the model (and length) already stored,
            # and from the length of this run's earlier batches.
            backend, model, _ = ch.embedder or ("?", "?", None)
            check_compatible(self.meta, backend, model, width)
            if self.width and width != self.width:
                raise IndexMismatch(f"vectors of two lengths in one run ({self.width} and "
                                    f"{width} dims) — the embedder changed mid-run")
            self.width, self.wrote_chunks = width, True
        for path in ch.replace_chunks_of:
            self.conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        self.touched_chunks = self.touched_chunks or bool(blobs or ch.replace_chunks_of)
        self.conn.executemany(_INSERT_CHUNK, (
            (chunk.path, chunk.kind, chunk.section, chunk.title, chunk.start_line,
             chunk.end_line, chunk.part, chunk.text, chunk.context,
             json.dumps(chunk.meta, default=str, ensure_ascii=False), blob,
             chunk.source, chunk_keywords(chunk),
             chunk_label(chunk.path, chunk.section, chunk.title))
            for (chunk, _), blob in zip(ch.new_chunks, blobs)))
        self.conn.executemany(_INSERT_FILE, [
            (f.path, f.kind, f.size, f.mtime_ns, f.sha256, f.status, f.reason, f.chunk_count,
             f.encoding, f.source, f.ctime_ns, f.inode, f.device) for f in ch.file_rows])

    def finish(self, ch: IndexChanges) -> None:
        """Write the last batch (``add``), the deletions of ``ch.delete_paths`` and the meta
        entries (``ch.meta``, the embedder, the next ``generation``, the counts)."""
        self.add(ch)
        for path in ch.delete_paths:
            self.conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
            self.conn.execute("DELETE FROM files WHERE path = ?", (path,))
        self.touched_chunks = self.touched_chunks or bool(ch.delete_paths)
        if not self.conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
            # No vectors left: the index belongs to no model (the embedder's entries go).
            for key in ("embed_backend", "embed_model", "embed_dimension"):
                self.meta.pop(key, None)
                self.conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        updates = _meta_updates(self.conn, ch, self.meta, self.wrote_chunks, self.width)
        self.conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                              [(k, str(v)) for k, v in updates.items()])


def chunk_keywords(chunk: Chunk) -> str:
    """The lexical-only keywords of a chunk (the ``keywords`` column): its ``meta["keywords"]``
    (tags, aliases) joined by spaces; ``""`` when it has none."""
    words = chunk.meta.get("keywords") if isinstance(chunk.meta, dict) else None
    if not words:
        return ""
    return " ".join(str(w) for w in words if str(w).strip())


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
