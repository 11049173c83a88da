"""Fusion: the candidates of every retriever as one fused score per chunk.

Normalised-score fusion (the default): ``2 × (cos − min)/(max − min)`` over the dense
candidates plus ``BM25 / max BM25`` over the lexical ones, a list a chunk is missing from
adding nothing. Ranks throw away how much better the best dense match is, which matters with a
small embedder whose top cosine is usually right; weighted reciprocal rank fusion
(``fusion="rrf"``, k0 = 60) is kept for comparison. Scores are in RRF units (``UNIT``, one top
rank in one list), the unit every boost is given in.

Two more kinds of evidence are added in the same units: the **label field**
(``candidates.label_matches`` divided by the best label score, × ``label_weight``), and
**per-file aggregation** (``file_gains``: every candidate gains ``file_weight`` × its file's
score, the sum of the file's best ``FILE_TOP`` candidates, divided by the best file's), so a
section of a page that matches as a whole beats a lone look-alike on another page.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from varaverk.retrieval.caches import TableCache
from varaverk.retrieval.candidates import DenseCandidates, LexicalCandidates
from varaverk.retrieval.options import RetrieverOptions
from varaverk.retrieval.scoring import rows_of, union_ids

RRF_K = 60.0
UNIT = 1.0 / (RRF_K + 1.0)  # one top rank in one list: the unit of fused scores and boosts
FILE_TOP = 3                # a file's score: the sum of its best candidates' scores


class Fused(NamedTuple):
    """The candidates of one hybrid query and their fused scores."""

    ids: np.ndarray         # int64 (m,) chunk ids, unique (ascending until ranking orders them)
    rows: np.ndarray        # int64 (m,) each one's vector-table row, -1 for none
    scores: np.ndarray      # float64 (m,) fused score in RRF units, boosts not yet added
    routed: np.ndarray | None = None   # bool (m,) section routing boosts the table's row


def fuse(dense: DenseCandidates, lexical: LexicalCandidates, name_ids: list[int],
         labels: tuple[np.ndarray, np.ndarray], table: TableCache,
         options: RetrieverOptions) -> Fused:
    """Every candidate (dense, lexical, exact-name and label matches) with its fused score:
    the fusion of dense and lexical (``options.fusion``), plus the label field's evidence
    (``labels``: ``candidates.label_matches``), plus per-file aggregation over all of that."""
    label_rows, label_scores = labels
    label_ids = table.ids[label_rows]
    ids = union_ids(dense.ids, lexical.ids, np.asarray(name_ids, dtype=np.int64), label_ids)
    if options.fusion == "score":
        scores = score_fusion(ids, dense, lexical, options.dense_weight, options.lexical_weight)
    else:
        scores = np.zeros(ids.size, dtype=np.float64)
        fused = rrf([dense.rank, lexical.rank], RRF_K,
                    [options.dense_weight, options.lexical_weight])
        if fused:
            keys = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
            scores[np.searchsorted(ids, keys)] = np.fromiter(
                fused.values(), dtype=np.float64, count=len(fused))
    if label_ids.size:
        scores[ids.searchsorted(label_ids)] += label_gains(label_scores, options.label_weight)
    rows = rows_of(table.ids, ids)
    if options.file_weight and table.file_of.size and ids.size:
        files = table.file_of[rows]
        files[rows < 0] = -1
        gains = file_gains(scores, files, options.file_weight * UNIT)
        if gains is not None:
            scores += gains
    return Fused(ids, rows, scores)


def score_fusion(ids: np.ndarray, dense: DenseCandidates, lexical: LexicalCandidates,
                 dense_weight: float, lexical_weight: float) -> np.ndarray:
    """Min-max normalised dense plus BM25/max, weighted, in RRF units: float64 (m,) aligned
    with ``ids`` (ascending, holding every candidate of both lists)."""
    scores = np.zeros(ids.size, dtype=np.float64)
    # Both lists are best first: their first value is their maximum, the last their minimum.
    if dense.ids.size:
        lo, hi = float(dense.values[-1]), float(dense.values[0])
        span = (hi - lo) or 1.0
        scores[ids.searchsorted(dense.ids)] = dense_weight * (dense.values - lo) / span
    if lexical.ids.size:
        top = float(lexical.scores[0]) or 1.0
        scores[ids.searchsorted(lexical.ids)] += lexical_weight * lexical.scores / top
    scores *= UNIT
    return scores


def rrf(rankings: Sequence[Sequence[int]], k: float = RRF_K,
        weights: Sequence[float] | None = None) -> dict[int, float]:
    """Reciprocal rank fusion of ranked id lists.

    ``score(id) = sum_i weights[i] / (k + rank_i(id))`` with 1-based ranks; an id missing from a
    list gets nothing from it.

    Returns:
        {id: fused score}.
    """
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    fused: dict[int, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, cid in enumerate(ranking, start=1):
            fused[cid] = fused.get(cid, 0.0) + w / (k + rank)
    return fused


def label_gains(scores: np.ndarray, weight: float) -> np.ndarray:
    """float64 (m,): label BM25 scores (not empty) divided by the best of them, × ``weight``,
    in RRF units."""
    return scores * (weight * UNIT / float(scores.max()))


def file_gains(scores: np.ndarray, files: np.ndarray, unit: float,
               top: int = FILE_TOP) -> np.ndarray | None:
    """Per-file aggregation over candidate arrays: what each candidate gains from its file.

    A file's score is the sum of its ``top`` best candidate scores (added best first); each
    candidate with a known file gains ``unit`` × its file's score / the best file's score. So a
    section of a page that matches as a whole outranks a lone look-alike on another page.

    Args:
        scores: float64 (m,) fused scores of the candidates.
        files: int64 (m,) each candidate's file number, -1 for a candidate without one.
        unit: the gain of a chunk of the best file.
        top: how many of a file's best candidates make its score (≥ 1).

    Returns:
        float64 (m,) gains (0 for candidates without a file); None when no file scores > 0.
    """
    if top < 1 or not files.size:
        return None
    # Keys are file numbers plus one: key 0 gathers the candidates without a file, and its
    # total is zeroed, so they gain nothing and need no arrays of their own.
    keys = files + 1
    order = np.lexsort((-scores, keys))          # by file, best score first
    f, s = keys[order], scores[order]
    # Sorted so, a candidate is among its file's ``top`` best unless the one ``top`` places
    # before it has the same file.
    take = np.empty(f.size, dtype=bool)
    take[:top] = True
    np.not_equal(f[top:], f[:-top], out=take[top:])
    # bincount adds in array order: a file's best scores are summed best first.
    totals = np.bincount(f[take], weights=s[take])
    totals[0] = 0.0
    best = float(totals.max())
    if best <= 0:
        return None
    return unit * totals[keys] / best
