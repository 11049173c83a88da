"""``MemoryStore``: the memory file (``AI_DATA_DIR/memory.db``), read and written under one
connection (schema: ``varaverk.memory.schema``).

Every write is one transaction: turns are committed as they are added, and a triplet is
written together with its facts and recollection (``write_digest``), so a process killed at
any moment loses no committed turn and leaves no triplet without its facts. Deleted rows are
overwritten on disk (``secure_delete``): forgetting removes the words, not just the rows.
"""

from __future__ import annotations

import datetime
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NamedTuple

from varaverk import exitcodes
from varaverk.errors import VaraverkError
from varaverk.index.store.compatibility import describe_embedder
from varaverk.index.store.schema import apply_migrations, pending_migrations
from varaverk.memory.digest import Digest, Fact
from varaverk.memory.fact_matrix import FACT_TABLES, FactTable
from varaverk.memory.schema import MIGRATIONS
from varaverk.memory.triplets import ROLES, Turn, windows
from varaverk.text import fts_query

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

_TURN_COLUMNS = "conversation, seq, turn_ref, speaker, role, said_at, text"


def _use_wal(conn: sqlite3.Connection, seconds: float = 30.0) -> None:
    """Put the file in WAL mode. Switching a file that another connection is creating fails
    at once with "database is locked" (SQLite's busy handler does not cover it), so the
    switch is retried until that opener is done; an existing WAL file needs no switch."""
    deadline = time.monotonic() + seconds
    while conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class MemoryMismatch(VaraverkError):
    """The memory's facts were embedded by another embedder than the settings name."""

    exit_code = exitcodes.MISMATCH
    kind = "mismatch"
    fix = "run ai-memory redigest (the kept turns are digested and embedded again)"


class TripletRow(NamedTuple):
    """A stored triplet: its id, conversation, turn range, status, how it was digested."""

    id: int
    conversation: str
    first_seq: int
    last_seq: int
    status: str
    digest: str
    attempts: int
    error: str
    digested_at: str


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class MemoryStore:
    """An open memory file. Thread-safe (one connection behind a lock). Use ``open``."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()
        # The fact matrix's key: the inode too, so a file deleted and made again at the same
        # path starts afresh. Taken once: this connection reads the file opened, whatever
        # happens to the path later.
        self._table_key = f"{path.resolve()}:{path.stat().st_ino}"

    @classmethod
    def open(cls, path: str | os.PathLike) -> "MemoryStore":
        """Open or create the memory file at ``path`` (WAL, migrations applied)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                               timeout=30)
        try:
            for pragma in ("busy_timeout = 30000", "foreign_keys = ON", "secure_delete = ON",
                           "synchronous = NORMAL"):
                conn.execute(f"PRAGMA {pragma}")
            _use_wal(conn)
            if pending_migrations(conn, MIGRATIONS):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    apply_migrations(conn, MIGRATIONS, "memory", "move memory.db away")
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, fn, *args):
        """Run ``fn(conn, *args)`` in one IMMEDIATE transaction and bump the generation."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn, *args)
                conn.execute("INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) "
                             "DO UPDATE SET value = CAST(value AS INTEGER) + 1")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return result

    def _read(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    # -- meta and the embedder ----------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        """Every meta entry (``embed_backend``, ``embed_model``, ``embed_dimension``, ...)."""
        return dict(self._read("SELECT key, value FROM meta"))

    def check_embedder(self, backend: str, model: str, dimension: int | None = None) -> None:
        """Raise MemoryMismatch unless stored facts come from ``backend``/``model`` (and
        ``dimension`` when given); a memory without facts takes any embedder."""
        meta = self.meta()
        if not meta.get("embed_backend"):
            return
        same = (meta["embed_backend"], meta.get("embed_model")) == (backend, model)
        if same and dimension is not None and meta.get("embed_dimension"):
            same = int(meta["embed_dimension"]) == int(dimension)
        if not same:
            built = describe_embedder(meta["embed_backend"], meta.get("embed_model", "?"),
                                      meta.get("embed_dimension"))
            raise MemoryMismatch(f"memory {self.path} holds facts embedded with {built}; this "
                                 f"run uses {describe_embedder(backend, model, dimension)}")

    # -- turns --------------------------------------------------------------------------------

    def add_turns(self, conversation: str, turns: list[dict]) -> list[Turn]:
        """Append ``turns`` (dicts of ``speaker``, ``role``, ``said_at``, ``text`` and an
        optional ``turn_ref``) to ``conversation``, in one transaction; text must already be
        redacted. A turn whose ``turn_ref`` is already stored is skipped (an import run twice
        adds nothing). Raises ValueError for a role other than user/assistant."""
        for t in turns:
            if t["role"] not in ROLES:
                raise ValueError(f"role {t['role']!r}: expected user or assistant")
        return self._write(self._insert_turns, conversation, turns)

    @staticmethod
    def _insert_turns(conn, conversation: str, turns: list[dict]) -> list[Turn]:
        seq = conn.execute("SELECT coalesce(max(seq) + 1, 0) FROM turns WHERE conversation = ?",
                           (conversation,)).fetchone()[0]
        added = []
        for t in turns:
            ref = t.get("turn_ref") or f"{conversation}:{seq}"
            if conn.execute("SELECT 1 FROM turns WHERE conversation = ? AND turn_ref = ?",
                            (conversation, ref)).fetchone():
                continue
            turn = Turn(conversation, seq, ref, t["speaker"], t["role"], t["said_at"], t["text"])
            conn.execute(f"INSERT INTO turns ({_TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (turn.conversation, turn.seq, turn.turn_ref, turn.speaker, turn.role,
                          turn.said_at, turn.text))
            added.append(turn)
            seq += 1
        return added

    def turns(self, conversation: str, first: int = 0, last: int | None = None) -> list[Turn]:
        """The stored turns of ``conversation`` with ``first <= seq <= last``, in order."""
        rows = self._read(f"SELECT {_TURN_COLUMNS} FROM turns WHERE conversation = ? AND "
                          "seq >= ? AND seq <= ? ORDER BY seq",
                          (conversation, first, 2**62 if last is None else last))
        return [Turn(*row) for row in rows]

    def conversations(self) -> list[tuple[str, int, str, str]]:
        """``(conversation, turns, first said_at, last said_at)``, most recent first."""
        return self._read("SELECT conversation, count(*), min(said_at), max(said_at) FROM turns "
                          "GROUP BY conversation ORDER BY max(said_at) DESC")

    def overview(self, opening_chars: int = 120) -> list[tuple[str, int, int, str, str, str]]:
        """``(conversation, turns, triplets, first said_at, last said_at, opening)``, most
        recent first; ``opening``: the first ``opening_chars`` characters of its first turn."""
        return self._read(
            "SELECT t.conversation, count(*), (SELECT count(*) FROM triplets r WHERE "
            "r.conversation = t.conversation), min(t.said_at), max(t.said_at), (SELECT "
            "substr(o.text, 1, ?) FROM turns o WHERE o.conversation = t.conversation ORDER BY "
            "o.seq LIMIT 1) FROM turns t GROUP BY t.conversation ORDER BY max(t.said_at) DESC",
            (opening_chars,))

    def search_turns(self, query: str, limit: int = 20) -> list[tuple[Turn, float]]:
        """Turns holding any word of ``query`` (FTS5, the index's query rules), best BM25 first;
        each with its BM25 score (higher is better)."""
        match = fts_query(query)
        if not match:
            return []
        rows = self._read(f"SELECT {', '.join('t.' + c.strip() for c in _TURN_COLUMNS.split(','))}"
                          ", bm25(turns_fts) FROM turns_fts JOIN turns t ON t.id = turns_fts.rowid"
                          " WHERE turns_fts MATCH ? ORDER BY bm25(turns_fts) LIMIT ?",
                          (match, limit))
        return [(Turn(*row[:7]), -row[7]) for row in rows]

    # -- triplets -----------------------------------------------------------------------------

    def triplets(self, conversation: str | None = None, status: str | None = None
                 ) -> list[TripletRow]:
        """Stored triplets (of one conversation, of one status), newest conversation first."""
        where, params = [], []
        if conversation is not None:
            where.append("conversation = ?")
            params.append(conversation)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        sql = ("SELECT id, conversation, first_seq, last_seq, status, digest, attempts, error, "
               "digested_at FROM triplets" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY conversation, first_seq")
        return [TripletRow(*row) for row in self._read(sql, params)]

    def triplet(self, triplet_id: int) -> TripletRow | None:
        rows = self._read("SELECT id, conversation, first_seq, last_seq, status, digest, "
                          "attempts, error, digested_at FROM triplets WHERE id = ?", (triplet_id,))
        return TripletRow(*rows[0]) if rows else None

    def facts(self, triplet_id: int) -> list[Fact]:
        return [Fact(*row) for row in self._read(
            "SELECT statement, speaker, type FROM facts WHERE triplet = ? ORDER BY id",
            (triplet_id,))]

    def recollection(self, triplet_id: int) -> str:
        rows = self._read("SELECT text FROM recollections WHERE triplet = ?", (triplet_id,))
        return rows[0][0] if rows else ""

    def pending(self) -> list[tuple[str, int, int]]:
        """The triplets to digest now: ``(conversation, first_seq, last_seq)`` for every window
        of the stored turns (``triplets.windows``) that has no triplet row yet."""
        stored = {(r[0], r[1], r[2]) for r in
                  self._read("SELECT conversation, first_seq, last_seq FROM triplets")}
        seqs: dict[str, list[int]] = {}
        for conversation, seq in self._read("SELECT conversation, seq FROM turns "
                                            "ORDER BY conversation, seq"):
            seqs.setdefault(conversation, []).append(seq)
        return [(c, first, last) for c, s in seqs.items() for first, last in windows(s)
                if (c, first, last) not in stored]

    def write_digest(self, conversation: str, first: int, last: int, digest: Digest,
                     vectors: "np.ndarray", embedder: tuple[str, str, int], status: str,
                     error: str = "", attempts: int = 0) -> int:
        """Store one triplet with its facts (``vectors``: float32 ``(len(facts), dim)``,
        L2-normalised) and recollection, in one transaction, replacing a stored triplet that
        starts at ``first`` (a shorter last triplet grown, a retried digest). ``embedder``:
        ``(backend, model, dimension)``, checked and recorded. Returns the triplet id."""
        if len(vectors) != len(digest.facts):
            raise ValueError(f"{len(vectors)} vectors for {len(digest.facts)} facts")
        return self._write(self._insert_digest, conversation, first, last, digest, vectors,
                           embedder, status, error, attempts)

    def _insert_digest(self, conn, conversation, first, last, digest, vectors, embedder,
                       status, error, attempts) -> int:
        backend, model, dimension = embedder
        self.check_embedder(backend, model, dimension)
        for key, value in (("embed_backend", backend), ("embed_model", model),
                           ("embed_dimension", str(dimension))):
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
        conn.execute("DELETE FROM triplets WHERE conversation = ? AND first_seq = ?",
                     (conversation, first))
        cur = conn.execute("INSERT INTO triplets (conversation, first_seq, last_seq, status, "
                           "digest, attempts, error, digested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (conversation, first, last, status, digest.method, attempts, error,
                            _now()))
        triplet_id = cur.lastrowid
        conn.executemany("INSERT INTO facts (triplet, statement, speaker, type, vec) "
                         "VALUES (?, ?, ?, ?, ?)",
                         [(triplet_id, f.statement, f.speaker, f.type,
                           vec.astype("<f4").tobytes()) for f, vec in zip(digest.facts, vectors)])
        conn.execute("INSERT INTO recollections VALUES (?, ?)", (triplet_id, digest.recollection))
        return triplet_id

    # -- vectors ------------------------------------------------------------------------------

    def generation(self) -> str:
        rows = self._read("SELECT value FROM meta WHERE key = 'generation'")
        return rows[0][0] if rows else "0"

    def fact_table(self) -> FactTable:
        """Every fact vector as one matrix (``fact_matrix.FACT_TABLES``: kept for the
        process and brought up to date after writes, reading only what changed)."""
        meta = self.meta()  # one read: the dimension and the write generation
        return FACT_TABLES.get(self._table_key, meta.get("generation", "0"),
                               int(meta.get("embed_dimension") or 0), self._read)

    def export(self) -> dict:
        """Everything remembered, JSON-ready (no vectors): ``{"conversations": [{"id",
        "turns": [{"id", "speaker", "role", "said_at", "text"}], "triplets": [{"id", "turns":
        [first, last], "status", "digest", "facts", "recollection"}]}]}``."""
        out = []
        for conversation, *_ in self.conversations():
            turns = [{"id": t.turn_ref, "speaker": t.speaker, "role": t.role,
                      "said_at": t.said_at, "text": t.text} for t in self.turns(conversation)]
            triplets = [{"id": r.id, "turns": [r.first_seq, r.last_seq], "status": r.status,
                         "digest": r.digest,
                         "facts": [{"statement": f.statement, "speaker": f.speaker,
                                    "type": f.type} for f in self.facts(r.id)],
                         "recollection": self.recollection(r.id)}
                        for r in self.triplets(conversation)]
            out.append({"id": conversation, "turns": turns, "triplets": triplets})
        return {"conversations": out}

    # -- forgetting ---------------------------------------------------------------------------

    def forget_triplet(self, triplet_id: int) -> int:
        """Forget one triplet: its turns, and every triplet quoting one of them (with facts,
        vectors and recollections); the conversation's other turns are digested again
        later. Returns the number of turns removed (0: no such triplet)."""
        row = self.triplet(triplet_id)
        if row is None:
            return 0
        removed = self._write(self._delete_range, row.conversation, row.first_seq, row.last_seq)
        self._leave_no_trace()
        return removed

    def _leave_no_trace(self) -> None:
        """After forgetting: merge the FTS5 segments (a deleted turn's words stay in old
        segments until then) and fold the WAL into the file and truncate it (the WAL still
        holds the pages as they were before the delete)."""
        with self._lock:
            self._conn.execute("INSERT INTO turns_fts(turns_fts) VALUES ('optimize')")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @staticmethod
    def _delete_range(conn, conversation: str, first: int, last: int) -> int:
        conn.execute("DELETE FROM triplets WHERE conversation = ? AND first_seq <= ? AND "
                     "last_seq >= ?", (conversation, last, first))
        return conn.execute("DELETE FROM turns WHERE conversation = ? AND seq BETWEEN ? AND ?",
                            (conversation, first, last)).rowcount

    def forget_conversation(self, conversation: str) -> int:
        """Forget every turn and triplet of ``conversation``; returns the turns removed."""
        removed = self._write(self._delete_range, conversation, 0, 2**62)
        self._leave_no_trace()
        return removed

    def forget_all(self) -> int:
        """Forget everything, the embedder's record too; returns the turns removed."""
        def wipe(conn):
            conn.execute("DELETE FROM triplets")
            conn.execute("DELETE FROM meta WHERE key LIKE 'embed_%'")
            return conn.execute("DELETE FROM turns").rowcount
        removed = self._write(wipe)
        self._leave_no_trace()
        with self._lock:
            self._conn.execute("VACUUM")  # the file shrinks back: nothing left to read
        return removed

    def drop_digests(self) -> int:
        """Delete every triplet (facts, vectors, recollections) but keep every turn, so all
        can be digested again with another embedder (``ai-memory redigest``)."""
        def drop(conn):
            conn.execute("DELETE FROM meta WHERE key LIKE 'embed_%'")
            return conn.execute("DELETE FROM triplets").rowcount
        return self._write(drop)
