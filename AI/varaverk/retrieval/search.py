"""Search: one question through every retrieval stage, best chunks first (``Retriever``).

How one question is answered with ranked chunks (``Retriever.search``), module by module:

1. **The question** (``question``): its words and names (``varaverk.text``: the lexical words,
   the exact names written in it, the names that look like names and that the index never
   holds) and its hard filters (``kind``, ``section``, ``sources``: a boolean mask over the
   vector table's rows; a filtered-out row never ranks, in any retriever).
2. **Candidates** (``candidates``): the dense retriever (one matrix-vector product,
   ``scoring``) and the lexical one (BM25 over FTS5's postings, ``lexical``) each propose a
   pool; the exact names and the label field (file name, section, title) add their matches.
3. **Fusion** (``fusion``): one score per candidate, in RRF units, with the label field's
   evidence and per-file aggregation.
4. **Ranking** (``ranking``): section routing (``routing``) and exact names boost the leading
   candidates; header keys go before template copies. An optional reranker (``rerank``,
   ``AI_RERANK_URL``, off by default) reorders the leading results; a chunk titled with a name
   in the question stays first, and a reranker failure keeps the fused order.
5. **Split sections come back whole** (``windows.merge_parts``): a ranked part of a split
   section comes back as its parts joined, a tiny chunk with the nearest chunks of its parent
   section (small-to-big); a result that mostly repeats an earlier one is listed after the
   others (``windows.demote_repeats``).
6. **Relevance** (``relevance``, ``coverage``): the signals of the "not covered" verdict are
   set on every hit (the question's words measured when first read: ``coverage.Deferred``);
   ``Retriever.confident`` judges them.

Then ``Retriever.expand`` packs a prompt's context from the hits within a character budget
(``windows.expand``, counted as ``context.format_context`` lays it out).

What a retriever keeps of the index between questions lives in ``caches.TableCache``, one per
index generation; its options (``options.RetrieverOptions``) are fixed when it is made.

Errors: ``IndexMissing`` / ``IndexMismatch`` from ``varaverk.index.store`` propagate from the
constructor; embedding errors (``varaverk.embedding.EmbeddingError``) propagate from ``search``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from varaverk.config import Settings
from varaverk.embedding import make_embedder
from varaverk.index.store.index import Index
from varaverk.retrieval import relevance, windows
from varaverk.retrieval.caches import TableCache
from varaverk.retrieval.candidates import (POOL, DenseCandidates, LexicalCandidates,
                                          dense_candidates, label_matches, lexical_candidates,
                                          name_matches, no_dense, no_lexical)
from varaverk.retrieval.coverage import LEADING
from varaverk.retrieval.fusion import fuse
from varaverk.retrieval.hits import Hit
from varaverk.retrieval.options import RetrieverOptions
from varaverk.retrieval.question import Filters, Question, Words
from varaverk.retrieval.ranking import (Boosts, boosted_hits, demote_thin, leading, mark_aliases,
                                       prefer_headers)
from varaverk.retrieval.rerank import make_reranker
from varaverk.retrieval.scoring import EMPTY_IDS, EMPTY_SCORES


class Retriever:
    """Hybrid retrieval over one index with one embedder. The dock holds one per process and
    shares it between threads: every per-question value lives in the records of one call.

    Args:
        settings: ``varaverk.config.Settings`` (index path, embedder, reranker; the options
            when none are given).
        index: an open ``varaverk.index.store.index.Index``; None opens ``settings.index_path``
            read-only (raises ``IndexMissing`` when there is none).
        embedder: a ``varaverk.embedding.Embedder``; None makes one from settings (not in
            lexical mode).
        options: how to rank (``RetrieverOptions``); None: ``RetrieverOptions.from_settings``.
        reranker: a ``varaverk.retrieval.rerank.Reranker`` for the leading candidates; None
            makes one from settings in hybrid mode (``AI_RERANK_URL``; none when empty, the
            default); False: none.
    """

    def __init__(self, settings: Settings, index: Index | None = None, embedder=None, *,
                 options: RetrieverOptions | None = None, reranker=None) -> None:
        self.options = options if options is not None else RetrieverOptions.from_settings(
            settings)
        uses_vectors = self.options.mode != "lexical"
        if index is None:
            index = Index.open(settings.index_path, readonly=True)
        if embedder is None and uses_vectors:
            embedder = make_embedder(settings)
        if embedder is not None and uses_vectors:
            # Vectors of another model live in another space: refuse rather than rank noise.
            index.check_compatible(embedder.backend, embedder.model)
        self.settings = settings
        self.index = index
        self.embedder = embedder
        self._cache: TableCache | None = None
        if reranker is None and self.options.mode == "hybrid":
            reranker = make_reranker(settings)
        self.reranker = reranker or None

    def _table(self) -> TableCache:
        """The ``TableCache`` of the index's current vector table, made once per index
        generation. It is published whole: another thread may be replacing it (a new
        generation) or still ranking on the previous one."""
        table = self.index.vector_table()
        cache = self._cache
        if cache is None or cache.table is not table:
            cache = TableCache.of(self.index, table, self.options.preload)
            if self.options.preload:
                cache.preload_chunks()
            self._cache = cache
        return cache

    # -- search -------------------------------------------------------------------------------

    def search(self, query: str, k: int, kind: str | None = None,
               section: str | None = None, sources: Iterable[str] | str | None = None
               ) -> list[Hit]:
        """The k best chunks for ``query``, best first.

        Args:
            query: the (standalone) question.
            k: how many hits (≥ 1).
            kind: hard filter on the chunk kind (header|readme|manual|template|doc|...).
            section: hard filter on the section name (case-insensitive).
            sources: hard filter on the chunk's source: a name (``repo``, ``vault``) or a
                collection of names; None keeps every source.

        Returns:
            Up to k Hits; fewer when the filters leave fewer chunks. Empty for an empty index.
        """
        k = max(1, int(k))
        table = self._table()
        filters = Filters.of(table, kind, section, sources)
        question = self._question(query, k, table)
        dense = self._dense(question, filters, table)
        mode = self.options.mode
        lexical = (lexical_candidates(question.lexical, question.terms, table, filters.mask,
                                      question.pool)
                   if mode in ("hybrid", "lexical") else no_lexical())
        if mode == "lexical":
            return self._single(question, dense, lexical, table)
        if mode == "dense":
            hits = self._single(question, dense, lexical, table)
        else:
            hits = self._hybrid(question, filters, dense, lexical, table)
        # The words measured when first read: only the coverage rule (AI_MIN_MARGIN, chat
        # escalation) and the evaluation read them
        measured = (relevance.measure_coverage(question.terms, dense, filters.mask, hits, table,
                                               deferred=True) if hits else None)
        hits = hits[:k]
        for h in hits:
            h.coverage = measured
        return hits

    def _question(self, text: str, k: int, table: TableCache) -> Question:
        """The ``Question`` of one search. At least the coverage rule's leading results are
        ranked whatever k is, so asking for fewer results never changes the verdict (the first
        k are the same either way)."""
        words = Words.of(text, table)
        # The pool grows only once k passes it: a pool growing with k changed the fusion's
        # ranks, so asking for more results reordered the first ones.
        return Question(text=text, k=k, ranked=max(k, LEADING), pool=max(POOL, k),
                        lexical=words.lexical, terms=words.terms, names=words.names,
                        unknown=words.unknown)

    def _dense(self, question: Question, filters: Filters, table: TableCache
               ) -> DenseCandidates:
        """The dense candidates: the pool in hybrid mode, the ranked results in dense mode."""
        mode = self.options.mode
        if mode not in ("hybrid", "dense") or self.embedder is None or not len(table.ids):
            return no_dense()
        size = question.pool if mode == "hybrid" else question.ranked
        return dense_candidates(self.embedder, question.text, table, filters.mask, size)

    def _single(self, question: Question, dense: DenseCandidates, lexical: LexicalCandidates,
                table: TableCache) -> list[Hit]:
        """Hits of a single-retriever mode in that retriever's order: the ranked best by
        cosine (dense mode), or the k best by BM25 (lexical mode)."""
        dense_of = dict(zip(dense.rank, dense.values.tolist()))
        if self.options.mode == "dense":
            chosen, score_of = dense.rank[:question.ranked], dense_of
        else:
            chosen, score_of = lexical.rank[:question.k], lexical.of
        chunks = table.read_chunks(chosen)
        return [Hit(chunks[cid], score_of[cid], dense=dense_of.get(cid),
                    lexical=lexical.of.get(cid), best_dense=dense.best, unknown=question.unknown)
                for cid in chosen if cid in chunks]

    def _hybrid(self, question: Question, filters: Filters, dense: DenseCandidates,
                lexical: LexicalCandidates, table: TableCache) -> list[Hit]:
        """Fuse every retriever's candidates, boost, rank and merge split sections."""
        options = self.options
        names = name_matches(question.names, table, filters.mask)
        labels = (label_matches(question.text, table, filters.mask) if options.label_weight
                  else (EMPTY_IDS, EMPTY_SCORES))
        fused = fuse(dense, lexical, names.ids, labels, table, options)
        if not fused.ids.size:
            return []
        boosts = Boosts.of(question, options)
        lead = leading(fused, names.ids, boosts, table, question.ranked)
        # A candidate's BM25: the main lexical pass's, else that of the first name finding it.
        lexical_of = {**names.bm25, **lexical.of}
        hits = boosted_hits(lead, boosts, filters, dense, lexical_of, question.unknown, table)
        prefer_headers(hits)
        hits.sort(key=lambda h: (-h.score, h.chunk.id))
        if self.reranker is not None:
            hits = self._reranked(question, hits, table)
        else:
            hits = self._merge_read(hits, question.ranked, table)
        hits = demote_thin(windows.demote_repeats(hits))
        mark_aliases(question.text, hits)
        return hits

    def _reranked(self, question: Question, hits: list[Hit], table: TableCache) -> list[Hit]:
        """The leading ``reranker.top_n`` results reordered by the reranker's relevance
        (a chunk titled with a name in the query stays first); the fused order when the
        reranker fails. Scores stay the fused ones (the threshold never sees the reranker's)."""
        pool = self._merge_read(hits, max(question.ranked, self.reranker.top_n), table)
        scores = self.reranker.scores(question.text, [h.chunk.text for h in pool])
        if scores is None:
            return pool[:question.ranked]
        order = sorted(range(len(pool)), key=lambda i: (not pool[i].exact, -scores[i], i))
        return [pool[i] for i in order[:question.ranked]]

    @staticmethod
    def _merge_read(hits: list[Hit], k: int, table: TableCache) -> list[Hit]:
        """``windows.merge_parts`` over ranked hits whose chunks may be row labels only (a
        split section, a YAML block or a tiny chunk's parent section comes back as one
        result): the chunks of the leading hits are read as merging reaches them
        (``TableCache.read_in_turn``), all from the table the search ranked on."""
        return windows.merge_parts(table.read_in_turn(hits, k), k, table.places_of)

    # -- relevance ----------------------------------------------------------------------------

    def unknown_names(self, query: str) -> list[str]:
        """Names in ``query`` that no chunk contains (``relevance.unknown_names``)."""
        return relevance.unknown_names(query, self._table())

    def confident(self, hits: Sequence[Hit]) -> bool:
        """Whether the hits are relevant enough to answer from (``relevance.confident`` with
        this retriever's ``min_score`` and ``min_margin``). Below it, callers answer
        ``relevance.NOT_COVERED`` with the hits listed as the nearest sources, and call no
        model."""
        return relevance.confident(hits, self.options.min_score, self.options.min_margin)

    def escalates(self, hits: Sequence[Hit]) -> bool:
        """Whether a chat turn should be handed to the documentation: the hits stand out
        (``relevance.escalates``), stricter than ``confident``, which only refuses what the
        index cannot answer."""
        return relevance.escalates(hits)

    # -- small-to-big -------------------------------------------------------------------------

    def expand(self, hits: Sequence[Hit], budget_chars: int) -> list[list]:
        """A prompt's context groups for ``hits`` within ``budget_chars`` characters, labels
        counted: ``varaverk.retrieval.windows.expand`` over this index's chunks (shapes
        there)."""
        # One table for the whole packing: ``_table`` asks the index for its generation (an
        # SQL query), and expand reads a file's chunks for every hit.
        return windows.expand(hits, budget_chars, self._table().file_chunks)
