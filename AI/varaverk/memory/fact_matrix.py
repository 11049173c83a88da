"""The stored fact vectors as one float32 matrix, kept per memory file for the process.

Recall scores every stored fact, so the matrix must not be read from SQLite per question:
``FactTables`` keeps one ``FactTable`` per memory file (shared by every ``MemoryStore`` of
the process, as the dock opens one per turn) and brings it up to date when the file's write
generation moved: facts are only ever added with their triplet or deleted with it, so the
update reads only facts newer than the newest kept and drops the rows whose triplet is gone.
A change of embedding dimension reads everything again.
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


def _extended(table: FactTable, rows: list[tuple], alive: "np.ndarray") -> FactTable:
    """``table`` without rows of triplets not in ``alive``, plus ``rows`` (id, triplet,
    conversation, vec BLOB), each of the table's dimension."""
    import numpy as np

    keep = np.isin(table.triplet_ids, alive)
    if keep.all() and not rows:
        return table
    if keep.all():
        keep = slice(None)  # nothing forgotten: a view, not a copy of the matrix
    dim = table.matrix.shape[1]
    codes = dict(table.codes)
    new = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").astype(np.float32)
    return FactTable(
        np.concatenate([table.fact_ids[keep], np.array([r[0] for r in rows], np.int64)]),
        np.concatenate([table.triplet_ids[keep], np.array([r[1] for r in rows], np.int64)]),
        np.concatenate([table.conversations[keep],
                        np.array([codes.setdefault(r[2], len(codes)) for r in rows], np.int32)]),
        np.vstack([table.matrix[keep], new.reshape(len(rows), dim)]), codes)


class FactTables:
    """One up-to-date ``FactTable`` per memory file path (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[str, FactTable]] = {}

    def get(self, path: str, generation: str, dim: int,
            read: Callable[[str, tuple], list[tuple]]) -> FactTable:
        """The table of the file at ``path`` as of ``generation``; ``read(sql, params)`` runs
        a query on that file. Facts whose vector is not ``4 * dim`` bytes are left out."""
        import numpy as np

        with self._lock:
            kept = self._tables.get(path)
            if kept is not None and kept[0] == generation:
                return kept[1]
            table = kept[1] if kept is not None else _empty(dim)
            if table.matrix.shape[1] != dim:
                table = _empty(dim)
            newest = int(table.fact_ids[-1]) if len(table.fact_ids) else 0
            rows = read("SELECT f.id, f.triplet, t.conversation, f.vec FROM facts f JOIN "
                        "triplets t ON t.id = f.triplet WHERE f.id > ? ORDER BY f.id",
                        (newest,))
            rows = [r for r in rows if len(r[3]) == 4 * dim]  # never the wrong number of floats
            alive = np.array([r[0] for r in read("SELECT id FROM triplets", ())], np.int64)
            table = _extended(table, rows, alive)
            self._tables[path] = (generation, table)
            return table


FACT_TABLES = FactTables()
