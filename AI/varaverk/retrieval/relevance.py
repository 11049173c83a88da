"""Relevance: whether the results are good enough to answer from ("not covered" otherwise).

``confident`` is the one entry point of the decision; no model is called. In order: no hits,
not covered; a name written in the question that is a hit's title, covered; a name the index
never mentions ("Minecraft", "Kubernetes": ``unknown_names``), not covered; a hit's note alias
named, covered (aliases are never embedded: a cosine cannot see them); the best cosine
similarity below ``min_score`` (``AI_MIN_SCORE``, else ``DEFAULT_MIN_SCORE``), not covered;
then, only when ``min_margin`` is set (``AI_MIN_MARGIN``), the coverage rule
(``varaverk.retrieval.coverage``, measured by ``measure_coverage``): not covered when the best
cosine does not stand out from the pool edge by ``min_margin`` once the question's distinctive
words that the leading results miss are charged. The caller then says ``NOT_COVERED`` and
lists the nearest sources, without calling a model; every other question goes to the model,
whose prompt answers only from the context and names what is missing.

Why so little is refused without the model: a refusal of a question the documentation answers
costs the user the answer, a near-miss question let through costs one model call that says
what is missing. Calibrated leave-one-corpus-out over the dev corpora
(``tests/benchmarks/loco_coverage.py`` on ``ai-eval --json``), any cosine floor or margin
fitted on four corpora wrongly refused answerable questions of the fifth: paraphrased
questions about a corpus of look-alike chunks have the cosines and missed words of near-miss
ones. A name the index holds in no form is the signal that carried.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from varaverk.retrieval.caches import WORD_FORMS_CACHE, TableCache, kept
from varaverk.retrieval.candidates import DenseCandidates
from varaverk.retrieval.coverage import (LEADING, MIN_MARGIN, REF_RANK, Coverage, Deferred,
                                         measure, pool_margin, word_forms)
from varaverk.retrieval.hits import Hit
from varaverk.retrieval.scoring import top_k
from varaverk.text import named_words

NOT_COVERED = "The documentation does not cover this."
# The floor on the best cosine similarity: at or below zero nothing in the index is even
# slightly like the question. Any higher floor fitted on four dev corpora refused answerable
# questions of the fifth (module docstring).
DEFAULT_MIN_SCORE = 0.0
# A chat turn is handed to the documentation only on matches that stand out: a small talk
# question wrongly kept in chat loses nothing the user did not ask for, so the floor and the
# margin rule of the earlier calibration stay here.
ESCALATE_MIN_SCORE = 0.37
# A word the question says is not there: "with no GUI", "without a GUI or SSH".
_NEGATED = re.compile(r"\b(?:no|without)\s+(?:an?\s+|any\s+)?([\w.-]+)"
                      r"(?:(?:\s*,\s*|\s+(?:or|nor|and)\s+)([\w.-]+))?", re.IGNORECASE)


def confident(hits: Sequence[Hit], min_score: float, min_margin: float | None) -> bool:
    """Whether the hits of one search are relevant enough to answer from (module docstring).

    Args:
        hits: the search's results, best first.
        min_score: threshold on the best cosine similarity (``Hit.best_dense``, else the
            hits' own).
        min_margin: the coverage rule's threshold (``Coverage.covered``), in cosine units;
            None leaves the rule off.

    Lexical-only results (no cosine at all): any BM25 hit counts.
    """
    if not hits:
        return False
    if any(h.exact for h in hits):
        return True
    if any(h.unknown for h in hits):
        return False
    if any(h.alias for h in hits):  # an alias is never embedded: cosine cannot see it
        return True
    best = max((h.best_dense if h.best_dense is not None else h.dense for h in hits
                if h.dense is not None or h.best_dense is not None), default=None)
    if best is None:  # lexical-only mode: any BM25 hit counts
        return any(h.lexical is not None for h in hits)
    if best < min_score:
        return False
    if min_margin is None:
        return True
    measured = next((h.coverage for h in hits if h.coverage is not None), None)
    return measured is None or measured.covered(min_margin)


def escalates(hits: Sequence[Hit]) -> bool:
    """Whether a chat turn's hits stand out enough to hand it to the documentation:
    ``confident`` with ``ESCALATE_MIN_SCORE`` and the coverage rule at ``MIN_MARGIN``."""
    return confident(hits, ESCALATE_MIN_SCORE, MIN_MARGIN)


def unknown_names(query: str, table: TableCache) -> list[str]:
    """The names in ``query`` (``varaverk.text.named_words``: "Minecraft", "S3", "k8s") that no
    chunk of ``table``'s index generation contains: the question is about something else.

    A hyphenated name is known when its whole form or any of its named parts is ("ALIAS" for
    "ALIAS-type": the lower-case tail is prose). A name right after "no" or "without" ("with
    no GUI") is left out: the question says it is not there, so the documentation need not
    name it. Each name is looked up in the lexical index (a cached posting list after the
    first time); a name whose look-up fails is not counted (a failure must not make an answer
    "not covered").
    """
    bm25 = table.bm25()

    def known(word: str) -> bool:
        found = bm25.contains(word) if bm25 is not None else None
        if found is None:
            found = bool(table.index.fts_search(word, 1))
        return found

    out: list[str] = []
    negated = {w.rstrip(".-") for m in _NEGATED.finditer(query) for w in m.groups() if w}
    for word in named_words(query):
        if word in negated:
            continue
        parts = [p for p in word.split("-") if p != word and _named_part(p)]
        try:
            if known(word) or any(known(p) for p in parts):
                continue
        except Exception:  # a lookup failure must not make the answer "not covered"
            continue
        out.append(word)
    return out


def _named_part(part: str) -> bool:
    """Whether one part of a hyphenated name is itself a name: capitalised, or holding a
    digit, underscore or dot (two characters at least)."""
    return len(part) > 1 and (part[0].isupper() or any(c.isdigit() or c in "_." for c in part))


def measure_coverage(terms: Sequence[str], dense: DenseCandidates, mask: np.ndarray | None,
                     hits: Sequence[Hit], table: TableCache, *, deferred: bool = False
                     ) -> Coverage | Deferred:
    """The coverage signals of a searched question (``varaverk.retrieval.coverage``).

    Args:
        terms: the question's lexical words (``Question.terms``).
        dense: the dense candidates (their cosines, or every row's when fewer were ranked).
        mask: the rows the filters allow (None: all).
        hits: the leading results, best first (``coverage.LEADING`` of them count).
        table: the index generation searched (vocabulary, BM25, each word's forms kept).
        deferred: measure the words when the result is first read (a ``coverage.Deferred``);
            the margin and the leading ids are taken now, so neither ``dense`` nor ``hits``
            is kept.

    Returns:
        The best cosine over the ``REF_RANK``-th among the rows the filters allow, and the
        question's words the leading hits do not hold, the index's absent ones among them.
        Without the index's vocabulary or in-process BM25 the margin decides alone.
    """
    ranked = dense.values[:REF_RANK]
    if len(ranked) < REF_RANK and dense.scores is not None:
        # dense mode ranks only k; hybrid pools at least REF_RANK whenever the rows allow
        ranked = dense.scores[top_k(dense.scores, REF_RANK, mask)]
    margin = pool_margin(ranked)
    leading = [h.chunk.id for h in hits[:LEADING]]
    if deferred:
        return Deferred(lambda: _words_covered(margin, terms, leading, table))
    return _words_covered(margin, terms, leading, table)


def _words_covered(margin: float | None, terms: Sequence[str], leading: list[int],
                   table: TableCache) -> Coverage:
    """``measure_coverage``'s ``Coverage`` from its margin and leading chunk ids."""
    vocabulary = table.vocabulary()
    bm25 = table.bm25()
    if bm25 is None or not vocabulary:
        return Coverage(margin, 0)
    forms = table.word_forms

    def forms_of(word: str) -> list[list[str]] | None:
        return kept(forms, word, lambda: word_forms(word, vocabulary), WORD_FORMS_CACHE)
    return measure(margin, terms, forms_of, lambda toks: bm25.phrase_rows(toks)[0], leading,
                   bm25.rows)
