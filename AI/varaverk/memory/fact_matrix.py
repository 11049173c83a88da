"""The stored fact vectors as one float32 matrix, kept per memory file for the process.

Recall scores every stored fact, so the matrix must not be read from SQLite per question:
``FactTables`` keeps one ``FactTable`` per memory file (shared by every ``MemoryStore`` of
the process, as the dock opens one per turn) and brings it up to date when the file's write
generation moved: facts are only ever added with their triplet or deleted with it, so the
update reads only facts newer than the newest kept, writes them into spare rows of the
matrix's buffer (no copy of the whole matrix per remembered turn), and drops the rows whose
triplet is gone. A change of embedding dimension reads everything again.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


class FactTable(NamedTuple):
    """Every stored fact vector as one matrix, for numpy scoring.

    Attributes:
        fact_ids, triplet_ids: int64 ``(n,)``, ascending fact ids.
        conversations: int32 ``(n,)``, each fact's conversation as its code in ``codes``
            (integers compare far faster than strings when a conversation is masked out).
        matrix: float32 ``(n, dim)``, rows L2-normalised (cosine similarity = dot product).
        codes: conversation id → code.
    """

    fact_ids: "np.ndarray"
    triplet_ids: "np.ndarray"
    conversations: "np.ndarray"
    matrix: "np.ndarray"
    codes: dict[str, int]


def _empty(dim: int) -> FactTable:
    import numpy as np
    return FactTable(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32),
                     np.zeros((0, dim), np.float32), {})


def _appended(buffer: "np.ndarray", n: int, new: "np.ndarray") -> tuple:
    """``(buffer, matrix)``: ``new`` rows written after the first ``n`` rows of ``buffer``
    (grown by a quarter when full), and the view of the rows in use. Rows past ``n`` are
    never part of a matrix handed out, so the tables readers hold do not change under them."""
    import numpy as np

    end = n + len(new)
    if end > len(buffer):
        grown = np.empty((end + max(end // 4, 1024), buffer.shape[1]), np.float32)
        grown[:n] = buffer[:n]
        buffer = grown
    buffer[n:end] = new
    return buffer, buffer[:end]


def _extended(table: FactTable, buffer: "np.ndarray", rows: list[tuple],
              alive: "np.ndarray | None") -> tuple[FactTable, "np.ndarray"]:
    """``(table, buffer)``: ``table`` without rows of triplets not in ``alive`` (None: none
    was forgotten), plus ``rows`` (id, triplet, conversation, vec BLOB) of its dimension.
    Adding rows writes only them (into ``buffer``'s spare rows); forgetting compacts."""
    import numpy as np

    keep = slice(None) if alive is None else np.isin(table.triplet_ids, alive)
    if alive is not None:
        living = set(alive.tolist())
        rows = [r for r in rows if r[1] in living]  # forgotten while it was being read
        if keep.all():
            keep = slice(None)
    if isinstance(keep, slice) and not rows:
        return table, buffer
    if not isinstance(keep, slice):  # something was forgotten: a compact copy
        buffer = table.matrix[keep]
    dim = table.matrix.shape[1]
    codes = dict(table.codes)
    new = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").astype(np.float32)
    buffer, matrix = _appended(buffer, len(table.triplet_ids[keep]), new.reshape(len(rows), dim))
    return FactTable(
        np.concatenate([table.fact_ids[keep], np.array([r[0] for r in rows], np.int64)]),
        np.concatenate([table.triplet_ids[keep], np.array([r[1] for r in rows], np.int64)]),
        np.concatenate([table.conversations[keep],
                        np.array([codes.setdefault(r[2], len(codes)) for r in rows], np.int32)]),
        matrix, codes), buffer


class _Kept(NamedTuple):
    generation: str
    table: FactTable
    buffer: "np.ndarray"  # (capacity, dim) float32; table.matrix is its first rows
    triplets: tuple[int, int]  # (count, highest id) of the triplets table when last read


class FactTables:
    """One up-to-date ``FactTable`` per memory file path (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, _Kept] = {}

    def get(self, path: str, generation: str, dim: int,
            read: Callable[[str, tuple], list[tuple]]) -> FactTable:
        """The table of the file at ``path`` as of ``generation``; ``read(sql, params)`` runs
        a query on that file. Facts whose vector is not ``4 * dim`` bytes are left out."""
        with self._lock:
            kept = self._tables.get(path)
            if kept is not None and kept.generation == generation:
                return kept.table
            if kept is None or kept.table.matrix.shape[1] != dim:
                empty = _empty(dim)
                kept = _Kept("", empty, empty.matrix, (0, 0))
            table = kept.table
            newest = int(table.fact_ids[-1]) if len(table.fact_ids) else 0
            rows = read("SELECT f.id, f.triplet, t.conversation, f.vec FROM facts f JOIN "
                        "triplets t ON t.id = f.triplet WHERE f.id > ? ORDER BY f.id",
                        (newest,))
            rows = [r for r in rows if len(r[3]) == 4 * dim]  # never the wrong number of floats
            table, buffer, counted = _brought_up_to_date(kept, rows, read)
            self._tables[path] = _Kept(generation, table, buffer, counted)
            return table


def _brought_up_to_date(kept: _Kept, rows: list[tuple], read) -> tuple:
    """``(table, buffer, (count, highest id))`` of ``kept`` plus ``rows``, less forgotten
    triplets. Triplet ids are never reused (AUTOINCREMENT): when the count grew by exactly
    the triplets added above the highest id seen, none was forgotten, and the list of every
    triplet id is not read."""
    import numpy as np

    count, highest = read("SELECT count(*), coalesce(max(id), 0) FROM triplets", ())[0]
    added = read("SELECT count(*) FROM triplets WHERE id > ?", (kept.triplets[1],))[0][0]
    alive = None
    if kept.triplets[0] + added != count:
        alive = np.array([r[0] for r in read("SELECT id FROM triplets", ())], np.int64)
    table, buffer = _extended(kept.table, kept.buffer, rows, alive)
    return table, buffer, (count, highest)


FACT_TABLES = FactTables()
