"""The candidate stages of a search: what each retriever proposes before fusion.

- **Dense** (``dense_candidates``): the question embedded once, scored against the whole
  vector table (``scoring.dense_scores``: cosine similarity), the best ``pool`` rows the
  filters allow (``scoring.top_k``).
- **Lexical** (``lexical_candidates``): BM25 over the chunk text and its context trail; it
  finds exact names (``MOVER_STOP_TIMEOUT``) that a small embedder blurs. FTS5 is the index of
  record; the scores are computed in-process from its own postings (``lexical.Bm25``, the same
  numbers as ``Index.fts_search``'s ``bm25()``, without a MATCH per query), and only text that
  FTS5 alone can tokenize (non-ASCII) goes through ``Index.fts_search``.
- **Exact names** (``name_matches``): each name written in the question looked up lexically on
  its own, so its chunk is a candidate even when the rest of the question is about something
  else.
- **Labels** (``label_matches``): BM25 over each chunk's file name, section and title
  (``lexical.LabelBm25``), so a question naming a section finds it although the section's
  body spends its words elsewhere.

Each stage returns a record of its own; none changes another's.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

from varaverk.retrieval.caches import TableCache
from varaverk.retrieval.scoring import (EMPTY_IDS, EMPTY_SCORES, at_least_kth, dense_scores,
                                        rows_of, top_k)
from varaverk.text import fts_terms

log = logging.getLogger(__name__)

POOL = 50                   # candidates taken from each retriever before fusion
LABEL_POOL = 20             # best label matches that join the candidates
NAME_POOL = 20              # chunks each exact name finds lexically
# A lexical pool is selected among the scores at or above its limit-th best first
# (``scoring.at_least_kth``) only from this many times the limit: below it, sorting every
# score costs less than the selection, and the pool is the same either way
# (tests/RESULTS.md, the hyb entry).
SELECT_FROM = 16


class DenseCandidates(NamedTuple):
    """What the dense retriever found for one question.

    Attributes:
        scores: float32 (n,) cosine similarity of every vector-table row; None when the dense
            retriever did not run (lexical mode, no embedder, empty table).
        ids: int64 (m,) chunk ids of the best rows the filters allow, best first.
        values: float64 (m,) their cosines.
        rank: ``ids`` as a list (rank fusion, single-retriever results).
        best: the best cosine among the rows the filters allow (None when none ranked).
    """

    scores: np.ndarray | None
    ids: np.ndarray
    values: np.ndarray
    rank: list[int]
    best: float | None


class LexicalCandidates(NamedTuple):
    """What the lexical retriever found for one question: ``ids`` int64 (m,) and ``scores``
    float64 (m,) BM25 (higher is better), best first; ``rank``: the ids as a list; ``of``:
    {id: BM25}."""

    ids: np.ndarray
    scores: np.ndarray
    rank: list[int]
    of: dict[int, float]


class NameMatches(NamedTuple):
    """What the exact names of a question found lexically: ``ids`` best first per name, in name
    order, each once; ``bm25``: {id: BM25} of the first name that found it."""

    ids: list[int]
    bm25: dict[int, float]


def no_dense() -> DenseCandidates:
    """The record of a dense retriever that did not run."""
    return DenseCandidates(None, EMPTY_IDS, EMPTY_SCORES, [], None)


def no_lexical() -> LexicalCandidates:
    """The record of a lexical retriever that did not run (its own ``of``: never shared)."""
    return LexicalCandidates(EMPTY_IDS, EMPTY_SCORES, [], {})


def dense_candidates(embedder, text: str, table: TableCache, mask: np.ndarray | None,
                     size: int) -> DenseCandidates:
    """The ``size`` best rows for ``text`` by cosine similarity among those ``mask`` allows
    (None: all). Raises what ``embedder.embed_query`` raises (``EmbeddingError``)."""
    vec = np.asarray(embedder.embed_query(text), dtype=np.float32)
    scores = dense_scores(table.table.matrix, vec)
    rows = top_k(scores, size, mask)
    ids = table.ids[rows]
    return DenseCandidates(scores, ids, scores[rows].astype(np.float64), ids.tolist(),
                           float(scores[rows[0]]) if rows.size else None)


def lexical_candidates(text: str, terms: tuple[str, ...], table: TableCache,
                       mask: np.ndarray | None, size: int) -> LexicalCandidates:
    """The ``size`` best chunks for the words ``terms`` (``fts_terms`` of ``text``) by BM25,
    among those ``mask`` allows (``lexical_scored``)."""
    ids, scores = lexical_scored(text, size, table, mask, terms)
    rank = ids.tolist()
    return LexicalCandidates(ids, scores, rank, dict(zip(rank, scores.tolist())))


def name_matches(names: tuple[str, ...], table: TableCache,
                 mask: np.ndarray | None) -> NameMatches:
    """The chunks each exact name finds lexically on its own (``NAME_POOL`` per name)."""
    ids: list[int] = []
    bm25_of: dict[int, float] = {}
    for name in names:
        found, scores = lexical_scored(name, NAME_POOL, table, mask)
        for cid, bm25 in zip(found.tolist(), scores.tolist()):
            if cid not in ids:
                ids.append(cid)
            bm25_of.setdefault(cid, bm25)
    return NameMatches(ids, bm25_of)


def label_matches(text: str, table: TableCache,
                  mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The best ``LABEL_POOL`` label matches the filters allow: ``(vector-table rows int64,
    label BM25 float64)``, in no order; empty arrays when no label matches or the table has
    no labels."""
    labels = table.labels()
    if labels is None:
        return EMPTY_IDS, EMPTY_SCORES
    rows, scores = labels.score(text)
    if rows.size and mask is not None:
        keep = mask[rows]
        rows, scores = rows[keep], scores[keep]
    if not rows.size:
        return EMPTY_IDS, EMPTY_SCORES
    if rows.size > LABEL_POOL:
        best = np.argpartition(-scores, LABEL_POOL - 1)[:LABEL_POOL]
        rows, scores = rows[best], scores[best]
    return rows, scores


def lexical_scored(text: str, limit: int, table: TableCache, mask: np.ndarray | None,
                   terms: tuple[str, ...] | list[str] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """BM25 hits for free text, best first (ties: lower id first), at most ``limit``,
    restricted to rows the mask allows (None: every row): ``(chunk ids int64, scores
    float64)``. ``terms``: ``fts_terms(text)`` when the caller has it already.

    Scored in-process from FTS5's own postings (``lexical.Bm25``); text only FTS5 can
    tokenize goes to ``Index.fts_search``, which makes it a safe MATCH expression. Chunks
    without a vector row (none in a healthy index) are kept and filtered later by their own
    kind/section.
    """
    if not text:
        return EMPTY_IDS, EMPTY_SCORES
    bm25 = table.bm25()
    scored = None
    if bm25 is not None:
        try:
            scored = bm25.score_rows(fts_terms(text) if terms is None else terms)
        except Exception as exc:  # an unreadable posting costs the fast path, not the query
            log.warning("in-process BM25 failed (%s); using FTS5", exc)
    if scored is None:
        found = _lexical_fts(text, limit, table, mask)
        return (np.array([c for c, _ in found], dtype=np.int64),
                np.array([b for _, b in found], dtype=np.float64))
    at, scores = scored     # positions in bm25.ids, ascending: in id order
    if not at.size:
        return EMPTY_IDS, EMPTY_SCORES
    ids = table.ids
    if ids.size and mask is not None:
        rows = bm25.ids[at]
        pos = np.minimum(np.searchsorted(ids, rows), ids.size - 1)
        in_table = ids[pos] == rows
        allowed = ~in_table | mask[pos]
        at, scores = at[allowed], scores[allowed]
    if at.size > limit * SELECT_FROM:
        keep = at_least_kth(scores, limit)
        at, scores = at[keep], scores[keep]
    order = np.lexsort((at, -scores))[:limit]
    return bm25.ids[at[order]], scores[order].astype(np.float64, copy=False)


def _lexical_fts(text: str, limit: int, table: TableCache,
                 mask: np.ndarray | None) -> list[tuple[int, float]]:
    """``lexical_scored`` through an FTS5 MATCH, as ``[(chunk id, BM25)]`` best first (the
    reference path; non-ASCII queries)."""
    try:
        found = table.index.fts_search(text, limit * 2)
    except Exception as exc:  # a bad MATCH must cost the lexical half, not the query
        log.warning("lexical search failed (%s); using dense results only", exc)
        return []
    # A chunk without a vector row is kept (filtered later by its own kind and section).
    rows = (rows_of(table.ids, np.array([c for c, _ in found], dtype=np.int64))
            if mask is not None else None)
    out = []
    for i, (cid, bm25) in enumerate(found):
        if rows is not None and rows[i] >= 0 and not mask[rows[i]]:
            continue
        out.append((int(cid), float(bm25)))
        if len(out) >= limit:
            break
    return out
