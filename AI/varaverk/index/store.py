"""The SQLite index: tracked files, chunks, embeddings and a full-text index, in one file.

Layout (schema version ``SCHEMA_VERSION``, applied by the numbered migrations below and recorded
in ``schema_migrations``):

* ``meta(key, value)``: embedding backend, model and dimension (the vectors' provenance),
  the backend/model the settings named (``names_other_embedder``), repository root, HEAD
  commit at the last build (a SHA even on a detached HEAD), build time and duration, file and
  chunk counts, the globs' verdicts on script candidates (``varaverk.index.indexer``), and a
  ``generation`` counter bumped by every write so readers know when to reload.
* ``files(path, kind, size, mtime_ns, sha256, status, reason, chunk_count, encoding)``: every
  tracked path, indexed or skipped with its reason, so ``--status`` accounts for all of them and
  an unchanged ``size``/``mtime_ns`` lets the indexer skip a file without reading it.
* ``chunks(id, path, kind, section, title, start_line, end_line, part, text, context, meta, vec)``:
  ``vec`` is the embedding as a little-endian float32 BLOB, L2-normalised by us, so cosine
  similarity is a dot product. Zero, non-finite or wrong-length vectors are never written
  and never read (``usable_rows``, the one rule for both).
* ``chunks_fts``: FTS5 over ``context`` and ``text`` (external content, kept in step by
  triggers). The tokenizer keeps ``_`` inside words, so ``MOVER_STOP_TIMEOUT`` is one token;
  ``-`` separates, and a quoted query word becomes a phrase, so ``--force-delete`` still matches
  exactly those words in that order. A write that changed chunks merges a small full-text
  index into one segment (``MAX_MERGED_FTS_PAGES``): FTS5 looks a token up in every segment,
  so a query pays per segment for each word it is the first to use.

Readers get a contiguous float32 matrix (``vector_table``) for numpy scoring, cached until the
generation changes. The file is in WAL mode: readers (the dock) keep reading the last committed
index while an index run writes; a run commits once at its end, so a failed or interrupted run
leaves the previous index whole.

numpy is imported only where vectors are handled, because the no-op refresh path opens the
index too and must stay cheap (``tests/benchmarks/bench_refresh.py`` times that path against
the floor of ``git ls-files`` plus a stat per file, and lists the heavy modules it imported).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence

from varaverk import exitcodes
from varaverk.errors import VaraverkError
from varaverk.text import fts_query

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from varaverk.documents.chunks import Chunk

SCHEMA_VERSION = 2
FTS_TOKENIZE = "unicode61 remove_diacritics 2 tokenchars '_'"
# A write merges the full-text index into one segment while it holds at most this many pages
# (about 4 KB each; some 12k short chunks): merging rewrites the whole index, so a larger one
# keeps FTS5's own incremental merging and a write costs what the changed chunks cost.
MAX_MERGED_FTS_PAGES = 1024


class IndexStoreError(VaraverkError):
    """Base of the index errors (not the builtin ``IndexError``)."""

    kind = "index"


class IndexMissing(IndexStoreError):
    """No index exists at the path yet: run ``ai-index``."""

    exit_code = exitcodes.NO_INDEX
    kind = "no_index"
    fix = "run ai-index"


class IndexMismatch(IndexStoreError):
    """The index was built with another embedding backend, model or dimension than the
    settings name (or than the vectors being written), so its similarities would mean nothing."""

    exit_code = exitcodes.MISMATCH
    kind = "mismatch"
    fix = "run ai-index --force to rebuild"


class IndexCorrupt(IndexStoreError):
    """The file is not a Varaverk index, or was written by a newer version."""

    exit_code = exitcodes.NO_INDEX
    kind = "corrupt"
    fix = "move the file away and run ai-index to build a new one"


def _stored_chunk_class() -> type:
    """``StoredChunk``, made on first use: it extends ``varaverk.documents.chunks.Chunk``, and the
    no-op refresh opens the index without ever reading a chunk (so it never imports the
    chunkers)."""
    cls = globals().get("StoredChunk")
    if cls is None:
        from varaverk.documents.chunks import Chunk

        @dataclass(frozen=True)
        class StoredChunk(Chunk):
            """A chunk as stored: every ``Chunk`` field plus its row ``id`` in the index."""

            id: int = field(default=-1, kw_only=True)

        StoredChunk.__qualname__ = "StoredChunk"  # pickles as varaverk.index.store.StoredChunk
        cls = globals()["StoredChunk"] = StoredChunk
    return cls


def __getattr__(name: str) -> Any:
    # PEP 562: ``from varaverk.index.store import StoredChunk`` builds the class (above).
    if name == "StoredChunk":
        return _stored_chunk_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class VectorTable(NamedTuple):
    """All usable embeddings of the index, ready for numpy scoring.

    Attributes:
        ids: chunk ids, int64 ``(n,)``.
        matrix: float32 ``(n, dim)``, C-contiguous, rows L2-normalised (cosine = dot product).
        kinds: the chunk kinds, ``(n,)`` str array aligned with ``ids``.
        sections: the chunk sections, ``(n,)`` str array aligned with ``ids``.
        dimension: ``dim``; backend and model: the embedder that made the vectors.
        excluded: ids of stored rows left out (zero, non-finite or wrong-length vectors).
        titles: the chunk titles, ``(n,)`` str array aligned with ``ids`` (search ranks on
            them before reading any chunk text).
        sources: the chunks' source names, ``(n,)`` str array aligned with ``ids``.
        paths: the chunks' file paths, ``(n,)`` str array aligned with ``ids`` (per-file score
            aggregation).
    """

    ids: "np.ndarray"
    matrix: "np.ndarray"
    kinds: "np.ndarray"
    sections: "np.ndarray"
    dimension: int
    backend: str
    model: str
    excluded: tuple[int, ...] = ()
    titles: "np.ndarray | None" = None
    sources: "np.ndarray | None" = None
    paths: "np.ndarray | None" = None


def describe_embedder(backend: str, model: str, dimension: int | str | None) -> str:
    """``backend/model (N dims)`` as messages show it."""
    dims = f" ({dimension} dims)" if dimension not in (None, "", 0, "0") else ""
    return f"{backend}/{model}{dims}"


def _mismatch_message(stored: dict, backend: str, model: str, dimension: int | None) -> str:
    """The refusal of another embedder: what the index was built with, what this run uses, and what to do."""
    built = describe_embedder(stored.get("embed_backend", "?"), stored.get("embed_model", "?"),
                              stored.get("embed_dimension"))
    now = describe_embedder(backend, model, dimension)
    return (f"index built with {built}; this run uses {now} "
            f"— run ai-index --force to rebuild")


# Vector validity, the one home: a vector may be stored and ranked when every value is finite
# and its L2 norm is finite and above MIN_NORM (a float32 vector that cannot be told from zero
# would rank as noise). Decided by ``usable_rows`` on write (``Index.write``, which refuses the
# rest; the indexer and the embedders ask ``vector_problem`` first, so that one bad vector fails
# its own chunk) and on read (``vector_table`` leaves the rest out).
MIN_NORM = 1e-6


def usable_rows(matrix: "np.ndarray") -> "np.ndarray":
    """Boolean ``(n,)``: the rows of a float ``(n, dim)`` matrix that may be stored and ranked.

    One squared norm per row: a NaN or infinite value (or a norm that overflows) makes it
    non-finite, so no ``(n, dim)`` temporary is made.
    """
    import numpy as np

    matrix = np.asarray(matrix)
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        squares = np.einsum("ij,ij->i", matrix, matrix)
        return np.isfinite(squares) & (squares > MIN_NORM * MIN_NORM)


def vector_problem(vec: Any, dimension: int | None = None) -> str:
    """Why one vector may not be stored or ranked (``usable_rows``), or ``""`` when it may.

    ``vec``: a sequence of numbers, as an embedder returned it (not yet normalised);
    ``dimension``: the length it must have, when known. The reason reads after "returned":
    ``a vector that is not a list of numbers``, ``a vector of shape (2, 3)``, ``a vector
    with NaN or infinite values``, ``an all-zero vector``, ``a vector too close to zero to
    normalise``, ``5 dimensions, expected 4``.
    """
    import numpy as np

    try:
        vec = np.asarray(vec, dtype=np.float64)
    except (TypeError, ValueError):
        return "a vector that is not a list of numbers"
    if vec.ndim != 1 or vec.size == 0:
        return f"a vector of shape {vec.shape}"
    if not usable_rows(vec[None, :])[0]:
        if not np.isfinite(vec).all():
            return "a vector with NaN or infinite values"
        return "a vector too close to zero to normalise" if vec.any() else "an all-zero vector"
    if dimension is not None and vec.size != dimension:
        return f"{vec.size} dimensions, expected {dimension}"
    return ""


def _vector_blobs(vectors: list) -> tuple[list[bytes], int]:
    """``(little-endian float32 BLOBs, dimension)`` of ``vectors``, each L2-normalised (the
    write side of vector validity; vectors already of unit length are stored as given).

    Raises IndexMismatch for vectors of two lengths, ValueError for an unusable vector (the
    caller must leave those out: nothing is written).
    """
    import numpy as np

    if not vectors:
        return [], 0
    rows = [np.asanyarray(v).astype("<f4", copy=False).reshape(-1) for v in vectors]
    dim = rows[0].size
    for row in rows:
        if row.size != dim:
            raise IndexMismatch(f"vectors of two lengths in one run ({dim} and {row.size} "
                                f"dims) — the embedder changed mid-run")
    matrix = np.stack(rows)
    bad = np.flatnonzero(~usable_rows(matrix))
    if bad.size:
        raise ValueError(f"{bad.size} zero or non-finite vectors (the first is number "
                         f"{bad[0] + 1}) are never stored; nothing was written")
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    off = np.abs(norms - 1.0) > 1e-4
    if off.any():
        matrix[off] /= norms[off, None]
    return [row.tobytes() for row in matrix], dim


# Embedder compatibility, the one home: whether vectors made by an embedder may be compared
# with, or stored beside, the vectors of an index. Search asks before ranking, a refresh before
# embedding and for each vector's length, and ``Index.write`` before storing.

def check_compatible(meta: dict, backend: str, model: str, dimension: int | None = None) -> None:
    """Raise IndexMismatch unless the vectors of the index whose ``meta`` this is come from
    ``backend``/``model`` (and ``dimension``, when given and recorded). An index without
    vectors is compatible with anything.

    The message (``_mismatch_message``) names both embedders and the fix.
    """
    if not meta.get("embed_backend"):
        return
    same = meta.get("embed_backend") == backend and meta.get("embed_model") == model
    if same and dimension is not None and meta.get("embed_dimension"):
        same = int(meta["embed_dimension"]) == int(dimension)
    if not same:
        raise IndexMismatch(_mismatch_message(meta, backend, model, dimension))


def names_other_embedder(meta: dict, backend: str, model: str) -> bool:
    """Whether settings naming ``backend``/``model`` (``AI_EMBED_BACKEND``/``AI_EMBED_MODEL``
    as written: an empty model is the backend's default) differ from those recorded by the run
    that last wrote this index, while it holds vectors.

    The cheap form of ``check_compatible``, decided without building an embedder (so the no-op
    refresh and ``--status`` build none); True means the real check must run before any work.
    The recorded names are written by ``Index.write`` from ``IndexChanges.configured``.
    """
    return bool(meta.get("embed_backend")) and \
        (meta.get("config_backend"), meta.get("config_model")) != (backend, model)


# ---------------------------------------------------------------------------------------------
# Migrations: numbered, applied in order, each recorded once with its time.
# ---------------------------------------------------------------------------------------------

# What FTS5 indexes as a chunk's context column: the context, then its keywords (if any).
_FTS_CONTEXT = ("CASE WHEN {row}.keywords = '' THEN {row}.context "
                "ELSE {row}.context || char(10) || {row}.keywords END")

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial", f"""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE files (
            path TEXT PRIMARY KEY,
            kind TEXT NOT NULL DEFAULT '',
            size INTEGER NOT NULL DEFAULT -1,
            mtime_ns INTEGER NOT NULL DEFAULT -1,
            sha256 TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL CHECK (status IN ('indexed', 'skipped', 'partial')),
            reason TEXT NOT NULL DEFAULT '',
            chunk_count INTEGER NOT NULL DEFAULT 0,
            encoding TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL,
            kind TEXT NOT NULL,
            section TEXT NOT NULL,
            title TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            part INTEGER NOT NULL DEFAULT 0,
            text TEXT NOT NULL,
            context TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{{}}',
            vec BLOB NOT NULL
        );
        CREATE INDEX chunks_path ON chunks(path);
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            context, text, content='chunks', content_rowid='id', tokenize="{FTS_TOKENIZE}"
        );
        CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, context, text) VALUES (new.id, new.context, new.text);
        END;
        CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, context, text)
            VALUES ('delete', old.id, old.context, old.text);
        END;
        CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, context, text)
            VALUES ('delete', old.id, old.context, old.text);
            INSERT INTO chunks_fts(rowid, context, text) VALUES (new.id, new.context, new.text);
        END;
    """),
    # Sources (AI_SOURCES): every file and chunk names its source; chunks gain lexical-only
    # keywords (note tags and aliases), indexed by FTS5 with the context but never embedded.
    # FTS5 reads its content through a view so that the stored context stays what was embedded.
    (2, "sources and keywords", f"""
        ALTER TABLE files ADD COLUMN source TEXT NOT NULL DEFAULT 'repo';
        ALTER TABLE chunks ADD COLUMN source TEXT NOT NULL DEFAULT 'repo';
        ALTER TABLE chunks ADD COLUMN keywords TEXT NOT NULL DEFAULT '';
        CREATE INDEX chunks_source ON chunks(source);
        DROP TRIGGER chunks_ai;
        DROP TRIGGER chunks_ad;
        DROP TRIGGER chunks_au;
        DROP TABLE chunks_fts;
        CREATE VIEW chunks_fts_content AS SELECT id, {_FTS_CONTEXT.format(row="chunks")} AS context,
            text FROM chunks;
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            context, text, content='chunks_fts_content', content_rowid='id',
            tokenize="{FTS_TOKENIZE}"
        );
        INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
        CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, context, text)
            VALUES (new.id, {_FTS_CONTEXT.format(row="new")}, new.text);
        END;
        CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, context, text)
            VALUES ('delete', old.id, {_FTS_CONTEXT.format(row="old")}, old.text);
        END;
        CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, context, text)
            VALUES ('delete', old.id, {_FTS_CONTEXT.format(row="old")}, old.text);
            INSERT INTO chunks_fts(rowid, context, text)
            VALUES (new.id, {_FTS_CONTEXT.format(row="new")}, new.text);
        END;
    """),
]
assert MIGRATIONS[-1][0] == SCHEMA_VERSION


def _now() -> str:
    import datetime as _dt  # lazily, like json below: the no-op refresh opens the index too
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _pending_migrations(conn: sqlite3.Connection) -> bool:
    """True when the file lacks a migration (a read, so opening an up-to-date index never
    waits for another run's write transaction)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone():
        return True
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    return any(version not in applied for version, _, _ in MIGRATIONS) or \
        max(applied, default=0) > SCHEMA_VERSION


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                 "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    newest = max(applied, default=0)
    if newest > SCHEMA_VERSION:
        raise IndexCorrupt(f"index schema version {newest} is newer than this Varaverk "
                           f"understands ({SCHEMA_VERSION}); upgrade, or rebuild with --force")
    for version, name, sql in MIGRATIONS:
        if version in applied:
            continue
        # executescript commits first; run the statements one by one inside our transaction.
        for statement in _split_sql(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, _now()))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(version),))


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (``sqlite3.complete_statement`` aware)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


# ---------------------------------------------------------------------------------------------
# The index
# ---------------------------------------------------------------------------------------------

class Index:
    """An open Varaverk index (one SQLite file).

    Thread-safe for the dock's threads: one connection guarded by a lock. Use ``Index.open``.
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
            IndexMissing: ``readonly`` and no index file exists.
            IndexCorrupt: the file is not a SQLite index of ours, or is from a newer version.
        """
        path = Path(path)
        if readonly:
            if not path.is_file():
                raise IndexMissing(f"no index at {path} — run ai-index first")
            uri = "file:" + _uri_path(path) + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                                   timeout=30)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            if readonly:
                has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'"
                                   ).fetchone()
                if not has:
                    raise IndexMissing(f"{path} holds no Varaverk index — run ai-index first")
                newest = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
                if (newest or 0) != SCHEMA_VERSION:
                    raise IndexCorrupt(f"index schema version {newest} at {path}; this Varaverk "
                                       f"reads version {SCHEMA_VERSION} — run ai-index")
            else:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                if _pending_migrations(conn):
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        _migrate(conn)
                        conn.execute("COMMIT")
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
        except sqlite3.DatabaseError as exc:
            conn.close()
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

    def meta(self) -> dict[str, str]:
        """All meta entries as strings (``embed_backend``, ``embed_model``, ``embed_dimension``,
        ``schema_version``, ``repo_root``, ``head``, ``built_at``, ``build_seconds``, ``files``,
        ``chunks``, ``generation``, ...); missing keys are simply absent."""
        with self._lock:
            return dict(self._conn.execute("SELECT key, value FROM meta"))

    def generation(self) -> str:
        """The write counter; changes whenever an index run commits."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return row[0] if row else "0"

    def check_compatible(self, backend: str, model: str, dimension: int | None = None) -> None:
        """Raise IndexMismatch unless the stored vectors come from ``backend``/``model`` (and
        ``dimension``, when given); see the module function ``check_compatible``."""
        check_compatible(self.meta(), backend, model, dimension)

    def file_states(self) -> dict[str, "FileState"]:
        """``path -> FileState`` for every stored file (one query; for change detection)."""
        with self._lock:
            return {row[0]: FileState(*row[1:]) for row in self._conn.execute(
                "SELECT path, size, mtime_ns, sha256, status, reason, kind, chunk_count, encoding"
                " FROM files")}

    def vector_table(self) -> VectorTable:
        """All usable vectors as one contiguous float32 matrix (see ``VectorTable``).

        One query fetches every BLOB; rows whose BLOB is not ``dimension`` float32 values, or
        whose vector is zero or non-finite, are excluded — they can never rank and
        no dot product ever runs between vectors of different lengths. Cached until the index's
        generation changes, so repeated searches in one process do not reload.
        """
        import numpy as np

        with self._lock:
            gen = self.generation()
            if self._vectors is not None and self._vectors_generation == gen:
                return self._vectors
            meta = self.meta()
            dim = int(meta.get("embed_dimension") or 0)
            rows = self._conn.execute(
                "SELECT id, kind, section, vec, title, source, path FROM chunks ORDER BY id"
            ).fetchall()
        width = dim * 4
        good = [r for r in rows if dim and len(r[3]) == width]
        excluded = [r[0] for r in rows if not (dim and len(r[3]) == width)]
        if good:
            matrix = np.frombuffer(b"".join(r[3] for r in good), dtype="<f4").reshape(len(good), dim)
            matrix = matrix.astype(np.float32, copy=False)
            ok = usable_rows(matrix)
            if not ok.all():
                excluded += [good[i][0] for i in np.flatnonzero(~ok)]
                good = [r for r, keep in zip(good, ok) if keep]
                matrix = matrix[ok]
            matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        else:
            matrix = np.zeros((0, dim), dtype=np.float32)
        table = VectorTable(
            ids=np.fromiter((r[0] for r in good), dtype=np.int64, count=len(good)),
            matrix=matrix,
            kinds=np.array([r[1] for r in good], dtype=str),
            sections=np.array([r[2] for r in good], dtype=str),
            dimension=dim,
            backend=meta.get("embed_backend", ""),
            model=meta.get("embed_model", ""),
            excluded=tuple(sorted(excluded)),
            titles=np.array([r[4] for r in good], dtype=str),
            sources=np.array([r[5] for r in good], dtype=str),
            paths=np.array([r[6] for r in good], dtype=str),
        )
        with self._lock:
            self._vectors, self._vectors_generation = table, gen
        return table

    def get_chunks(self, ids: Sequence[int]) -> list[StoredChunk]:
        """The stored chunks with these ids, in the order given (unknown ids are left out)."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        found: dict[int, StoredChunk] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                marks = ",".join("?" * len(part))
                for row in self._conn.execute(
                        f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE id IN ({marks})", part):
                    found[row[0]] = _stored(row)
        return [found[i] for i in ids if i in found]

    def chunks_for_path(self, path: str) -> list[StoredChunk]:
        """Every stored chunk of one file, in document order."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE path = ? ORDER BY start_line, part, id",
                (path,)).fetchall()
        return [_stored(r) for r in rows]

    def all_chunks(self) -> list[StoredChunk]:
        """Every stored chunk, file by file (path order), each file's in document order (as
        ``chunks_for_path`` gives them)."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY path, start_line, part, id"
            ).fetchall()
        return [_stored(r) for r in rows]

    def stored_vectors(self, path: str) -> dict[str, bytes]:
        """``{embed_text: vector BLOB}`` of one file's stored chunks (``context\ntext``, as
        ``Chunk.embed_text`` builds it), for reusing vectors of chunks that did not change."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT context, text, vec FROM chunks WHERE path = ?", (path,)).fetchall()
        return {f"{context}\n{text}": vec for context, text, vec in rows}

    def fts_search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Lexical search: ``[(chunk id, score)]``, best first, at most ``limit``.

        The score is BM25 negated (SQLite's bm25 is lower-is-better), so higher is better. The
        query is free text made safe by ``fts_query``; an empty or unmatched query gives [].
        """
        expr = fts_query(query)
        if not expr or limit <= 0:
            return []
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT rowid, bm25(chunks_fts, 1.0, 1.0) AS rank FROM chunks_fts "
                    "WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?", (expr, int(limit))).fetchall()
            except sqlite3.OperationalError:
                return []
        return [(int(r[0]), -float(r[1])) for r in rows]

    def fts_doc_lengths(self) -> tuple["np.ndarray", "np.ndarray"]:
        """Token count of every full-text row, all columns together (what FTS5's BM25 calls
        the document length): ``(chunk ids int64, lengths int64)`` in id order, read from
        FTS5's own ``chunks_fts_docsize`` table (one varint per column) in one row of
        concatenated values, decoded by numpy (a Python row each costs far more on a large
        index). Raises ValueError on a size it cannot decode."""
        import numpy as np

        with self._lock:
            ids, sizes, blobs = self._conn.execute(
                "SELECT group_concat(id), group_concat(length(sz)), group_concat(hex(sz), '') "
                "FROM (SELECT id, sz FROM chunks_fts_docsize ORDER BY id)").fetchone()
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        lengths = _varint_row_sums(bytes.fromhex(blobs),
                                   np.fromstring(sizes, dtype=np.int64, sep=","))
        return np.fromstring(ids, dtype=np.int64, sep=","), lengths

    def fts_vocabulary(self) -> frozenset[str]:
        """Every token the full-text index holds (lower case, as its tokenizer made them), read
        once from an ``fts5vocab`` row table in the connection's temp schema (so a read-only
        index works too). One string per distinct token: a few MB at 100k chunks."""
        with self._lock:
            self._conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_row "
                               "USING fts5vocab(main, chunks_fts, row)")
            return frozenset(r[0] for r in self._conn.execute(
                "SELECT term FROM temp.chunks_fts_row"))

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
        import numpy as np

        cols = ["group_concat(doc)"]
        if positions:
            cols += ["group_concat(CASE col WHEN 'context' THEN 0 ELSE 1 END)",
                     "group_concat(offset)"]
        with self._lock:
            self._instance_table()
            row = self._conn.execute(f"SELECT {', '.join(cols)} FROM temp.chunks_fts_instance "
                                     "WHERE term = ?", (token,)).fetchone()
        return tuple(np.fromstring(v, dtype=np.int64, sep=",") if v else
                     np.zeros(0, dtype=np.int64) for v in row)

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
        import numpy as np

        with self._lock:
            self._instance_table()
            rows = self._conn.execute("SELECT term, count(*), group_concat(doc) FROM "
                                      "temp.chunks_fts_instance GROUP BY term").fetchall()
        sizes = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        ids = (np.fromstring(",".join([r[2] for r in rows]), dtype=np.int64, sep=",") if rows
               else np.zeros(0, dtype=np.int64))
        return [r[0] for r in rows], sizes, ids

    def _instance_table(self) -> None:
        """Make the ``fts5vocab`` instance table over ``chunks_fts`` in the connection's temp
        schema (so a read-only index works too); caller holds ``self._lock``."""
        if not self._vocab_ready:
            self._conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_instance "
                               "USING fts5vocab(main, chunks_fts, instance)")
            self._vocab_ready = True

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
            conn = self._conn
            files = dict(conn.execute("SELECT status, count(*) FROM files GROUP BY status"))
            files_by_kind = dict(conn.execute(
                "SELECT kind, count(*) FROM files WHERE status != 'skipped' GROUP BY kind"))
            chunks_by_kind = dict(conn.execute("SELECT kind, count(*) FROM chunks GROUP BY kind"))
            skipped = [{"path": p, "kind": k, "reason": r} for p, k, r in conn.execute(
                "SELECT path, kind, reason FROM files WHERE status = 'skipped' ORDER BY path")]
            partial = [{"path": p, "kind": k, "reason": r} for p, k, r in conn.execute(
                "SELECT path, kind, reason FROM files WHERE status = 'partial' ORDER BY path")]
            masked = [{"path": p, "kind": k, "reason": r} for p, k, r in conn.execute(
                "SELECT path, kind, reason FROM files WHERE status = 'indexed' AND reason != ''"
                " ORDER BY path")]
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            by_source: dict[str, dict[str, int]] = {}
            for src, status, n in conn.execute(
                    "SELECT source, status, count(*) FROM files GROUP BY source, status"):
                entry = by_source.setdefault(src, {"files": 0, "skipped": 0, "chunks": 0})
                entry["skipped" if status == "skipped" else "files"] += n
            for src, n in conn.execute("SELECT source, count(*) FROM chunks GROUP BY source"):
                by_source.setdefault(src, {"files": 0, "skipped": 0, "chunks": 0})["chunks"] = n
        size = sum(os.path.getsize(p) for p in (self.path, Path(str(self.path) + "-wal"))
                   if os.path.exists(p))
        return {
            "path": str(self.path), "size_bytes": size, "meta": meta, "files": files,
            "tracked": sum(files.values()), "files_by_kind": files_by_kind,
            "chunks_by_kind": chunks_by_kind, "chunks": sum(chunks_by_kind.values()),
            "skipped": skipped, "partial": partial, "masked": masked, "sources": by_source,
        }

    # -- writing ------------------------------------------------------------------------------

    def write(self, changes: "IndexChanges") -> None:
        """Apply one index run's changes in a single transaction (all or nothing).

        Vectors are L2-normalised on the way in. Raises IndexMismatch (and writes nothing) when
        new vectors' dimension differs from the stored one and ``changes.replace_all`` is
        false; ValueError for a zero or non-finite vector (``usable_rows``); PermissionError
        when the index was opened read-only.
        """
        if self.readonly:
            raise PermissionError("index opened read-only")
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._apply(conn, changes)
                if (changes.new_chunks or changes.delete_paths or changes.replace_chunks_of
                        or changes.replace_all):
                    _merge_fts(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._vectors = None

    def _apply(self, conn: sqlite3.Connection, ch: "IndexChanges") -> None:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        if ch.replace_all:
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM files")
            meta.pop("embed_backend", None)  # the new vectors define the model (below)
        import json

        blobs, width = _vector_blobs([vec for _, vec in ch.new_chunks])
        rows = [(chunk.path, chunk.kind, chunk.section, chunk.title, chunk.start_line,
                 chunk.end_line, chunk.part, chunk.text, chunk.context,
                 json.dumps(chunk.meta, default=str, ensure_ascii=False), blob,
                 chunk.source, chunk_keywords(chunk))
                for (chunk, _), blob in zip(ch.new_chunks, blobs)]
        if rows:
            # Never mix: new vectors must come from the model (and length) already stored.
            backend, model, _ = ch.embedder or ("?", "?", None)
            check_compatible(meta, backend, model, width)
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
        conn.executemany(
            "INSERT INTO chunks (path, kind, section, title, start_line, end_line, part, text,"
            " context, meta, vec, source, keywords) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.executemany(
            "INSERT OR REPLACE INTO files (path, kind, size, mtime_ns, sha256, status, reason,"
            " chunk_count, encoding, source) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(f.path, f.kind, f.size, f.mtime_ns, f.sha256, f.status, f.reason, f.chunk_count,
              f.encoding, f.source) for f in ch.file_rows])
        updates = dict(ch.meta)
        if ch.configured is not None:
            updates.update(config_backend=ch.configured[0], config_model=ch.configured[1])
        if ch.embedder is not None and (rows or ch.replace_all or not meta.get("embed_backend")):
            backend, model, dim = ch.embedder
            dim = width or dim
            if dim:
                updates.update(embed_backend=backend, embed_model=model, embed_dimension=str(dim))
        updates["generation"] = str(int(meta.get("generation", "0")) + 1)
        updates["files"] = str(conn.execute(
            "SELECT count(*) FROM files WHERE status != 'skipped'").fetchone()[0])
        updates["chunks"] = str(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         [(k, str(v)) for k, v in updates.items()])


def _merge_fts(conn: sqlite3.Connection) -> None:
    """Merge ``chunks_fts`` into one segment (FTS5's ``optimize``) when it holds more than one
    and at most ``MAX_MERGED_FTS_PAGES`` pages. Each segment costs a look-up for every token a
    query reads (``fts_postings``, ``fts_search``); the postings and scores stay the same."""
    segments, pages = conn.execute(
        "SELECT count(DISTINCT segid), (SELECT count(*) FROM chunks_fts_data) "
        "FROM chunks_fts_idx").fetchone()
    if segments > 1 and pages <= MAX_MERGED_FTS_PAGES:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")


class FileState(NamedTuple):
    """A stored file row as change detection reads it (see ``FileRow``)."""

    size: int
    mtime_ns: int
    sha256: str
    status: str
    reason: str
    kind: str
    chunk_count: int
    encoding: str


class FileRow(NamedTuple):
    """One ``files`` row: a tracked path's state after a run (see the module doc)."""

    path: str
    kind: str
    size: int
    mtime_ns: int
    sha256: str
    status: str
    reason: str = ""
    chunk_count: int = 0
    encoding: str = ""
    source: str = "repo"


@dataclass
class IndexChanges:
    """Everything one index run writes, applied by ``Index.write`` in one transaction.

    Attributes:
        replace_all: drop every file and chunk first (``--force``).
        delete_paths: paths whose file row and chunks go (deleted or renamed away).
        replace_chunks_of: paths whose chunks are dropped before ``new_chunks`` are added.
        new_chunks: ``(chunk, vector)`` pairs; vectors float32 ``(dim,)`` L2-normalised.
        file_rows: file rows to insert or replace.
        embedder: ``(backend, model, dimension)`` that made ``new_chunks``; None when nothing
            was embedded by this run.
        configured: ``(AI_EMBED_BACKEND, AI_EMBED_MODEL)`` as the settings of this run name
            them, recorded for ``names_other_embedder``; None keeps the recorded ones.
        meta: other meta entries to set (head, built_at, build_seconds, repo_root, ...).
    """

    replace_all: bool = False
    delete_paths: list[str] = field(default_factory=list)
    replace_chunks_of: list[str] = field(default_factory=list)
    new_chunks: list[tuple[Chunk, Any]] = field(default_factory=list)
    file_rows: list[FileRow] = field(default_factory=list)
    embedder: tuple[str, str, int | None] | None = None
    configured: tuple[str, str] | None = None
    meta: dict[str, str] = field(default_factory=dict)


# The columns ``_stored`` turns into a StoredChunk, in its order.
_CHUNK_COLUMNS = ("id, path, kind, section, title, start_line, end_line, part, text, context,"
                  " meta, source")


def chunk_keywords(chunk: Chunk) -> str:
    """The lexical-only keywords of a chunk: its ``meta["keywords"]`` (tags, aliases) joined by
    spaces; ``""`` when it has none."""
    words = chunk.meta.get("keywords") if isinstance(chunk.meta, dict) else None
    if not words:
        return ""
    return " ".join(str(w) for w in words if str(w).strip())


def _stored(row: Iterable[Any]) -> "StoredChunk":
    import json
    (cid, path, kind, section, title, start, end, part, text, context, meta, source) = row
    try:
        meta_dict = json.loads(meta) if meta and meta != "{}" else {}
    except ValueError:
        meta_dict = {}
    # Every field set in field order, without the frozen dataclass's __init__ (one
    # object.__setattr__ per field): building chunks was most of reading a file's chunks,
    # which a query does for every file it merges in first (StoredChunk has no
    # __post_init__; tests/index/test_store.py checks the fields against the constructor).
    chunk = object.__new__(_stored_chunk_class())
    chunk.__dict__.update(path=path, kind=kind, section=section, title=title, start_line=start,
                          end_line=end, text=text, context=context, part=part, meta=meta_dict,
                          source=source, id=cid)
    return chunk


def _varint_row_sums(data: bytes, sizes: "np.ndarray") -> "np.ndarray":
    """Per row, the sum of the SQLite varints (big-endian, 7 bits a byte, high bit set on all
    but the last) in ``data``: the rows' blobs back to back, ``sizes`` bytes each. int64
    (rows,). Raises ValueError on a truncated varint or one of 9 bytes (over 2^56: no count)."""
    import numpy as np

    b = np.frombuffer(data, dtype=np.uint8)
    last = b < 0x80
    if not b.size or not last[-1]:
        raise ValueError("truncated varint in FTS5 document sizes")
    ends = np.flatnonzero(last)
    varint = np.cumsum(last) - last             # the varint each byte belongs to
    after = ends[varint] - np.arange(b.size)    # bytes after it in that varint
    if after.max() > 7:
        raise ValueError("9-byte varint in FTS5 document sizes")
    values = np.bincount(varint, weights=(b & 0x7F).astype(np.int64) << (7 * after))
    rows = np.searchsorted(np.cumsum(sizes), ends, side="right")
    return np.bincount(rows, weights=values, minlength=sizes.size).astype(np.int64)


def _uri_path(path: Path) -> str:
    from urllib.parse import quote
    return quote(str(path.resolve()), safe="/")
