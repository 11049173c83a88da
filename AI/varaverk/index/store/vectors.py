"""The vector side of the index: which vectors may be stored and ranked, how they are stored
(BLOBs), and how they are read back as one matrix for numpy scoring (``VectorTable``).

Vector validity, the one home: a vector may be stored and ranked when every value is finite
and its L2 norm is finite and above ``MIN_NORM`` (a float32 vector that cannot be told from
zero would rank as noise). Decided by ``usable_rows`` on write (``Index.write``, which refuses
the rest; the indexer and the embedders ask ``vector_problem`` first, so that one bad vector
fails its own chunk) and on read (``vector_table`` leaves the rest out).

numpy is imported only inside these functions: the no-op refresh opens the index too and
never touches a vector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from varaverk.index.store.errors import IndexMismatch

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

MIN_NORM = 1e-6

# The rows ``vector_table`` is built from, in its order.
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


def vector_table(rows: list[tuple], meta: dict[str, str]) -> VectorTable:
    """The ``VectorTable`` of ``rows`` (as ``VECTOR_ROWS`` selects them) under ``meta``.

    Rows whose BLOB is not ``embed_dimension`` float32 values, or whose vector is zero or
    non-finite, are excluded: they can never rank, and no dot product ever runs between
    vectors of different lengths.
    """
    import numpy as np

    dim = int(meta.get("embed_dimension") or 0)
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
    return VectorTable(
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
