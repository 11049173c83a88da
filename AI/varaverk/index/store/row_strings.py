"""The string columns ranking numbers, read as numbers: each chunk's kind, section and path
are stored at write time as ids into ``row_strings`` (``chunk_numbers``, kept in step by
triggers on ``chunks``: ``varaverk.index.store.schema``, migration 6), so opening an index
reads one small integer table and the distinct strings, never three strings per row.

numpy is imported only inside these functions (the no-op refresh opens the index too).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from varaverk.index.store.errors import IndexCorrupt
from varaverk.index.store.schema import NUMBERED_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

# Between the distinct strings in one aggregate (a string holding it is read row by row).
_SEP = "\x1f"


def numbered_columns(conn: sqlite3.Connection, ids: "np.ndarray"
                     ) -> list[tuple["np.ndarray", "np.ndarray"]]:
    """Per ``NUMBERED_COLUMNS`` (kind, section, path), ``(distinct values str (d,), int64
    (n,) each row's value's number)`` for the chunks ``ids`` (int64 ascending; read in the
    caller's transaction), each column's values numbered in order of first appearance among
    ``ids`` (the first row's is 0; with no rows, ``distinct`` is ``[""]``).

    Raises IndexCorrupt when ``chunk_numbers`` lacks one of ``ids`` (a file written without
    its triggers: ``ai-index --force`` rebuilds it).
    """
    import numpy as np

    count, held, *codes = conn.execute(
        "SELECT count(*), group_concat(id), "
        + ", ".join(f"group_concat({c})" for c in NUMBERED_COLUMNS)
        + " FROM (SELECT * FROM chunk_numbers ORDER BY id)").fetchone()
    held = _ints(held)
    rows = np.minimum(np.searchsorted(held, ids), max(held.size - 1, 0))
    if held.size != count or not np.array_equal(held[rows] if held.size else held, ids):
        raise IndexCorrupt("the index's chunk numbers are out of step with its chunks "
                           "— rebuild it with ai-index --force")
    strings = _strings(conn)
    try:
        return [_first_appearance(_ints(c)[rows] if ids.size else np.zeros(0, dtype=np.int64),
                                  strings) for c in codes]
    except (KeyError, IndexError):   # a number no stored string has
        raise IndexCorrupt("the index's chunk numbers name strings it does not hold "
                           "— rebuild it with ai-index --force") from None


def _ints(joined: str | None) -> "np.ndarray":
    """int64: the comma-joined integers of one aggregate (none for NULL)."""
    import numpy as np

    return np.fromstring(joined or "", dtype=np.int64, sep=",")


def _strings(conn: sqlite3.Connection) -> dict[int, str]:
    """``{id: value}`` of every stored string: one aggregate, or a row each when a value
    holds the separator."""
    count, ids, values = conn.execute(
        f"SELECT count(*), group_concat(id), group_concat(value, char({ord(_SEP)})) "
        "FROM row_strings").fetchone()
    found = (values or "").split(_SEP) if count else []
    if len(found) != count:
        return dict(conn.execute("SELECT id, value FROM row_strings"))
    return dict(zip(_ints(ids).tolist(), found))


def _first_appearance(codes: "np.ndarray", strings: dict[int, str]
                      ) -> tuple["np.ndarray", "np.ndarray"]:
    """``(distinct values str (d,), int64 (n,) numbers)`` of one column given as string ids
    (``codes``, one per row): the distinct values in order of first appearance, each row
    numbered by its value's place among them. Linear in the rows; sorts only the distinct."""
    import numpy as np

    if not codes.size:
        return np.array([""], dtype=str), codes
    first = np.full(int(codes.max()) + 1, codes.size, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(codes.size, dtype=np.int64))
    present = np.flatnonzero(first < codes.size)
    order = present[np.argsort(first[present])]
    place = np.empty(first.size, dtype=np.int64)
    place[order] = np.arange(order.size, dtype=np.int64)
    distinct = np.array([strings[i] for i in order.tolist()], dtype=str)
    return distinct, place[codes]
