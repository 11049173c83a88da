"""Scoring maths on plain numpy arrays: cosine scores, hard-filter masks, top-k, id sets.

The dense half of a search is ONE matrix-vector product: every stored row is L2-normalised,
so a row's dot product with the unit query vector is its cosine similarity. From
``PARALLEL_FROM`` rows the product is split in row blocks between the calling thread and a
process-wide thread pool (made on first use, remade in a forked child). Top-k is
``np.argpartition`` (on a large table after a sampled threshold) then a sort of the k
survivors: O(n) plus O(k log k), no Python loop over rows.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

# From this many rows top_k selects on a sampled threshold first; below it one partition of
# every score costs less than the sampling pass's extra array calls (bench_scoring).
SAMPLE_FROM = 8192
# From this many rows the dense product is shared between up to MAX_DENSE_THREADS cores: one
# core's memory bandwidth limits it there, while below it handing a block to another thread
# costs more than it saves (bench_scoring).
PARALLEL_FROM = 32768
# From this many scores the lexical pool's selection (``at_least_kth``) samples a threshold
# first: it runs right after the dense product has streamed the matrix through the caches,
# where one partition of a few thousand scores costs more than the sampling (tests/RESULTS.md,
# the perfq2 entry).
SAMPLE_KTH_FROM = 1024
MAX_DENSE_THREADS = 4

# Shared empty results (read-only: a caller that needs to write makes its own array).
EMPTY_IDS = np.zeros(0, dtype=np.int64)
EMPTY_SCORES = np.zeros(0, dtype=np.float64)
EMPTY_IDS.flags.writeable = False
EMPTY_SCORES.flags.writeable = False


def dense_scores(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row with the query: one matrix-vector product.

    Args:
        matrix: float32 (n, dim), C-contiguous, rows L2-normalised (zero rows allowed: score 0).
        query: float32 (dim,), L2-normalised.

    Returns:
        float32 (n,) scores; the same values whether or not the rows were split across threads.
    """
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    query = query.astype(matrix.dtype, copy=False)
    # vecdot takes one vector dot product per row, each on one thread. The BLAS matrix-vector
    # product would wake its thread pool for every query, which costs milliseconds whenever
    # the pool has gone to sleep (a query at a time, a busy host); einsum's own loop is slower
    # than the per-row dot (tests/benchmarks/bench_scoring.py).
    if matrix.shape[0] < PARALLEL_FROM:
        return np.vecdot(matrix, query)
    workers = _dense_workers()
    return np.vecdot(matrix, query) if workers is None else _shared_vecdot(matrix, query,
                                                                            workers)


def _shared_vecdot(matrix: np.ndarray, query: np.ndarray, workers: "_Workers") -> np.ndarray:
    """``np.vecdot(matrix, query)`` in contiguous row blocks, one in the calling thread and
    one per pool thread: a large matrix is read faster by several cores than by one (the
    product is bound by memory bandwidth), vecdot releases the GIL, and every row's dot is
    the same computation as in one call."""
    out = np.empty(matrix.shape[0], dtype=matrix.dtype)
    bounds = np.linspace(0, matrix.shape[0], workers.max_workers + 2).astype(int).tolist()
    (a, b), *rest = zip(bounds[:-1], bounds[1:])
    pending = [workers.pool.submit(np.vecdot, matrix[lo:hi], query, out=out[lo:hi])
               for lo, hi in rest]
    np.vecdot(matrix[a:b], query, out=out[a:b])
    for f in pending:
        f.result()
    return out


class _Workers(NamedTuple):
    pool: ThreadPoolExecutor
    max_workers: int


def _dense_workers() -> _Workers | None:
    """The thread pool that shares a large product with the calling thread (one thread less
    than the cores this process may use, at most ``MAX_DENSE_THREADS`` in all); None on a
    single core. Made on first use, once per process."""
    with _WORKERS_LOCK:
        return _make_workers()


@functools.lru_cache(maxsize=1)
def _make_workers() -> _Workers | None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1)
    helpers = min(cores, MAX_DENSE_THREADS) - 1
    return _Workers(ThreadPoolExecutor(helpers, "dense"), helpers) if helpers > 0 else None


def _after_fork_in_child() -> None:
    # A forked child (a gunicorn worker) has none of its parent's threads, and the lock may
    # have been held by one of them: it makes its own of both.
    global _WORKERS_LOCK
    _WORKERS_LOCK = threading.Lock()
    _make_workers.cache_clear()


_WORKERS_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def filter_mask(kinds: np.ndarray, sections_upper: np.ndarray, kind: str | None = None,
                section: str | None = None, base: np.ndarray | None = None) -> np.ndarray:
    """Compose the hard filters into one boolean mask (AND).

    Args:
        kinds: (n,) string array of chunk kinds, from the vector table.
        sections_upper: (n,) string array of section names in upper case (the vector table's,
            upper-cased once per table: ``TableCache.sections_upper``).
        kind: keep only this kind (exact, e.g. "header"); None keeps all.
        section: keep only this section, compared case-insensitively; None keeps all.
        base: a mask to start from (e.g. ``store.usable_rows``); None starts from all True.

    Returns:
        bool (n,), a new array (``base`` is never changed).
    """
    mask = np.ones(len(kinds), dtype=bool) if base is None else base.copy()
    if kind:
        mask &= kinds == kind
    if section:
        mask &= sections_upper == section.strip().upper()
    return mask


def top_k(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Row indices of the k best scores, best first, skipping masked-out rows.

    Args:
        scores: float (n,); with ``mask`` a non-finite score never ranks either, without it
            every score is taken as it is (the vector table's rows and a query vector are
            finite, so the cosines are).
        k: how many (fewer when fewer rows are allowed).
        mask: bool (n,), the rows that may rank; None: every row.

    ``np.argpartition`` selects the k best in O(n) (from ``SAMPLE_FROM`` rows on, among the
    scores above a threshold taken from every 16th score); only those k are sorted. Ties keep
    the lower row index first (stable), so results are deterministic.

    Returns:
        int64 (≤ k,) row indices.
    """
    if mask is None:
        return _top(scores, k)
    # Only the allowed rows take part: masked-out rows set to -inf would still be values the
    # partition works through, and a selective filter leaves mostly those.
    rows = np.flatnonzero(mask & np.isfinite(scores))
    return rows[_top(scores[rows], k)]


def _top(s: np.ndarray, k: int) -> np.ndarray:
    """int64 indices of the k largest values of ``s`` (fewer when it is shorter), best
    first, ties lower index first (``top_k`` without a mask)."""
    k = min(k, s.size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    candidates = _above_sampled_threshold(s, k)
    if candidates is not None:
        part = candidates[_best(s[candidates], k)]
    elif k < s.size:
        part = _best(s, k)
    else:
        part = np.arange(s.size)
    return part[np.lexsort((part, -s[part]))]


def at_least_kth(s: np.ndarray, k: int) -> np.ndarray:
    """int64 indices, ascending, of every value of ``s`` ≥ its k-th largest (0 < k < s.size):
    the k best with all their ties (the lexical pool, where equal BM25 scores are common).
    Selected as ``top_k`` selects, so from ``SAMPLE_KTH_FROM`` values among those above a
    sampled threshold."""
    above = _above_sampled_threshold(s, k, SAMPLE_KTH_FROM)
    part = s if above is None else s[above]
    kth = np.partition(part, part.size - k)[part.size - k]
    return np.flatnonzero(s >= kth) if above is None else above[part >= kth]


def _above_sampled_threshold(s: np.ndarray, k: int,
                             start: int = SAMPLE_FROM) -> np.ndarray | None:
    """int64 indices of the values of ``s`` at or above a threshold that at least k of them
    reach, or None when ``s`` is too short to sample (below ``start`` or 16k values) or
    fewer than k reach it. The threshold is the j-th best of every 16th value, which
    leaves about 3k candidates, so the O(n) pass is one comparison instead of a selection
    over every value."""
    if not (k * 16 < s.size and s.size >= start):
        return None
    sample = s[::16]
    j = min(sample.size, -(-3 * k // 16) + 1)
    threshold = np.partition(sample, sample.size - j)[sample.size - j]
    candidates = np.flatnonzero(s >= threshold)
    return candidates if candidates.size >= k else None


def _best(s: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of ``s`` (0 < k ≤ s.size), in no order."""
    return np.argpartition(s, s.size - k)[s.size - k:]


def union_ids(*ids: np.ndarray) -> np.ndarray:
    """The distinct values of int64 arrays, ascending (``np.unique`` without its overhead)."""
    out = np.concatenate(ids)
    if out.size < 2:
        return out
    out.sort()
    keep = np.empty(out.size, dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def rows_of(table_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """int64 (m,): the row of each id in ``table_ids`` (ascending), -1 where it is absent."""
    if not table_ids.size:
        return np.full(ids.size, -1, dtype=np.int64)
    rows = table_ids.searchsorted(ids)
    np.minimum(rows, table_ids.size - 1, out=rows)
    rows[table_ids[rows] != ids] = -1
    return rows
