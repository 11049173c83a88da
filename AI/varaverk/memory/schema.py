"""The schema of the memory file (``AI_DATA_DIR/memory.db``) and its numbered migrations.

Applied like the index's (``varaverk.index.store.schema.apply_migrations``): in order, each
once, recorded in ``schema_migrations``. After them the file holds:

* ``meta(key, value)``: the vectors' provenance (``embed_backend``, ``embed_model``,
  ``embed_dimension``; no mixing of models, as in the index), ``schema_version`` and
  ``generation``, a counter bumped by every write so a reader knows when to reload vectors.
* ``turns(id, conversation, seq, turn_ref, speaker, role, said_at, text)``: every turn
  verbatim (secrets redacted before the insert), ``seq`` 0-based within its conversation,
  ``turn_ref`` the caller's id of the turn (``s1:3``; default ``<conversation>:<seq>``),
  ``role`` ``user`` or ``assistant``, ``said_at`` ISO 8601. Never rewritten: a trigger
  refuses any UPDATE. Indexed by FTS5 (``turns_fts``) for ``ai-memory search``.
* ``triplets(id, conversation, first_seq, last_seq, status, digest, attempts, error,
  digested_at)``: one digest of up to three consecutive turns (``varaverk.memory.triplets``);
  ``status`` ``digested`` or ``retry`` (the model digest failed: the extractive digest
  stands in and the model is asked again), ``digest`` ``model`` or ``extractive``. A triplet
  row is written in the same transaction as its facts and recollection, never alone; a
  digest written again gets a new id (AUTOINCREMENT: ids are never reused).
* ``facts(id, triplet, statement, speaker, type, vec)``: short statements with who said them
  and their type (``varaverk.memory.digest.FACT_TYPES``); ``vec`` a little-endian float32
  BLOB, L2-normalised (cosine similarity is a dot product). Deleted with their triplet. Ids
  only grow, never reused (AUTOINCREMENT), so a reader that kept the facts up to id N reads
  only those above N (``varaverk.memory.fact_matrix``).
* ``recollections(triplet, text)``: one first-person summary per triplet.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial", """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            conversation TEXT NOT NULL,
            seq INTEGER NOT NULL,
            turn_ref TEXT NOT NULL,
            speaker TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            said_at TEXT NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (conversation, seq),
            UNIQUE (conversation, turn_ref)
        );
        CREATE TRIGGER turns_never_rewritten BEFORE UPDATE ON turns BEGIN
            SELECT RAISE(ABORT, 'a remembered turn is never rewritten');
        END;
        CREATE VIRTUAL TABLE turns_fts USING fts5(
            text, content='turns', content_rowid='id',
            tokenize="unicode61 remove_diacritics 2 tokenchars '_'"
        );
        CREATE TRIGGER turns_ai AFTER INSERT ON turns BEGIN
            INSERT INTO turns_fts(rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER turns_ad AFTER DELETE ON turns BEGIN
            INSERT INTO turns_fts(turns_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TABLE triplets (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('digested', 'retry')),
            digest TEXT NOT NULL CHECK (digest IN ('model', 'extractive')),
            attempts INTEGER NOT NULL DEFAULT 0,
            error TEXT NOT NULL DEFAULT '',
            digested_at TEXT NOT NULL,
            UNIQUE (conversation, first_seq)
        );
        CREATE TABLE facts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            triplet INTEGER NOT NULL REFERENCES triplets(id) ON DELETE CASCADE,
            statement TEXT NOT NULL,
            speaker TEXT NOT NULL,
            type TEXT NOT NULL,
            vec BLOB NOT NULL
        );
        CREATE INDEX facts_triplet ON facts(triplet);
        CREATE TABLE recollections (
            triplet INTEGER PRIMARY KEY REFERENCES triplets(id) ON DELETE CASCADE,
            text TEXT NOT NULL
        );
    """),
]
assert MIGRATIONS[-1][0] == SCHEMA_VERSION
