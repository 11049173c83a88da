"""``Index``: an open index file (``varaverk.index.store.schema``), read and written under one
lock.

Readers get a contiguous float32 matrix (``vector_table``) for numpy scoring, cached until the
generation changes, the chunks by id or by file, and the full-text side (``fts_*``). The file
is in WAL mode: readers (the dock) keep reading the last committed index while an index run
writes; a run writes batch by batch inside one transaction and commits once at its end
(``writing``, ``write``), so a failed or interrupted run leaves the previous index whole.

Opening costs no numpy: the no-op refresh opens the index too and must stay cheap
(``tests/benchmarks/bench_refresh.py`` times that path against the floor of ``git ls-files``
plus a stat per file, and lists the heavy modules it imported).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence
from urllib.parse import quote

from varaverk.index.store import fts, labels
from varaverk.index.store import summaries as summary_rows
from varaverk.index.store.compatibility import check_compatible
from varaverk.index.store.contents import contents
from varaverk.index.store.errors import IndexCorrupt, IndexDamaged, IndexMissing
from varaverk.index.store.health import quick_check
from varaverk.index.store.records import FileState, IndexChanges
from varaverk.index.store.schema import SCHEMA_VERSION, migrate, pending_migrations
from varaverk.index.store.vectors import VectorTable, read_vector_table

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from varaverk.index.store.stored_chunk import StoredChunk
    from varaverk.index.store.summaries import Summary
    from varaverk.index.store.writes import Transaction


def _guarded(method):
    """Turn a ``sqlite3.DatabaseError`` of ``method`` that ``PRAGMA quick_check`` confirms as
    damage into ``IndexDamaged`` (exit 66, the fix named); any other error stays as it was."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            with self._lock:
                finding = quick_check(self._conn)
            if finding is None:
                raise
            raise IndexDamaged(_damaged_message(self.path, exc, finding)) from None
    return guarded


def _damaged_message(path: Path, exc: BaseException, finding: str) -> str:
    detail = str(exc) if finding == str(exc) else f"{exc}; quick_check: {finding}"
    return f"index {path} is damaged ({detail})"


class Index:
    """An open Varaverk index (one SQLite file).

    Thread-safe for the dock's threads: one connection guarded by a lock. Use ``Index.open``.
    Every read and write raises ``IndexDamaged`` when SQLite fails on a damaged file.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, readonly: bool):
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self._lock = threading.RLock()
        self._vectors: VectorTable | None = None
        self._vectors_generation: str | None = None
        self._vocab_ready = False

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, readonly: bool = False) -> "Index":
        """Open (or, unless ``readonly``, create) the index at ``path``.

        Creating makes the parent folder, switches the file to WAL and applies the migrations.

        Raises:
            IndexMissing: ``readonly`` and no index file exists, or one no run ever wrote.
            IndexDamaged: the file is damaged or no database (``PRAGMA quick_check``).
            IndexCorrupt: the file is not a SQLite index of ours, or is from a newer version.
        """
        path = Path(path)
        if readonly:
            if not path.is_file():
                raise IndexMissing(f"no index yet at {path} — run ai-index")
            uri = "file:" + quote(str(path.resolve()), safe="/") + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                                   timeout=30)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            if readonly:
                _check_readable(conn, path)
            else:
                _prepare_writable(conn)
        except sqlite3.DatabaseError as exc:
            finding = quick_check(conn)
            conn.close()
            if finding is not None:
                raise IndexDamaged(_damaged_message(path, exc, finding)) from None
            raise IndexCorrupt(f"{path} is not a usable index: {exc}") from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, path, readonly)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------------------

    @_guarded
    def meta(self) -> dict[str, str]:
        """All meta entries as strings (``embed_backend``, ``embed_model``, ``embed_dimension``,
        ``schema_version``, ``repo_root``, ``head``, ``built_at``, ``build_seconds``, ``files``,
        ``chunks``, ``generation``, ...); missing keys are simply absent."""
        with self._lock:
            return dict(self._conn.execute("SELECT key, value FROM meta"))

    @_guarded
    def generation(self) -> str:
        """The write counter; changes whenever an index run commits."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return row[0] if row else "0"

    def check_compatible(self, backend: str, model: str, dimension: int | None = None) -> None:
        """Raise IndexMismatch unless the stored vectors come from ``backend``/``model`` (and
        ``dimension``, when given); see ``compatibility.check_compatible``."""
        check_compatible(self.meta(), backend, model, dimension)

    @_guarded
    def file_states(self) -> dict[str, FileState]:
        """``path -> FileState`` for every stored file (one query; for change detection)."""
        with self._lock:
            return {row[0]: FileState(*row[1:]) for row in self._conn.execute(
                "SELECT path, size, mtime_ns, sha256, status, reason, kind, chunk_count, encoding,"
                " ctime_ns, inode, device FROM files")}

    @_guarded
    def vector_table(self) -> VectorTable:
        """All usable vectors as one contiguous float32 matrix (see ``VectorTable``).

        The BLOBs are read in batches into the matrix; rows whose BLOB is not ``dimension``
        float32 values, or whose vector is zero or non-finite, are excluded
        (``vectors.read_vector_table``); titles are read by id when asked for. Cached
        until the index's generation changes, so repeated searches in one process do not
        reload.
        """
        with self._lock:
            gen = self.generation()
            if self._vectors is not None and self._vectors_generation == gen:
                return self._vectors
            meta = self.meta()
            table = read_vector_table(self._conn, meta, self.titles)
            self._vectors, self._vectors_generation = table, gen
        return table

    @_guarded
    def titles(self, ids: Sequence[int] | None = None) -> dict[int, str]:
        """``{chunk id: title}`` of those ids that exist (of every chunk for None)."""
        with self._lock:
            if ids is None:
                return dict(self._conn.execute("SELECT id, title FROM chunks"))
            ids = [int(i) for i in ids]
            found: dict[int, str] = {}
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                found.update(self._conn.execute(
                    f"SELECT id, title FROM chunks WHERE id IN ({','.join('?' * len(part))})",
                    part))
            return found

    @_guarded
    def get_chunks(self, ids: Sequence[int]) -> list[StoredChunk]:
        """The stored chunks with these ids, in the order given (unknown ids are left out)."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        columns, from_row = _chunk_reader()
        found: dict[int, StoredChunk] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                marks = ",".join("?" * len(part))
                for row in self._conn.execute(
                        f"SELECT {columns} FROM chunks WHERE id IN ({marks})", part):
                    found[row[0]] = from_row(row)
        return [found[i] for i in ids if i in found]

    @_guarded
    def chunks_for_path(self, path: str) -> list[StoredChunk]:
        """Every stored chunk of one file, in document order."""
        columns, from_row = _chunk_reader()
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {columns} FROM chunks WHERE path = ? ORDER BY start_line, part, id",
                (path,)).fetchall()
        return [from_row(r) for r in rows]

    @_guarded
    def all_chunks(self) -> list[StoredChunk]:
        """Every stored chunk, file by file (path order), each file's in document order (as
        ``chunks_for_path`` gives them)."""
        columns, from_row = _chunk_reader()
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {columns} FROM chunks ORDER BY path, start_line, part, id").fetchall()
        return [from_row(r) for r in rows]

    @_guarded
    def stored_vectors(self, path: str) -> dict[str, bytes]:
        """``{embed_text: vector BLOB}`` of one file's stored chunks (``context\\ntext``, as
        ``Chunk.embed_text`` builds it), for reusing vectors of chunks that did not change."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT context, text, vec FROM chunks WHERE path = ?", (path,)).fetchall()
        return {f"{context}\n{text}": vec for context, text, vec in rows}

    # -- reading the full-text index ------------------------------------------------------------

    @_guarded
    def fts_search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Lexical search: ``[(chunk id, score)]``, best first, at most ``limit``.

        The score is BM25 negated (SQLite's bm25 is lower-is-better), so higher is better. The
        query is free text made safe by ``fts_query``; an empty or unmatched query gives [].
        """
        from varaverk.text import fts_query  # its patterns compile at import: searches only

        expr = fts_query(query)
        if not expr or limit <= 0:
            return []
        with self._lock:
            return fts.search(self._conn, expr, limit)

    @_guarded
    def fts_doc_lengths(self) -> tuple["np.ndarray", "np.ndarray"]:
        """Token count of every full-text row, all columns together (what FTS5's BM25 calls
        the document length): ``(chunk ids int64, lengths int64)`` in id order, read from
        FTS5's own ``chunks_fts_docsize`` table (one varint per column) in one row of
        concatenated values, decoded by numpy (a Python row each costs far more on a large
        index). Raises ValueError on a size it cannot decode."""
        with self._lock:
            return fts.doc_lengths(self._conn)

    @_guarded
    def fts_vocabulary(self) -> frozenset[str]:
        """Every token the full-text index holds (lower case, as its tokenizer made them), read
        once from an ``fts5vocab`` row table in the connection's temp schema (so a read-only
        index works too). One string per distinct token: a few MB at 100k chunks."""
        with self._lock:
            return fts.vocabulary(self._conn)

    @_guarded
    def fts_holds(self, tokens: Sequence[str] | None = None) -> set[str] | bool:
        """Those of ``tokens`` (lower case, as the tokenizer makes them) the full-text index
        holds: ``fts_vocabulary`` for a few tokens, without reading every one. Without
        ``tokens``: whether it holds any token at all."""
        with self._lock:
            if tokens is None:
                return fts.holds_any_token(self._conn)
            return fts.held_tokens(self._conn, list(tokens))

    @_guarded
    def fts_postings(self, token: str, positions: bool = False) -> tuple["np.ndarray", ...]:
        """Every occurrence of one indexed token, in chunk id order.

        ``token`` is a token as the index's tokenizer produced it (lower case). Read from an
        ``fts5vocab`` instance table over ``chunks_fts``, made in the connection's temp schema
        on first use (so a read-only index works too); FTS5 stays the lexical index of record.
        Each list comes back as one comma-joined string, parsed by numpy: far cheaper than a
        Python row per occurrence on a large index.

        Returns:
            ``(chunk ids,)`` int64, one per occurrence; with ``positions`` also the column
            number (0 context, 1 text) and the token offset within that column.
        """
        with self._lock:
            self._instance_table()
            return fts.postings(self._conn, token, positions)

    @_guarded
    def fts_all_postings(self) -> tuple[list[str], "np.ndarray", "np.ndarray"]:
        """Every indexed token's occurrences in one scan (``fts_postings`` for all tokens at once,
        without positions): far cheaper than a read per token when most will be asked for.

        Returns:
            ``(tokens, sizes, chunk_ids)``: the tokens in the index's order, int64 (t,) how many
            occurrences each has, and int64 (sum(sizes),) the chunk id of every occurrence,
            token by token (within a token in the order the scan yields them, chunk id order
            in practice: SQLite does not promise it inside a group, so callers must not
            rely on it; ``Bm25`` sorts where it is not).
        """
        with self._lock:
            self._instance_table()
            return fts.all_postings(self._conn)

    @_guarded
    def label_lengths(self) -> tuple["np.ndarray", "np.ndarray"]:
        """``(chunk ids int64, label token counts int64)`` in id order: each chunk's label
        length, as stored at write time (``varaverk.index.store.labels``)."""
        with self._lock:
            return labels.lengths(self._conn)

    @_guarded
    def label_postings(self, token: str) -> "np.ndarray":
        """int64: the chunk id of every occurrence of one label token (lower case, as
        ``varaverk.text.label_tokens`` makes them), in chunk id order."""
        with self._lock:
            return labels.postings(self._conn, token)

    def _instance_table(self) -> None:
        """Make the ``fts5vocab`` instance table once per connection; caller holds the lock."""
        if not self._vocab_ready:
            fts.create_instance_table(self._conn)
            self._vocab_ready = True

    # -- status -------------------------------------------------------------------------------

    @_guarded
    def status(self) -> dict[str, Any]:
        """What the index holds, for ``ai-index --status``.

        Keys: ``path``, ``size_bytes`` (the SQLite file plus its WAL), ``meta`` (all meta
        entries), ``files`` (count by status), ``files_by_kind`` and ``chunks_by_kind``
        (indexed kinds), ``chunks`` (total), ``skipped`` (``[{"path", "kind", "reason"}]``),
        ``partial`` (files with chunks that failed to embed, same shape), ``masked`` (indexed
        files whose secret-looking values were masked, same shape; the reason names the
        lines), ``tracked`` (rows in ``files``), ``sources`` (``{source name: {"files",
        "skipped", "chunks"}}``).
        """
        with self._lock:
            held = contents(self._conn)
        size = sum(os.path.getsize(p) for p in (self.path, Path(str(self.path) + "-wal"))
                   if os.path.exists(p))
        return {"path": str(self.path), "size_bytes": size, **held}

    # -- summaries (varaverk.index.store.summaries) -------------------------------------------

    @_guarded
    def summary(self, path: str) -> Summary | None:
        """The stored summary of ``path`` (current or stale), or None."""
        with self._lock:
            return summary_rows.read(self._conn, path)

    @_guarded
    def current_summaries(self, paths: Sequence[str]) -> dict[str, Summary]:
        """``path -> Summary`` of those ``paths`` whose summary matches the file's content."""
        with self._lock:
            return summary_rows.read_many(self._conn, list(paths))

    @_guarded
    def summary_todo(self, model: str) -> list[tuple[str, str]]:
        """``[(path, sha256)]`` of files lacking a current summary by ``model``, path order."""
        with self._lock:
            return summary_rows.todo(self._conn, model)

    @_guarded
    def summary_counts(self, model: str) -> dict[str, int]:
        """Files summarised, stale and missing for ``model`` (``summaries.counts``)."""
        with self._lock:
            return summary_rows.counts(self._conn, model)

    @_guarded
    def put_summary(self, summary: Summary) -> None:
        """Store one summary, committed on its own (PermissionError when read-only)."""
        if self.readonly:
            raise PermissionError("index opened read-only")
        with self._lock:
            summary_rows.put(self._conn, summary)

    @_guarded
    def drop_orphan_summaries(self) -> int:
        """Delete summaries of files the index no longer holds; returns how many."""
        if self.readonly:
            raise PermissionError("index opened read-only")
        with self._lock:
            return summary_rows.drop_orphans(self._conn)

    # -- writing ------------------------------------------------------------------------------

    @_guarded
    def write(self, changes: IndexChanges) -> None:
        """Apply one index run's changes in a single transaction (all or nothing): ``writing``
        with ``changes`` as its one and last batch.

        Vectors are L2-normalised on the way in. Raises IndexMismatch (and writes nothing) when
        new vectors' dimension differs from the stored one and ``changes.replace_all`` is
        false; ValueError for a zero or non-finite vector (``usable_rows``); PermissionError
        when the index was opened read-only.
        """
        with self.writing(changes.replace_all) as tx:
            tx.finish(changes)

    @contextlib.contextmanager
    def writing(self, replace_all: bool = False) -> Iterator[Transaction]:
        """One transaction written batch by batch: yields a ``writes.Transaction`` whose
        ``add`` writes a batch at once and whose ``finish`` writes the deletions and meta; the
        block's normal end merges the full-text index and commits, any exception rolls every
        batch back (the previous index stays whole; readers see it until the commit, WAL).

        ``replace_all`` drops every file and chunk first (``--force``). The index's lock is
        held for the whole block (one writer thread: an index run). Raises as ``write`` does,
        IndexDamaged for a ``DatabaseError`` that ``PRAGMA quick_check`` confirms as damage,
        and PermissionError when the index was opened read-only.
        """
        if self.readonly:
            raise PermissionError("index opened read-only")
        from varaverk.index.store.writes import Transaction  # json: the no-op never writes

        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                tx = Transaction(conn, replace_all)
                yield tx
                if tx.touched_chunks:
                    fts.merge(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:  # SQLite may have rolled back already (damage, I/O)
                    conn.execute("ROLLBACK")
                finding = quick_check(conn) if isinstance(exc, sqlite3.DatabaseError) else None
                if finding is not None:  # as ``_guarded`` says it: exit 66, the fix named
                    raise IndexDamaged(_damaged_message(self.path, exc, finding)) from None
                raise
            finally:
                self._vectors = None


def _chunk_reader() -> tuple[str, Callable[[Any], StoredChunk]]:
    """``(CHUNK_COLUMNS, chunk_from_row)`` of ``varaverk.index.store.stored_chunk``, imported on
    the first chunk read: it builds the chunk classes, which the no-op refresh never needs."""
    from varaverk.index.store.stored_chunk import CHUNK_COLUMNS, chunk_from_row
    return CHUNK_COLUMNS, chunk_from_row


def _check_readable(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that holds no index, or one of another schema version (read-only: it
    cannot be migrated here)."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone()
    if not has:
        raise IndexMissing(f"no index yet at {path} (it holds no Varaverk index) — run ai-index")
    newest = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
    if (newest or 0) != SCHEMA_VERSION:
        raise IndexCorrupt(f"index schema version {newest} at {path}; this Varaverk "
                           f"reads version {SCHEMA_VERSION} — run ai-index")
    # Every write sets the generation: without one, no run ever finished (an earlier
    # version's failed first build left such a file).
    if not conn.execute("SELECT 1 FROM meta WHERE key = 'generation'").fetchone():
        raise IndexMissing(f"no index yet at {path} (no run has finished) — run ai-index")


def _prepare_writable(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL and apply any pending migration in one transaction."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    if pending_migrations(conn):
        conn.execute("BEGIN IMMEDIATE")
        try:
            migrate(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
