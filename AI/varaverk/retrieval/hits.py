"""What a search returns: ``Hit`` (one ranked chunk and the evidence behind it), its stable
JSON shape, and the sources list of an answer (``citations``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from varaverk.retrieval.coverage import Coverage, Deferred


@dataclass(slots=True)
class Hit:
    """One retrieved chunk (slotted: a query makes one for each leading candidate).

    Attributes:
        chunk: the stored chunk (``varaverk.index.store.stored_chunk.StoredChunk``: id and
            every Chunk field).
        score: the fused score used for ranking (higher is better; RRF units plus boosts, or
            the dense/lexical score itself in single-retriever modes).
        dense: cosine similarity with the query in [-1, 1] (None when not scored densely).
        lexical: BM25 score from FTS5, higher is better (None when not found lexically).
        exact: True when a name written in the query is this chunk's title.
        section_boosted: True when section routing boosted this chunk.
        best_dense: the best cosine similarity of any chunk the filters allow for this query
            (the same on every hit of one search; what the relevance threshold judges).
        unknown: names written in the query that appear nowhere in the index (see
            ``varaverk.retrieval.relevance.unknown_names``); the same on every hit of one
            search.
        alias: True when the query names one of the chunk's note aliases (front matter
            ``aliases``, org ``:ROAM_ALIASES:``), which are matched lexically, never embedded.
        grown: True when the ranked chunk was tiny and ``chunk`` is it joined with the nearest
            chunks of its parent section (``windows.TINY_MERGE_CHARS``); ``Retriever.expand``
            may add the rest of that section.
        coverage: the query's coverage signals (``varaverk.retrieval.coverage.Coverage``:
            dense margin over the pool edge, words the leading hits miss and those the index
            never holds); the same on every hit of one search; None when not measured
            (lexical-only mode). Set as a ``Coverage`` or a ``coverage.Deferred`` (measured
            when first read: ``measured`` holds what was set).
    """

    chunk: Any
    score: float
    dense: float | None = None
    lexical: float | None = None
    exact: bool = False
    section_boosted: bool = False
    best_dense: float | None = None
    unknown: tuple[str, ...] = ()
    alias: bool = False
    grown: bool = False
    measured: Coverage | Deferred | None = None

    @property
    def coverage(self) -> Coverage | None:
        found = self.measured
        return found.value() if isinstance(found, Deferred) else found

    @coverage.setter
    def coverage(self, value: Coverage | Deferred | None) -> None:
        self.measured = value

    def as_dict(self) -> dict:
        """The stable JSON shape of a result (ai-query --json ``results`` items)."""
        c = self.chunk
        return {
            "path": c.path, "kind": c.kind, "section": c.section, "title": c.title,
            "start_line": c.start_line, "end_line": c.end_line,
            "score": round(float(self.score), 6), "text": c.text,
            "source": getattr(c, "source", "repo"),
        }


def citations(hits: Iterable[Hit]) -> list[dict]:
    """The sources list of an answer: one entry per distinct chunk, in rank order.

    Each entry: {"citation": "path › SECTION › title", "path", "section", "title",
    "start_line", "end_line", "score", "text"} (``text``: the chunk verbatim, which the dock
    shows expandable under each source).
    """
    out = []
    seen = set()
    for h in hits:
        c = h.chunk
        if c.id in seen:
            continue
        seen.add(c.id)
        out.append({"citation": c.citation, "path": c.path, "section": c.section,
                    "title": c.title, "start_line": c.start_line, "end_line": c.end_line,
                    "score": round(float(h.score), 6), "text": c.text,
                    "source": getattr(c, "source", "repo")})
    return out
