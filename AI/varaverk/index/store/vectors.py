"""The vector side of the index: which vectors may be stored and ranked, how they are stored
(BLOBs), and how they are read back as one matrix for numpy scoring (``VectorTable``): the
vectors in batches of one aggregate row each, the short string columns ranking filters on
from the numbers stored at write time (``row_strings``), and titles only for the rows a
question ranks (``RowTitles``).

Vector validity, the one home: a vector may be stored and ranked when every value is finite
and its L2 norm is finite and above ``MIN_NORM`` (a float32 vector that cannot be told from
zero would rank as noise). Decided by ``usable_rows`` on write (``Index.write``, which refuses
the rest; the indexer and the embedders ask ``vector_problem`` first, so that one bad vector
fails its own chunk) and on read (``read_vector_table`` leaves the rest out).

numpy is imported only inside these functions: the no-op refresh opens the index too and
never touches a vector.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence

from varaverk.index.store.errors import IndexMismatch

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

MIN_NORM = 1e-6


class VectorTable(NamedTuple):
    """All usable embeddings of the index, ready for numpy scoring.

    Attributes:
        ids: chunk ids, int64 ``(n,)``.
        matrix: float32 ``(n, dim)``, C-contiguous, rows L2-normalised (cosine = dot product).
        kinds: the chunk kinds, ``(n,)`` str array aligned with ``ids``.
        sections: the chunk sections aligned with ``ids``, a ``NumberedColumn``.
        dimension: ``dim``; backend and model: the embedder that made the vectors.
        excluded: ids of stored rows left out (zero, non-finite or wrong-length vectors).
        titles: the chunk titles aligned with ``ids``, a ``RowTitles`` (each read when first
            asked for; search ranks on them before reading any chunk text), or None.
        sources: the chunks' source names, ``(n,)`` str array aligned with ``ids``.
        paths: the chunks' file paths aligned with ``ids``, a ``NumberedColumn`` (per-file
            score aggregation).
        path_numbers, section_numbers: int64 ``(n,)``, each row's path (section) numbered in
            order of first appearance (the first row's is 0), when the reader made them: a
            file's or section's rows found without comparing strings.
    """

    ids: "np.ndarray"
    matrix: "np.ndarray"
    kinds: "np.ndarray"
    sections: "NumberedColumn | np.ndarray"
    dimension: int
    backend: str
    model: str
    excluded: tuple[int, ...] = ()
    titles: "RowTitles | None" = None
    sources: "np.ndarray | None" = None
    paths: "NumberedColumn | np.ndarray | None" = None
    path_numbers: "np.ndarray | None" = None
    section_numbers: "np.ndarray | None" = None


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


def vector_blobs(vectors: list) -> tuple[list[bytes], int]:
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


def read_vector_table(conn, meta: dict[str, str],
                      read_titles: Callable[[Sequence[int] | None], dict[int, str]] | None = None
                      ) -> VectorTable:
    """The ``VectorTable`` of the chunks ``conn`` holds under ``meta``, in one read
    transaction: ``VECTOR_BATCH_BYTES`` of vectors per SQLite read (``_batch``), each copied
    into one preallocated float32 matrix; kinds, sections and paths from the numbers stored
    at write time (``row_strings``: a table holds few of each; their arrays are made from the
    distinct values); sources from the source index (``_row_sources``).
    Titles are read by id when ranking first asks for a row's (``RowTitles`` over
    ``read_titles``: ``{id: title}`` of the ids given, or of every chunk for None; without it
    the table has no titles).

    Rows whose BLOB is not ``embed_dimension`` float32 values, or whose vector is zero or
    non-finite, are excluded: they can never rank, and no dot product ever runs between
    vectors of different lengths.
    """
    import numpy as np

    from varaverk.index.store.row_strings import numbered_columns

    dim = int(meta.get("embed_dimension") or 0)
    conn.execute("BEGIN")
    try:
        ids, matrix, keep, excluded = _vector_block(conn, dim)
        if not keep.all():
            excluded += ids[~keep].tolist()
            ids, matrix = ids[keep], matrix[keep]
        sources = _row_sources(conn, ids)
        kinds, sections, paths = (NumberedColumn(*column)
                                  for column in numbered_columns(conn, ids))
    finally:
        conn.execute("COMMIT")
    return VectorTable(
        ids=ids,
        matrix=np.ascontiguousarray(matrix, dtype=np.float32),
        kinds=np.asarray(kinds),
        sections=sections,
        dimension=dim,
        backend=meta.get("embed_backend", ""),
        model=meta.get("embed_model", ""),
        excluded=tuple(sorted(excluded)),
        titles=None if read_titles is None else RowTitles(ids, read_titles),
        sources=sources,
        paths=paths,
        path_numbers=paths.numbers,
        section_numbers=sections.numbers,
    )


# Bytes of vectors per read of the vector table: one aggregate row of this many at a time, so
# the BLOBs are never all held twice and no Python object is made per row. Small enough that
# the aggregate's buffers are reused from the heap: batches of several MB were mapped and
# faulted in afresh each (bench_opening's first question).
VECTOR_BATCH_BYTES = 1 << 19
# One batch in id order as one value per column: row ids, BLOB lengths in bytes and the
# BLOBs back to back (group_concat copies a BLOB's bytes as they are: the lengths tell where
# each ends). A batch whose parts do not add up is read row by row instead (``_BATCH_ROWS``).
# The inner query names its columns: with ``*`` SQLite copies every column of every row (the
# texts too) into the subquery's result.
_BATCH = ("SELECT count(*), max(id), group_concat(id), group_concat(length(CAST(vec AS BLOB))),"
          " CAST(group_concat(CAST(vec AS BLOB), '') AS BLOB)"
          " FROM (SELECT id, vec FROM chunks WHERE id > ? ORDER BY id LIMIT ?)")
_BATCH_ROWS = "SELECT id, CAST(vec AS BLOB) FROM chunks WHERE id > ? ORDER BY id LIMIT ?"


def _vector_block(conn, dim: int
                  ) -> tuple["np.ndarray", "np.ndarray", "np.ndarray", list[int]]:
    """``(ids int64 (n,) ascending, float32 (n, dim) matrix, bool (n,) usable_rows of each,
    excluded ids)``: every stored vector of ``dim`` float32 values copied into one
    preallocated matrix, ``VECTOR_BATCH_BYTES`` of them per SQLite read; ids of BLOBs of
    another length are excluded."""
    import numpy as np

    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0] if dim else 0
    matrix = _zeroed_matrix(total, dim)
    ids = np.empty(total, dtype=np.int64)
    excluded: list[int] = []
    usable: list["np.ndarray"] = []
    whole = conn.execute("PRAGMA encoding").fetchone()[0].upper() == "UTF-8"
    per_batch = max(1, VECTOR_BATCH_BYTES // max(1, dim * 4))
    at, after = 0, -(1 << 63)
    while at + len(excluded) < total:
        batch = _batch(conn, after, min(per_batch, total - at - len(excluded)), whole)
        if batch is None:
            break
        after, got, lengths, blob = batch
        right = lengths == dim * 4
        if not right.all():
            excluded += got[~right].tolist()
            blob = b"".join(blob[e - dim * 4:e] for e in np.cumsum(lengths)[right].tolist())
            got = got[right]
        vectors = np.frombuffer(blob, dtype="<f4").reshape(-1, dim)
        usable.append(usable_rows(vectors))     # while the batch is in the cache
        ids[at:at + got.size] = got
        matrix[at:at + got.size] = vectors
        at += got.size
    keep = np.concatenate(usable) if usable else np.zeros(0, dtype=bool)
    return ids[:at], matrix[:at], keep, excluded


# madvise(2) advice that faults a mapping's pages in at once, writable (Linux 5.14+, the same
# number on every architecture); the Python 3.11 mmap module has no name for it.
_MADV_POPULATE_WRITE = 23


def _zeroed_matrix(rows: int, dim: int) -> "np.ndarray":
    """float32 ``(rows, dim)`` zeros on plain pages, faulted in by one system call where the
    kernel can (else on first write)."""
    import mmap

    import numpy as np

    if not rows * dim:
        return np.zeros((rows, dim), dtype="<f4")
    # Not np.empty: numpy asks the kernel to back a large array with huge pages, and a host
    # that compacts memory for them on demand (transparent_hugepage defrag "madvise") spent
    # several times the copy itself faulting them in (bench_opening). Plain pages faulted
    # one by one cost more than in one call.
    pages = mmap.mmap(-1, rows * dim * 4)
    if sys.platform.startswith("linux"):
        try:
            pages.madvise(getattr(mmap, "MADV_POPULATE_WRITE", _MADV_POPULATE_WRITE))
        except OSError:     # an older kernel: the pages fault in as they are written
            pass
    return np.frombuffer(pages, dtype="<f4").reshape(rows, dim)


def _row_sources(conn, ids: "np.ndarray") -> "np.ndarray":
    """str (n,): the source name of each chunk in ``ids`` (int64 ascending, read in the same
    transaction). Read from the source index, not row by row with the vectors (a string per
    row through SQLite costs the first question more than the index): a count per source,
    then the ids of every source but the most common one, whose name the other rows take."""
    import numpy as np

    if not ids.size:     # no chunks, or no vectors of a known dimension
        return np.zeros(0, dtype=str)
    counts = conn.execute("SELECT source, count(*) FROM chunks GROUP BY source"
                          " ORDER BY count(*) DESC, source").fetchall()
    names = np.array([name for name, _ in counts] or [""], dtype=str)
    numbers = np.zeros(ids.size, dtype=np.int64)
    for number, (name, _) in enumerate(counts[1:], start=1):
        found = conn.execute("SELECT group_concat(id) FROM chunks WHERE source = ?",
                             (name,)).fetchone()[0]
        held = np.fromstring(found, dtype=np.int64, sep=",")
        rows = np.minimum(np.searchsorted(ids, held), ids.size - 1)
        numbers[rows[ids[rows] == held]] = number
    return names[numbers]


def _batch(conn, after: int, limit: int, whole: bool
           ) -> tuple[int, "np.ndarray", "np.ndarray", bytes] | None:
    """``(largest id, ids int64, BLOB lengths int64, the BLOBs joined)`` of the next
    ``limit`` rows with an id above ``after``; None when there are none. ``whole``: read
    them as one aggregate (``_BATCH``; the database's text is UTF-8, so BLOB bytes pass
    unchanged), else row by row."""
    import numpy as np

    if whole:
        count, last, ids, lengths, blob = conn.execute(_BATCH, (after, limit)).fetchone()
        if not count:
            return None
        got = np.fromstring(ids, dtype=np.int64, sep=",")
        sizes = np.fromstring(lengths or "", dtype=np.int64, sep=",")
        # SQLite promises no order inside an aggregate: the batch must come back in id order
        if (got.size == sizes.size == count and int(sizes.sum()) == len(blob or b"")
                and (got[1:] > got[:-1]).all()):
            return last, got, sizes, blob or b""
    rows = conn.execute(_BATCH_ROWS, (after, limit)).fetchall()
    if not rows:
        return None
    return (rows[-1][0], np.array([r[0] for r in rows], dtype=np.int64),
            np.array([len(r[1]) for r in rows], dtype=np.int64), b"".join(r[1] for r in rows))


class NumberedColumn(Sequence[str]):
    """A string column of the vector table held as its distinct values and one number per
    row (a str array of every row costs the longest value's width on each).

    ``distinct``: str (d,); ``numbers``: int64 (n,), each row's index into ``distinct``.
    ``np.asarray`` of it is the str array of every row.
    """

    __slots__ = ("distinct", "numbers")

    def __init__(self, distinct: "np.ndarray", numbers: "np.ndarray") -> None:
        self.distinct = distinct
        self.numbers = numbers

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, row):
        found = self.distinct[self.numbers[row]]
        return str(found) if found.ndim == 0 else found

    def __array__(self, dtype=None, copy=None) -> "np.ndarray":
        values = self.distinct[self.numbers]
        return values if dtype is None else values.astype(dtype)

    def tolist(self) -> list[str]:
        """Every row's value, in row order."""
        return self.distinct[self.numbers].tolist()


class RowTitles(Sequence[str]):
    """The titles of a vector table's rows (ranking names a row before reading its chunk),
    each read from the index by id when first asked for and kept: holding a title per row
    would cost every row memory and the first question a pass over every title.

    ``read(ids)``: ``{id: title}`` of those ids (of every chunk for None), e.g.
    ``Index.titles``. Reading a row another thread is reading costs a second read, never a
    wrong title.
    """

    __slots__ = ("ids", "_read", "_known")

    def __init__(self, ids: "np.ndarray",
                 read: Callable[[Sequence[int] | None], dict[int, str]]) -> None:
        self.ids = ids
        self._read = read
        self._known: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, row):
        if not isinstance(row, int):
            row = range(len(self))[row] if isinstance(row, slice) else int(row)
            if isinstance(row, range):
                return [self[r] for r in row]
        title = self._known.get(row)
        if title is None:
            cid = int(self.ids[row])
            title = self._known[row] = self._read([cid]).get(cid, "")
        return title

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        """Every row's title, in row order (one read of every title)."""
        found = self._read(None)
        return [found.get(cid, "") for cid in self.ids.tolist()]
