"""The schema of the index file and its numbered migrations (``MIGRATIONS``, the truth).

Migrations are applied in order, each once, and recorded in
``schema_migrations(version, name, applied_at)`` (UTC, ISO 8601); the file's schema version is
the newest applied (``SCHEMA_VERSION``); a migration whose values need Python has a step run
right after its script (``BACKFILLS``). After them the file holds:

* ``meta(key, value)``, text values: the vectors' provenance (``embed_backend``,
  ``embed_model``, ``embed_dimension``), the embedder the settings named (``config_backend``,
  ``config_model``: ``names_other_embedder``), ``repo_root`` and ``head`` (the commit at the
  last write, a SHA even on a detached HEAD; ``head:NAME`` and ``root:NAME`` per other
  source), ``built_at`` (UTC), ``build_seconds``, ``scan_started_ns`` (wall clock, ns: the
  racy-file rule), ``chunker`` (the chunkers' stamp), ``glob_verdicts`` (the globs' verdicts
  on script candidates), ``last_run``, ``schema_version``, the ``files`` and ``chunks``
  counts, and ``generation``, a counter bumped by every write so readers know when to reload.
* ``files(path, kind, size, mtime_ns, sha256, status, reason, chunk_count, encoding,
  source, ctime_ns, inode, device)``: every tracked path of every source, ``status``
  ``indexed``, ``skipped`` (with its ``reason``) or ``partial`` (some chunks failed to embed),
  so ``--status`` accounts for all of them; ``size`` in bytes, ``mtime_ns`` and ``ctime_ns``
  (ns since the epoch), ``inode`` and ``device`` (``lstat``'s) let a refresh skip an
  unchanged file without reading it (-1 when unknown: a path skipped before any read, or a
  file to read again); ``sha256`` hex of the bytes, ``encoding`` the one it was decoded with;
  ``reason`` of an indexed file names the lines whose secret-looking values were masked.
* ``chunks(id, path, kind, section, title, start_line, end_line, part, text, context, meta,
  vec, source, keywords)``: one row per ``Chunk`` (lines 1-based, inclusive; ``part`` 0 or
  1..n), ``meta`` as JSON, ``keywords`` the lexical-only words (tags, aliases) joined by
  spaces, never embedded. ``vec`` is the embedding as a little-endian float32 BLOB
  (``4 * dimension`` bytes), L2-normalised, so cosine similarity is a dot product
  (``varaverk.index.store.vectors``). Indexed by ``path`` and by ``source``. ``label`` holds
  the label field's tokens (file stem, section, title; ``varaverk.index.store.labels``).
* ``chunks_fts``: FTS5 over the view ``chunks_fts_content(id, context, text)``, whose
  ``context`` is a chunk's context followed by its keywords (external content, kept in step by
  triggers on ``chunks``). The tokenizer (``FTS_TOKENIZE``) keeps ``_`` inside words, so
  ``MOVER_STOP_TIMEOUT`` is one token; ``-`` separates, and a quoted query word becomes a
  phrase, so ``--force-delete`` still matches exactly those words in that order.
* ``labels_fts``: FTS5 over ``chunks.label`` (external content, kept in step by triggers on
  insert and delete; a label never changes in place): the label BM25's lengths and postings.
* ``row_strings(id, value, refs)`` and ``chunk_numbers(id, kind, section, path)``: every
  distinct kind, section and path of the chunks, with how many of the chunks' columns hold
  it, and each chunk's three as ids into it (``varaverk.index.store.row_strings``), kept in
  step by triggers on insert, delete and update; a string no chunk holds is dropped.
* ``summaries(path, sha256, model, made_at, text)``: one short summary per stored file
  (``varaverk.index.store.summaries``), made from the content whose hash is ``sha256`` by
  ``model`` (``extractive`` or ``backend/model``) at ``made_at`` (UTC, ISO 8601). Kept apart
  from ``files``: a rebuild keeps them, and a summary whose hash or model no longer matches
  is stale, never wrong-and-current.
"""

from __future__ import annotations

import datetime
import sqlite3

from varaverk.index.store.errors import IndexCorrupt

SCHEMA_VERSION = 6
FTS_TOKENIZE = "unicode61 remove_diacritics 2 tokenchars '_'"

# What FTS5 indexes as a chunk's context column: the context, then its keywords (if any).
_FTS_CONTEXT = ("CASE WHEN {row}.keywords = '' THEN {row}.context "
                "ELSE {row}.context || char(10) || {row}.keywords END")

# One string of a chunk counted in (``{col}`` of ``new``) or out (of ``old``); a row's numbers
# written; the strings no row refers to any more dropped.
_REF = ("INSERT INTO row_strings(value, refs) VALUES (new.{col}, 1)"
        " ON CONFLICT(value) DO UPDATE SET refs = refs + 1;")
_UNREF = "UPDATE row_strings SET refs = refs - 1 WHERE value = old.{col};"
# The chunk columns stored as numbers, in ``chunk_numbers``'s order (``row_strings`` reads them).
NUMBERED_COLUMNS = ("kind", "section", "path")
_REFS = " ".join(_REF.format(col=c) for c in NUMBERED_COLUMNS)
_UNREFS = " ".join(_UNREF.format(col=c) for c in NUMBERED_COLUMNS)
_NUMBER = ("INSERT INTO chunk_numbers VALUES (new.id, " + ", ".join(
    f"(SELECT id FROM row_strings WHERE value = new.{c})" for c in NUMBERED_COLUMNS) + ");")
_DROP_UNUSED = ("DELETE FROM row_strings WHERE refs <= 0"
                " AND value IN (old.kind, old.section, old.path);")
_NUMBERS_TRIGGERS = f"""
        CREATE TRIGGER numbers_ai AFTER INSERT ON chunks BEGIN
            {_REFS} {_NUMBER}
        END;
        CREATE TRIGGER numbers_ad AFTER DELETE ON chunks BEGIN
            DELETE FROM chunk_numbers WHERE id = old.id; {_UNREFS} {_DROP_UNUSED}
        END;
        CREATE TRIGGER numbers_au AFTER UPDATE OF id, kind, section, path ON chunks BEGIN
            DELETE FROM chunk_numbers WHERE id = old.id; {_UNREFS} {_REFS} {_DROP_UNUSED}
            {_NUMBER}
        END;"""

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
    # Change detection as git does it: a file whose size, mtime, ctime, inode or device moved
    # is re-hashed. -1 until a run has seen the file under this version: every file is then
    # hashed once (an equal hash keeps its chunks and vectors: nothing is embedded).
    (3, "ctime, inode and device", """
        ALTER TABLE files ADD COLUMN ctime_ns INTEGER NOT NULL DEFAULT -1;
        ALTER TABLE files ADD COLUMN inode INTEGER NOT NULL DEFAULT -1;
        ALTER TABLE files ADD COLUMN device INTEGER NOT NULL DEFAULT -1;
    """),
    # The label field's statistics stored at write time (``labels``): opening a large index
    # reads them instead of tokenizing every label. chunks_au now fires only for the columns
    # chunks_fts reads, so filling ``label`` (``labels.backfill``, run after this script)
    # leaves chunks_fts alone; a label is written with its row and never updated after.
    (4, "stored labels", f"""
        DROP TRIGGER chunks_au;
        CREATE TRIGGER chunks_au AFTER UPDATE OF context, text, keywords ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, context, text)
            VALUES ('delete', old.id, {_FTS_CONTEXT.format(row="old")}, old.text);
            INSERT INTO chunks_fts(rowid, context, text)
            VALUES (new.id, {_FTS_CONTEXT.format(row="new")}, new.text);
        END;
        ALTER TABLE chunks ADD COLUMN label TEXT NOT NULL DEFAULT '';
        CREATE VIRTUAL TABLE labels_fts USING fts5(label, content='chunks', content_rowid='id');
        CREATE TRIGGER labels_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO labels_fts(rowid, label) VALUES (new.id, new.label);
        END;
        CREATE TRIGGER labels_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO labels_fts(labels_fts, rowid, label) VALUES ('delete', old.id, old.label);
        END;
    """),
    # Document summaries (AI_SUMMARIES): written one by one by ai-index --summaries, each in
    # its own transaction, so an interrupted pass keeps what it finished.
    (5, "summaries", """
        CREATE TABLE summaries (
            path TEXT PRIMARY KEY,
            sha256 TEXT NOT NULL,
            model TEXT NOT NULL,
            made_at TEXT NOT NULL,
            text TEXT NOT NULL
        );
    """),
    # The string columns ranking numbers (kind, section, path) stored as numbers at write
    # time (``varaverk.index.store.row_strings``): opening a large index reads a small integer
    # table instead of three strings per row. Kept in step by triggers on ``chunks``; a string
    # stays while a row refers to it (``refs``, one per column that holds it).
    (6, "numbered row strings", f"""
        CREATE TABLE row_strings (
            id INTEGER PRIMARY KEY,
            value TEXT NOT NULL UNIQUE,
            refs INTEGER NOT NULL
        );
        CREATE TABLE chunk_numbers (
            id INTEGER PRIMARY KEY,
            kind INTEGER NOT NULL,
            section INTEGER NOT NULL,
            path INTEGER NOT NULL
        );
        INSERT INTO row_strings(value, refs)
            SELECT value, count(*) FROM (SELECT kind AS value FROM chunks
                                         UNION ALL SELECT section FROM chunks
                                         UNION ALL SELECT path FROM chunks) GROUP BY value;
        INSERT INTO chunk_numbers
            SELECT c.id, k.id, s.id, p.id FROM chunks c
            JOIN row_strings k ON k.value = c.kind
            JOIN row_strings s ON s.value = c.section
            JOIN row_strings p ON p.value = c.path;
        {_NUMBERS_TRIGGERS}
    """),
]
assert MIGRATIONS[-1][0] == SCHEMA_VERSION
# Work a migration needs Python for, run right after its script (same transaction).
def _backfill_labels(conn: sqlite3.Connection) -> None:
    # Imported here: the label tokens' patterns are not on the no-op refresh's path.
    from varaverk.index.store import labels
    labels.backfill(conn)


BACKFILLS = {4: _backfill_labels}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def pending_migrations(conn: sqlite3.Connection, migrations=None) -> bool:
    """True when the file lacks a migration of ``migrations`` (default ``MIGRATIONS``; a
    read, so opening an up-to-date file never waits for another run's write transaction)."""
    migrations = MIGRATIONS if migrations is None else migrations
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone():
        return True
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    return any(version not in applied for version, _, _ in migrations) or \
        max(applied, default=0) > migrations[-1][0]


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations the file lacks, inside the caller's transaction.

    Raises IndexCorrupt when the file was written by a newer schema than this code knows.
    """
    apply_migrations(conn, MIGRATIONS, "index", "rebuild with --force", BACKFILLS)


def apply_migrations(conn: sqlite3.Connection, migrations, what: str, fix: str,
                     backfills: dict | None = None) -> None:
    """Apply the ``(version, name, sql)`` of ``migrations`` the file lacks, in order, inside
    the caller's transaction, recording each in ``schema_migrations`` and ``meta`` (which the
    first migration must create); ``backfills`` maps a version to a ``fn(conn)`` run right
    after its script. Shared by every SQLite file of ours (the index, memory), each with
    its own migrations and backfills.

    Raises IndexCorrupt naming ``what`` and ``fix`` when the file was written by a newer
    schema than ``migrations`` knows.
    """
    known = migrations[-1][0]
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                 "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    newest = max(applied, default=0)
    if newest > known:
        raise IndexCorrupt(f"{what} schema version {newest} is newer than this Varaverk "
                           f"understands ({known}); upgrade, or {fix}")
    for version, name, sql in migrations:
        if version in applied:
            continue
        # executescript commits first; run the statements one by one inside our transaction.
        for statement in split_sql(sql):
            conn.execute(statement)
        if backfills and version in backfills:
            backfills[version](conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, _now()))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(version),))


def split_sql(script: str) -> list[str]:
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
