"""How a retriever ranks: ``RetrieverOptions``, one frozen record made from the settings.

The weights and boosts are in RRF units (``fusion.UNIT``, one top rank in one list), the unit
of fused scores; each default was set with ``ai-eval`` on every dev corpus together.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from varaverk.config import Settings
from varaverk.retrieval.relevance import DEFAULT_MIN_SCORE

FUSION = "score"            # min-max normalised dense + BM25/max ("rrf": rank fusion)
DENSE_WEIGHT = 2.0
LEXICAL_WEIGHT = 1.0
SECTION_BOOST = 1.5         # chunks of the section the question's shape routes to
LABEL_WEIGHT = 0.25         # the label field (heading trail + title + file name)
FILE_WEIGHT = 0.5           # per-file aggregation
# Section routing boosts the six header sections only: a Markdown heading called
# "Configuration" is not the CONFIGURATION section of a script header.
ROUTING_KINDS: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RetrieverOptions:
    """What a ``Retriever`` does with a question (the defaults are the product's).

    Attributes:
        mode: "hybrid" (the default), "dense" or "lexical" (single retrievers, for the
            evaluation's comparison; boosts apply in "hybrid" only).
        fusion: "score" (min-max normalised dense + BM25/max) or "rrf" (weighted reciprocal
            rank fusion, for comparison).
        routing: False disables section routing (for measuring it).
        routing_kinds: the chunk kinds section routing may boost; None: every kind.
        dense_weight, lexical_weight: each retriever's weight in fusion.
        section_boost, label_weight, file_weight: RRF units (``fusion.UNIT``).
        min_score: relevance threshold on the best cosine similarity.
        min_margin: the coverage rule's threshold on the dense margin over the pool edge, less
            the missed-words cost (``varaverk.retrieval.coverage``), in cosine units; None
            (the default) leaves the rule off: calibrated leave-one-corpus-out, no margin
            refused no answerable question on a corpus it was not fitted on.
        preload: read all of each index generation's postings (``lexical.Bm25``'s
            ``preload``) and, when they fit the retriever's caches, all its chunks at its
            first query, for processes that answer many questions (the dock, the
            evaluation); a one-shot query reads only what its own words and results need.
    """

    mode: str = "hybrid"
    fusion: str = FUSION
    routing: bool = True
    routing_kinds: tuple[str, ...] | None = ROUTING_KINDS
    dense_weight: float = DENSE_WEIGHT
    lexical_weight: float = LEXICAL_WEIGHT
    section_boost: float = SECTION_BOOST
    label_weight: float = LABEL_WEIGHT
    file_weight: float = FILE_WEIGHT
    min_score: float = DEFAULT_MIN_SCORE
    min_margin: float | None = None
    preload: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, **changes: Any) -> RetrieverOptions:
        """The options ``settings`` give (``AI_MIN_SCORE``: 0 means the default;
        ``AI_MIN_MARGIN``: 0 leaves the margin rule off), then ``changes`` (fields of this
        class, e.g. ``mode="lexical"``).
        Raises TypeError for a name that is not a field."""
        options = cls(
            min_score=(float(settings.ai_min_score) if settings.ai_min_score > 0
                       else DEFAULT_MIN_SCORE),
            min_margin=(float(settings.ai_min_margin) if settings.ai_min_margin > 0
                        else None))
        return replace(options, **changes)
