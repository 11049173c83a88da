"""What one search is asked, worked out once before any retriever runs: the question
(``Question``: its text, the words and names in it) and its hard filters (``Filters``).

Both are records of one search call, never shared between calls or threads; each later stage
of ``Retriever.search`` produces a record of its own (``candidates.DenseCandidates``,
``candidates.LexicalCandidates``, ``fusion.Fused``...), so a reader sees which stage wrote what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple

import numpy as np

from varaverk.retrieval import relevance
from varaverk.retrieval.caches import QUESTION_CACHE, TableCache, kept
from varaverk.retrieval.scoring import filter_mask
from varaverk.text import exact_names, lexical_text


@dataclass(frozen=True, slots=True)
class Question:
    """A question as the retrievers see it.

    Attributes:
        text: the (standalone) question as asked.
        k: how many results the caller wants (≥ 1).
        ranked: how many are ranked: at least ``coverage.LEADING``, so asking for fewer
            results never changes the "not covered" verdict.
        pool: candidates each retriever proposes before fusion.
        lexical: the words matched lexically (``varaverk.text.lexical_text``).
        terms: those words, which are their own ``fts_terms``.
        names: ``varaverk.text.exact_names``: names written in the question.
        unknown: names in the question that no chunk holds
            (``varaverk.retrieval.relevance.unknown_names``).
    """

    text: str
    k: int
    ranked: int
    pool: int
    lexical: str
    terms: tuple[str, ...]
    names: tuple[str, ...]
    unknown: tuple[str, ...]


class Words(NamedTuple):
    """What a question's text holds for the retrievers, the same for every search of that
    text over one index generation (``Question``'s attributes of the same names)."""

    lexical: str
    terms: tuple[str, ...]
    names: tuple[str, ...]
    unknown: tuple[str, ...]

    @classmethod
    def of(cls, text: str, table: TableCache) -> Words:
        """The words of ``text`` over ``table``'s index generation, worked out once per text
        and kept with the table (up to ``caches.QUESTION_CACHE`` texts): the unknown names
        are looked up in that generation's index."""
        return kept(table.questions, text, lambda: cls._read(text, table), QUESTION_CACHE)

    @classmethod
    def _read(cls, text: str, table: TableCache) -> Words:
        lexical = lexical_text(text)
        # fts_terms of lexical_text's words are those words (no edge punctuation, stop word,
        # one-character word or repeat is left in them): a second pass would find nothing
        return cls(lexical, tuple(lexical.split()), tuple(exact_names(text)),
                   tuple(relevance.unknown_names(text, table)))


@dataclass(frozen=True, slots=True)
class Filters:
    """The hard filters of one search (they compose: AND).

    Attributes:
        kind: keep only this chunk kind; None keeps all.
        section: keep only this section (case-insensitive); None keeps all.
        sources: keep only these source names; None keeps every source.
        mask: bool (n,): the vector-table rows the filters allow; None when no filter is set
            (every row may rank: ``Index.vector_table`` leaves unusable vectors out), so an
            unfiltered query spends no array operation on a mask.
    """

    kind: str | None
    section: str | None
    sources: frozenset[str] | None
    mask: np.ndarray | None

    @classmethod
    def of(cls, table: TableCache, kind: str | None, section: str | None,
           sources: Iterable[str] | str | None) -> Filters:
        """The filters of a search over ``table``; ``sources``: a name (``repo``, ``vault``),
        a collection of names, or None."""
        wanted = None if sources is None else frozenset(
            [sources] if isinstance(sources, str) else sources)
        if not kind and not section and wanted is None:
            return cls(kind, section, wanted, None)
        mask = filter_mask(np.asarray(table.table.kinds), table.sections_upper, kind, section)
        if wanted is not None:
            mask &= np.isin(_table_sources(table.table), sorted(wanted))
        return cls(kind, section, wanted, mask)

    def passes(self, chunk) -> bool:
        """Whether a chunk read from the index passes the filters (for candidates without a
        vector-table row, which the mask cannot judge)."""
        if self.kind and chunk.kind != self.kind:
            return False
        if self.sources is not None and getattr(chunk, "source", "repo") not in self.sources:
            return False
        if self.section and (chunk.section or "").upper() != self.section.strip().upper():
            return False
        return True


def _table_sources(table) -> np.ndarray:
    """The vector table's per-row source names (``repo`` for a table made without them)."""
    found = table.sources
    return np.asarray(found if found is not None else ["repo"] * len(table.ids), dtype=str)
