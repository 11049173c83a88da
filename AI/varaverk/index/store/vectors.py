"""The vector side of the index: which vectors may be stored and ranked, how they are stored
(BLOBs), and how they are read back as one matrix for numpy scoring (``VectorTable``).

Vector validity, the one home: a vector may be stored and ranked when every value is finite
and its L2 norm is finite and above ``MIN_NORM`` (a float32 vector that cannot be told from
zero would rank as noise). Decided by ``usable_rows`` on write (``Index.write``, which refuses
the rest; the indexer and the embedders ask ``vector_problem`` first, so that one bad vector
fails its own chunk) and on read (``read_vector_table`` leaves the rest out).

numpy is imported only inside these functions: the no-op refresh opens the index too and
never touches a vector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from varaverk.index.store.errors import IndexMismatch

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

MIN_NORM = 1e-6

# The rows ``read_vector_table`` is built from, in its order.
VECTOR_ROWS = "SELECT id, kind, section, vec, title, source, path FROM chunks ORDER BY id"


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
        path_numbers, section_numbers: int64 ``(n,)``, each row's path (section) numbered in
            order of first appearance (the first row's is 0), when the reader made them: a
            file's or section's rows found without comparing strings.
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


def read_vector_table(conn, meta: dict[str, str]) -> VectorTable:
    """The ``VectorTable`` of the chunks ``conn`` holds (``VECTOR_ROWS``, in one read
    transaction) under ``meta``: each vector copied straight into one preallocated float32
    matrix as its row is read, so the BLOBs are never all held at once (nor joined); kinds,
    sections, sources and paths numbered as they are read (a table holds few of each), and
    their arrays made from the distinct values.

    Rows whose BLOB is not ``embed_dimension`` float32 values, or whose vector is zero or
    non-finite, are excluded: they can never rank, and no dot product ever runs between
    vectors of different lengths.
    """
    import numpy as np

    dim = int(meta.get("embed_dimension") or 0)
    width = dim * 4
    ids: list[int] = []
    excluded: list[int] = []
    titles: list[str] = []
    numbered = tuple(_Numbering() for _ in range(4))     # kind, section, source, path
    kinds, sections, sources, paths = (n.number for n in numbered)
    conn.execute("BEGIN")
    try:
        n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0] if dim else 0
        matrix = np.empty((n, dim), dtype="<f4")
        out = memoryview(matrix.reshape(-1)).cast("B")
        at = 0
        for cid, kind, section, vec, title, source, path in conn.execute(VECTOR_ROWS):
            if len(vec) != width or len(ids) == n:
                excluded.append(cid)
                continue
            out[at:at + width] = vec
            at += width
            ids.append(cid)
            titles.append(title)
            kinds(kind)
            sections(section)
            sources(source)
            paths(path)
    finally:
        conn.execute("COMMIT")
    matrix = matrix[:len(ids)]
    keep = usable_rows(matrix)
    if not keep.all():
        excluded += [ids[i] for i in np.flatnonzero(~keep)]
        matrix = matrix[keep]
    ids_array = np.array(ids, dtype=np.int64)[keep]
    kinds, sections, sources, paths = (n.values(keep) for n in numbered)
    return VectorTable(
        ids=ids_array,
        matrix=np.ascontiguousarray(matrix, dtype=np.float32),
        kinds=kinds[0],
        sections=sections[0],
        dimension=dim,
        backend=meta.get("embed_backend", ""),
        model=meta.get("embed_model", ""),
        excluded=tuple(sorted(excluded)),
        titles=np.array(titles, dtype=str)[keep],
        sources=sources[0],
        paths=paths[0],
        path_numbers=paths[1],
        section_numbers=sections[1],
    )


class _Numbering:
    """The values of one column as read, each distinct value numbered in order of first
    appearance (``number`` per row), and the column's arrays made from them (``values``)."""

    def __init__(self) -> None:
        self.known: dict[str, int] = {}
        self.numbers: list[int] = []
        known, append = self.known, self.numbers.append
        self.number = lambda value: append(known.setdefault(value, len(known)))

    def values(self, keep: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
        """``(str array, int64 numbers renumbered in order of first appearance)`` of the
        rows ``keep`` leaves (bool, one per row read)."""
        import numpy as np

        numbers = np.array(self.numbers, dtype=np.int64)[keep]
        distinct = np.array(list(self.known) or [""], dtype=str)
        if not keep.all():   # a left-out row may have held a value's first appearance
            held, first, numbers = np.unique(numbers, return_index=True, return_inverse=True)
            order = np.argsort(first)
            distinct = distinct[held[order]]
            numbers = np.argsort(order)[numbers.reshape(-1)]
        return distinct[numbers], numbers
