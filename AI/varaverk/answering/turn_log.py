"""The turn log: every chat turn's events, durable, in one SQLite file (AI_DATA_DIR/turns.sqlite).

A turn lives here, not in an HTTP response. The process that runs a turn appends its events
(``start``, ``profile``, ``sources``, ``capability``, ``thinking``, ``content``, ``findings``,
then one of ``done``, ``error`` or ``stopped``, and ``saved`` after a stored answer) with a
per-turn sequence number 1, 2, 3, ...; any process reads them back from any number on
(``read``, ``follow``), which is what Server-Sent Events' ``Last-Event-ID`` needs. Several
processes share the file (gunicorn workers): SQLite in WAL mode lets readers read while one
writer writes, and nothing another process needs is held in memory.

Tables:

    turns   id, chat_id (NULL: a new conversation), status (running, done, error, stopped),
            created, updated, heartbeat (Unix seconds), stop_requested (0/1), owner (host:pid)
    events  (turn, seq) → type, data (the event's JSON object)

Bounds: ``begin`` refuses a turn past ``max_running`` running turns (``TurnsBusy``) or a second
running turn in one conversation (``ChatBusy``). A running turn whose owner stopped updating
its heartbeat for ``STALE_SECONDS`` (a killed worker) is closed with an error event by the next
``begin`` or reader. Finished turns older than ``retain_seconds`` are pruned by ``begin``.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import socket
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Iterator

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    chat_id TEXT,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    heartbeat REAL NOT NULL,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_status ON turns(status, updated);
CREATE INDEX IF NOT EXISTS turns_by_chat ON turns(chat_id, status);
CREATE TABLE IF NOT EXISTS events (
    turn TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (turn, seq)
) WITHOUT ROWID;
"""

RUNNING = "running"
TERMINAL = ("done", "error", "stopped")
# A running turn's owner refreshes its heartbeat every few seconds (``turn_runner``); one
# silent this long belongs to a process that is gone.
STALE_SECONDS = 30.0
BUSY_TIMEOUT_MS = 10_000
_ID_CHARS = frozenset("0123456789abcdef")


class _Pending:
    """One append waiting for the writer thread: its rows, the status it sets, and when it
    is done, the error it met (None: committed)."""

    def __init__(self, turn_id: str, rows: list[tuple], status: str | None):
        self.turn_id, self.rows, self.status = turn_id, rows, status
        self.done = threading.Event()
        self.error: Exception | None = None


class TurnsBusy(Exception):
    """``max_running`` turns are running already: the message says so and what to do."""


class ChatBusy(Exception):
    """The conversation has a running turn already; ``turn_id`` names it (attach to it)."""

    def __init__(self, turn_id: str):
        super().__init__(f"this conversation already has an answer being generated ({turn_id})")
        self.turn_id = turn_id


def valid_turn_id(value: object) -> bool:
    """True for an id ``begin`` makes: 32 lower-case hex digits."""
    return isinstance(value, str) and len(value) == 32 and set(value) <= _ID_CHARS


def this_owner() -> str:
    """``host:pid`` of this process, recorded as a turn's owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


class TurnLog:
    """The turn log file, shared by threads (one connection each) and processes.

    Args:
        path: the SQLite file (created, with its folder, on first use).
        retain_seconds: finished turns older than this are deleted by ``begin``.
    """

    def __init__(self, path: Path, retain_seconds: float = 24 * 3600.0):
        self.path = Path(path)
        self.retain_seconds = retain_seconds
        self._local = threading.local()
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        # Followers in this process wait on their turn's condition, which a write from this
        # process notifies at once; other processes' writes are seen at the next poll.
        self._signals: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._signals_lock = threading.Lock()
        self._pending: queue.Queue = queue.Queue()
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Questions and answers, as private as the conversations: owner only (SQLite
            # gives its -wal and -shm files the same mode).
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit survives a killed process; only a power cut may lose the
            # last events, never corrupt the file.
            conn.execute("PRAGMA synchronous=NORMAL")
            with self._schema_lock:
                if not self._schema_ready:
                    conn.executescript(SCHEMA)
                    self._schema_ready = True
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ── writing ────────────────────────────────────────────────────────────────────────────

    def begin(self, chat_id: str | None, max_running: int, start: dict) -> str:
        """Register a new running turn and write its ``start`` event (seq 1).

        Also closes stale turns and prunes old finished ones, so a crashed worker never holds
        a place under the cap for long.

        Returns:
            The new turn's id (32 hex digits).

        Raises:
            TurnsBusy: ``max_running`` turns are running.
            ChatBusy: ``chat_id`` has a running turn (its id on the exception).
        """
        now = time.time()
        self.reap_stale(now)
        self.prune(now)
        turn_id = secrets.token_hex(16)
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            running = db.execute("SELECT COUNT(*) FROM turns WHERE status = ?",
                                 (RUNNING,)).fetchone()[0]
            if chat_id is not None:
                row = db.execute("SELECT id FROM turns WHERE chat_id = ? AND status = ?",
                                 (chat_id, RUNNING)).fetchone()
                if row:
                    raise ChatBusy(row[0])
            if running >= max_running:
                raise TurnsBusy(f"{running} answers are being generated already (the cap, "
                                f"AI_DOCK_MAX_TURNS, is {max_running}); try again when one "
                                "has finished")
            db.execute("INSERT INTO turns (id, chat_id, status, created, updated, heartbeat, "
                       "owner) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (turn_id, chat_id, RUNNING, now, now, now, this_owner()))
            db.execute("INSERT INTO events VALUES (?, 1, 'start', ?)",
                       (turn_id, _dumps({**start, "turn_id": turn_id})))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return turn_id

    def append(self, turn_id: str, first_seq: int, events: list[tuple[str, dict]],
               status: str | None = None) -> int:
        """Write ``events`` as seq ``first_seq``, ``first_seq + 1``, ...; ``status`` (one of
        TERMINAL) finishes the turn in the same transaction. Returns the next free seq once
        they are committed; raises the write's error (``sqlite3.Error``, say).

        Only the turn's owner appends (one writer per turn), so it keeps the counter. The
        process's writer thread commits every append waiting at that moment, from all turns,
        in one transaction (group commit): a hundred streaming turns cost a few commits a
        second, not one per token each, and contend for the file lock with one writer per
        process.
        """
        rows = [(turn_id, first_seq + i, kind, _dumps(data))
                for i, (kind, data) in enumerate(events)]
        pending = _Pending(turn_id, rows, status)
        with self._writer_lock:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="turn-log-writer",
                                                daemon=True)
                self._writer.start()
            self._pending.put(pending)
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return first_seq + len(rows)

    def _write_loop(self) -> None:
        """The writer thread: commit whatever appends are waiting, together; then wake their
        callers and this process's followers of those turns."""
        while True:
            batch = [self._pending.get()]
            while True:
                try:
                    batch.append(self._pending.get_nowait())
                except queue.Empty:
                    break
            try:
                self._commit(batch)
            except Exception:  # never let the writer die: its callers are waiting
                for one in batch:  # one bad append must not fail the others
                    try:
                        self._commit([one])
                    except Exception as exc:
                        one.error = exc
            for one in batch:
                one.done.set()
            for turn_id in {one.turn_id for one in batch}:
                signal = self._signals.get(turn_id)
                if signal is not None:
                    with signal:
                        signal.notify_all()

    def _commit(self, batch: list["_Pending"]) -> None:
        now = time.time()
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            for one in batch:
                db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", one.rows)
                if one.status is None:
                    db.execute("UPDATE turns SET updated = ?, heartbeat = ? WHERE id = ?",
                               (now, now, one.turn_id))
                else:
                    db.execute("UPDATE turns SET status = ?, updated = ?, heartbeat = ? "
                               "WHERE id = ?", (one.status, now, now, one.turn_id))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def heartbeat(self, turn_ids: list[str]) -> None:
        """Mark these running turns as alive (their owner calls this every few seconds)."""
        if turn_ids:
            marks = ",".join("?" * len(turn_ids))
            self._db().execute(f"UPDATE turns SET heartbeat = ? WHERE id IN ({marks}) "
                               "AND status = ?", (time.time(), *turn_ids, RUNNING))

    def request_stop(self, turn_id: str) -> dict | None:
        """Ask the turn's owner to stop it (any process may). Returns the turn's ``info``, or
        None when there is no such turn; a finished turn is left as it is."""
        self._db().execute("UPDATE turns SET stop_requested = 1 WHERE id = ? AND status = ?",
                           (turn_id, RUNNING))
        return self.info(turn_id)

    def stop_requests(self, turn_ids: list[str]) -> set[str]:
        """Those of ``turn_ids`` whose stop was requested and that are still running."""
        if not turn_ids:
            return set()
        marks = ",".join("?" * len(turn_ids))
        rows = self._db().execute(f"SELECT id FROM turns WHERE id IN ({marks}) AND status = ? "
                                  "AND stop_requested = 1", (*turn_ids, RUNNING)).fetchall()
        return {r[0] for r in rows}

    def reap_stale(self, now: float | None = None) -> int:
        """Close every running turn whose heartbeat is older than STALE_SECONDS with an
        ``error`` event (kind ``interrupted``). Returns how many were closed."""
        now = time.time() if now is None else now
        db = self._db()
        stale = db.execute("SELECT id FROM turns WHERE status = ? AND heartbeat < ?",
                           (RUNNING, now - STALE_SECONDS)).fetchall()
        closed = 0
        for (turn_id,) in stale:
            db.execute("BEGIN IMMEDIATE")
            try:
                alive = db.execute("SELECT 1 FROM turns WHERE id = ? AND status = ? AND "
                                   "heartbeat < ?", (turn_id, RUNNING, now - STALE_SECONDS)
                                   ).fetchone()
                if alive:
                    seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE "
                                     "turn = ?", (turn_id,)).fetchone()[0]
                    db.execute("INSERT INTO events VALUES (?, ?, 'error', ?)", (
                        turn_id, seq, _dumps({"message": "the dock process generating this "
                                              "answer stopped (restart or crash); ask again",
                                              "kind": "interrupted"})))
                    db.execute("UPDATE turns SET status = 'error', updated = ? WHERE id = ?",
                               (now, turn_id))
                    closed += 1
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return closed

    def prune(self, now: float | None = None) -> int:
        """Delete finished turns (and their events) last updated over ``retain_seconds``
        ago. Returns how many turns went."""
        cutoff = (time.time() if now is None else now) - self.retain_seconds
        db = self._db()
        old = [r[0] for r in db.execute("SELECT id FROM turns WHERE status != ? AND "
                                        "updated < ?", (RUNNING, cutoff)).fetchall()]
        if not old:
            return 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for turn_id in old:
                db.execute("DELETE FROM events WHERE turn = ?", (turn_id,))
                db.execute("DELETE FROM turns WHERE id = ?", (turn_id,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return len(old)

    # ── reading ────────────────────────────────────────────────────────────────────────────

    def info(self, turn_id: str) -> dict | None:
        """``{"id", "chat_id", "status", "created", "updated", "stop_requested"}`` or None."""
        row = self._db().execute("SELECT id, chat_id, status, created, updated, "
                                 "stop_requested FROM turns WHERE id = ?",
                                 (turn_id,)).fetchone()
        if row is None:
            return None
        keys = ("id", "chat_id", "status", "created", "updated", "stop_requested")
        return dict(zip(keys, row))

    def running_in(self, chat_id: str) -> str | None:
        """The id of the running turn answering in ``chat_id``, or None."""
        row = self._db().execute("SELECT id FROM turns WHERE chat_id = ? AND status = ?",
                                 (chat_id, RUNNING)).fetchone()
        return row[0] if row else None

    def read(self, turn_id: str, after: int = 0) -> tuple[str | None, list[tuple[int, str, str]]]:
        """The turn's status and its events with seq > ``after``, in order, each
        ``(seq, type, data JSON text)``, read in one snapshot: when the status is finished,
        the events are all there are. Status None: no such turn."""
        db = self._db()
        db.execute("BEGIN")
        try:
            row = db.execute("SELECT status FROM turns WHERE id = ?", (turn_id,)).fetchone()
            events = db.execute("SELECT seq, type, data FROM events WHERE turn = ? AND seq > ? "
                                "ORDER BY seq", (turn_id, after)).fetchall()
        finally:
            db.execute("COMMIT")
        return (row[0] if row else None), events

    def follow(self, turn_id: str, after: int = 0, poll_seconds: float = 0.05,
               idle_seconds: float = 15.0) -> Iterator[tuple[int, str, str] | None]:
        """Every event of the turn after ``after`` as it is written, until the turn is
        finished and all its events were given. Yields None after ``idle_seconds`` without
        an event (a keep-alive for the caller to send). A turn that does not exist yields
        nothing. Polls the file every ``poll_seconds`` (sooner when this process writes the
        turn); checks for a stale owner while idle.
        """
        with self._signals_lock:
            signal = self._signals.get(turn_id)
            if signal is None:
                signal = self._signals[turn_id] = threading.Condition()
        quiet_since = time.monotonic()
        while True:
            status, events = self.read(turn_id, after)
            for event in events:
                yield event
                after = event[0]
            if status is None or status != RUNNING:
                return
            now = time.monotonic()
            if events:
                quiet_since = now
            elif now - quiet_since >= idle_seconds:
                quiet_since = now
                self.reap_stale()
                yield None
            with signal:
                signal.wait(poll_seconds)


def _dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)
