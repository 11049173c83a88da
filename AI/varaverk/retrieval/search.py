"""Search: dense + lexical retrieval, fused, routed by question shape, with a relevance threshold.

How one query is scored (``Retriever.search``):

1. **Dense.** The query is embedded once (``Embedder.embed_query``: float32 (dim,), unit length)
   and scored against the index's contiguous float32 matrix (n, dim) with ONE matrix-vector
   product (``np.vecdot``, a dot product per row; from ``PARALLEL_FROM`` rows in row blocks
   shared between cores): cosine similarity, because every stored row is L2-normalised. Rows
   whose vector is zero or not finite never rank: the vector table leaves them out
   (``Index.vector_table``). Top-k is ``np.argpartition`` (on a large table after a sampled
   threshold) then a sort of the k survivors: O(n) plus O(k log k), no Python loop over rows.
2. **Filters.** ``kind`` and ``section`` are hard filters: boolean masks over the rows that
   compose (AND). A filtered-out row scores ``-inf`` and never ranks, in any retriever.
3. **Lexical.** SQLite FTS5 BM25 over the chunk text and its context trail; it finds exact
   names (``MOVER_STOP_TIMEOUT``) that a small embedder blurs. FTS5 is the index of record;
   the scores are computed in-process from its own postings (``varaverk.retrieval.lexical.Bm25``, the
   same numbers as ``Index.fts_search``'s ``bm25()``, without a MATCH per query), and only
   text that FTS5 alone can tokenize (non-ASCII) goes through ``Index.fts_search``.
4. **Fusion.** Normalised-score fusion: ``2 × (cos − min)/(max − min)`` over the dense
   candidates plus ``BM25 / max BM25`` over the lexical ones; a list a chunk is missing from
   adds nothing. Weighted reciprocal rank fusion (``fusion="rrf"``, k0 = 60) is kept for
   comparison. Measured with ``ai-eval`` (offline MiniLM, dev sets, recall@5 / MRR):
   harborlab score-fusion 0.950 / 0.846 against RRF 0.900 / 0.777 (dense weight 2);
   Frigate 0.938 / 0.741 against 0.875 / 0.650. Ranks throw away how much better the best
   dense match is, which matters with a small embedder whose top cosine is usually right.
   Two more kinds of evidence are added in the same units: the **label field**
   (``LabelBm25``: BM25 over each chunk's heading trail, title and file name, divided by the
   best label score, ×``LABEL_WEIGHT``; its best matches join the candidates), so a query
   naming a section finds it although the section's body spends its words elsewhere; and
   **per-file aggregation** (every candidate gains ``FILE_WEIGHT`` × its file's score, the
   sum of the file's best ``FILE_TOP`` candidates, divided by the best file's), so a section
   of the page that matches as a whole beats a lone look-alike on another page. Measured on
   the harborlab, Frigate and Synapse dev sets together (``ai-eval``): recall@5 / MRR /
   context hit rose on every corpus with both on, against either alone.
5. **Boosts** (added to the fused score; they reorder, they never remove):
   - section routing (``varaverk.retrieval.routing``): chunks of the section the question's shape points
     to get ``SECTION_BOOST`` RRF units;
   - exact names: a name written in the query (``MOVER_STOP_TIMEOUT``, ``--force-delete``,
     ``auth.session_length``, anything in backticks) lifts the chunk *titled* with that name
     above everything else, and chunks merely containing it a little. The name is also looked up
     lexically on its own, so its chunk is a candidate even when the rest of the question is
     about something else.
   - an optional reranker (``varaverk.retrieval.rerank``, ``AI_RERANK_URL``, off by default) reorders
     the leading ``AI_RERANK_TOP_N`` results; a chunk titled with a name in the query stays
     first, and a reranker failure keeps the fused order.
6. **Split sections come back whole** (``varaverk.retrieval.windows.merge_parts``). When one part of a
   section that was split for the embedder ranks, the result is the section's parts joined
   (up to ``windows.MERGE_CHARS``), so long reference pages answer with the paragraph around
   the match (small-to-big). A tiny chunk (one option's paragraph, a bare heading, a
   banner's lines; under ``windows.TINY_CHARS``) comes back with the nearest chunks of its
   parent section (up to ``windows.TINY_MERGE_CHARS``): alone it rarely holds the answer.
   Two results never hold the same lines, and a result that mostly repeats lines an
   earlier one shows (a near-copy of an example configuration) is listed after the others
   (``windows.demote_repeats``).
7. **Relevance threshold.** ``Retriever.confident(hits)`` is False when the query names
   something no chunk mentions ("Minecraft", "Kubernetes": ``unknown_names``) or the best
   cosine similarity is below ``min_score`` (``AI_MIN_SCORE``, or ``DEFAULT_MIN_SCORE``,
   calibrated on the dev sets: every harborlab answerable question scores ≥ 0.39, the
   unanswerable ones name an unknown thing or score ≤ 0.35), unless a name in the query is a
   hit's title, or when the coverage rule (``varaverk.retrieval.coverage``) finds the best cosine not
   standing out from the 50th best once the question's distinctive words that the leading
   results miss are charged. The caller then says "the documentation does not cover this" and lists the
   nearest sources, without calling a model.

``Retriever.expand`` packs a prompt's context from the hits within a character budget (labels
counted; ``varaverk.retrieval.windows.expand``): every hit's own chunk first, best first, then each grows
with its merged window, the other parts of a split chunk or the parent section of a tiny chunk
(the prompt's small-to-big).

Errors: ``IndexMissing`` / ``IndexMismatch`` from ``varaverk.index.store`` propagate from the
constructor; embedding errors (``varaverk.embedding.EmbeddingError``) propagate from ``search``.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from varaverk.retrieval import coverage as _coverage
from varaverk.retrieval import windows
from varaverk.retrieval.coverage import Coverage
from varaverk.retrieval.lexical import Bm25, LabelBm25
from varaverk.retrieval.routing import route
from varaverk.text import exact_names, fts_terms, lexical_text, named_words, normalise_title

log = logging.getLogger(__name__)

RRF_K = 60.0
DENSE_WEIGHT = 2.0
LEXICAL_WEIGHT = 1.0
FUSION = "score"
# Boosts in units of one top rank in one list (1 / (RRF_K + 1)).
SECTION_BOOST = 1.5
NAME_TITLE_BOOST = 10.0     # the chunk titled with a name written in the query goes first
NAME_TEXT_BOOST = 0.5       # chunks that merely mention it get a nudge
# Label field (heading trail + title + file name) and per-file aggregation, in the same
# units as the fused score (measured with ai-eval on every dev corpus together).
LABEL_WEIGHT = 0.25
LABEL_POOL = 20             # best label matches that join the candidates
FILE_WEIGHT = 0.5
FILE_TOP = 3                # a file's score: the sum of its best candidates' scores
# Section routing boosts the six header sections only: a Markdown heading called
# "Configuration" is not the CONFIGURATION section of a script header.
ROUTING_KINDS: tuple[str, ...] | None = None
POOL = 50                   # candidates taken from each retriever before fusion
# From this many rows top_k selects on a sampled threshold first; below it one partition of
# every score costs less than the sampling pass's extra array calls (bench_scoring).
SAMPLE_FROM = 8192
# From this many rows the dense product is shared between up to MAX_DENSE_THREADS cores: one
# core's memory bandwidth limits it there, while below it handing a block to another thread
# costs more than it saves (bench_scoring).
PARALLEL_FROM = 32768
MAX_DENSE_THREADS = 4
FILE_CACHE = 256            # files whose chunks a retriever keeps for small-to-big
CHUNK_CACHE = 4096          # chunks a retriever keeps by id (the leading results of queries)
WORD_FORMS_CACHE = 20000    # query words whose inflected forms in the index a retriever keeps
# Calibrated on the dev sets' answerable vs unanswerable questions (see evaluation.py).
DEFAULT_MIN_SCORE = 0.37
NOT_COVERED = "The documentation does not cover this."

_UNIT = 1.0 / (RRF_K + 1.0)


@dataclass(slots=True)
class Hit:
    """One retrieved chunk (slotted: a query makes one for each leading candidate).

    Attributes:
        chunk: the stored chunk (``varaverk.index.store.StoredChunk``: id + every Chunk field).
        score: the fused score used for ranking (higher is better; RRF units plus boosts, or
            the dense/lexical score itself in single-retriever modes).
        dense: cosine similarity with the query in [-1, 1] (None when not scored densely).
        lexical: BM25 score from FTS5, higher is better (None when not found lexically).
        exact: True when a name written in the query is this chunk's title.
        section_boosted: True when section routing boosted this chunk.
        best_dense: the best cosine similarity of any chunk the filters allow for this query
            (the same on every hit of one search; what the relevance threshold judges).
        unknown: names written in the query that appear nowhere in the index (see
            ``Retriever.unknown_names``); the same on every hit of one search.
        alias: True when the query names one of the chunk's note aliases (front matter
            ``aliases``, org ``:ROAM_ALIASES:``), which are matched lexically, never embedded.
        grown: True when the ranked chunk was tiny and ``chunk`` is it joined with the nearest
            chunks of its parent section (``windows.TINY_MERGE_CHARS``); ``Retriever.expand``
            may add the rest of that section.
        coverage: the query's coverage signals (``varaverk.retrieval.coverage.Coverage``: dense margin
            over the pool edge, words the leading hits miss and those the index never holds);
            the same on every hit of one search; None when not measured (lexical-only mode).
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
    coverage: Coverage | None = None

    def as_dict(self) -> dict:
        """The stable JSON shape of a result (ai-query --json ``results`` items)."""
        c = self.chunk
        return {
            "path": c.path, "kind": c.kind, "section": c.section, "title": c.title,
            "start_line": c.start_line, "end_line": c.end_line,
            "score": round(float(self.score), 6), "text": c.text,
            "source": getattr(c, "source", "repo"),
        }


# ---------------------------------------------------------------------------------------------
# Scoring maths on plain numpy arrays (unit-tested on known matrices)
# ---------------------------------------------------------------------------------------------

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
            upper-cased once per table: ``_TableCache.sections_upper``).
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
    if k * 16 < s.size and s.size >= SAMPLE_FROM:
        # Select on a threshold first: the j-th best of every 16th score leaves about 3k
        # candidates (never fewer than k, else the full partition below), so the O(n) pass is
        # one comparison instead of a selection over every row.
        sample = s[::16]
        j = min(sample.size, -(-3 * k // 16) + 1)
        threshold = np.partition(sample, sample.size - j)[sample.size - j]
        candidates = np.flatnonzero(s >= threshold)
        part = (candidates[_best(s[candidates], k)] if candidates.size >= k
                else _best(s, k))
    elif k < s.size:
        part = _best(s, k)
    else:
        part = np.arange(s.size)
    return part[np.lexsort((part, -s[part]))]


def _best(s: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of ``s`` (0 < k ≤ s.size), in no order."""
    return np.argpartition(s, s.size - k)[s.size - k:]


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


def prefer_headers(hits: list[Hit]) -> None:
    """Rank a script header's key before a template's copy of the same key (in place).

    Templates repeat the keys that script headers document, sometimes with stale defaults; the
    header is the source of truth. A template chunk titled like a header chunk among the hits
    is moved just below that header chunk when it scored above it; nothing is removed.
    """
    best_header: dict[str, float] = {}
    templates: list[Hit] = []
    for h in hits:
        c = h.chunk
        if c.kind == "header" and c.title:
            key = _title_key(c.title)
            best_header[key] = max(best_header.get(key, float("-inf")), h.score)
        elif c.kind == "template" and c.title:
            templates.append(h)
    if not best_header:
        return
    for h in templates:
        header = best_header.get(_title_key(h.chunk.title))
        if header is not None and h.score >= header:
            h.score = header - 1e-9


# The same chunk titles come back among the candidates of query after query, and normalising
# them was most of prefer_headers' work; titles are the index's, never the question's.
_title_key = functools.lru_cache(maxsize=4096)(normalise_title)


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


def _file_stem(path: str) -> str:
    """A file's name without folders and extensions: ``docs/turn-howto.md`` -> ``turn-howto``."""
    name = path.rsplit("/", 1)[-1]
    return name.split(".", 1)[0] if not name.startswith(".") else name


def _name_bonus(norm_names: list[str], title: str, text: str) -> tuple[float, bool]:
    """The exact-name boost of one chunk: (bonus in fused units, whether a name is its
    title). The first name that is the chunk's title (or its title's first word) wins
    ``NAME_TITLE_BOOST``; else the first name its text contains wins ``NAME_TEXT_BOOST``.
    ``text``: the chunk's text, lower-cased."""
    title = _title_key(title)
    for n in norm_names:
        # a title's first word is in the title: the split only for titles holding the name
        if title and (title == n or (n in title and title.split()[0:1] == [n])):
            return NAME_TITLE_BOOST * _UNIT, True
        if n in text:
            return NAME_TEXT_BOOST * _UNIT, False
    return 0.0, False


def mark_aliases(query: str, hits: Sequence[Hit]) -> None:
    """Set ``Hit.alias`` on hits whose note aliases (``chunk.meta["aliases"]``) the query
    names as whole words, case-insensitively (aliases under 3 characters are ignored)."""
    text = " ".join(query.lower().split())
    for h in hits:
        meta = getattr(h.chunk, "meta", None)
        aliases = meta.get("aliases") if isinstance(meta, dict) else None
        if not isinstance(aliases, list):
            continue
        h.alias = any(len(a) >= 3 and re.search(rf"(?<!\w){re.escape(' '.join(a.lower().split()))}"
                                                rf"(?!\w)", text) for a in map(str, aliases))


def _source_set(sources: Iterable[str] | str | None) -> frozenset[str] | None:
    """A source filter as a set of names (None: no filter)."""
    if sources is None:
        return None
    return frozenset([sources] if isinstance(sources, str) else sources)


def _table_sources(table) -> np.ndarray:
    """The vector table's per-row source names (``repo`` for a table made without them)."""
    found = getattr(table, "sources", None)
    return np.asarray(found if found is not None else ["repo"] * len(table.ids), dtype=str)


# Shared empty results (read-only: a caller that needs to write makes its own array).
_EMPTY_IDS = np.zeros(0, dtype=np.int64)
_EMPTY_SCORES = np.zeros(0, dtype=np.float64)
_EMPTY_IDS.flags.writeable = False
_EMPTY_SCORES.flags.writeable = False


@dataclass
class _Query:
    """The state of one search call (never shared between calls or threads)."""

    text: str
    k: int
    kind: str | None
    section: str | None
    cache: Any
    mask: np.ndarray | None                   # bool (n,): rows the filters allow; None: all
    names: list[str]
    unknown: tuple[str, ...]
    lexical: str = ""                         # ``lexical_text`` of the question
    terms: list[str] = field(default_factory=list)   # ``fts_terms`` of ``lexical``: its words
    pool: int = POOL
    scores: np.ndarray | None = None          # float32 (n,) cosine of every row, when dense ran
    best_dense: float | None = None
    dense_rank: list[int] = field(default_factory=list)
    dense_of: dict[int, float] = field(default_factory=dict)
    lex_rank: list[int] = field(default_factory=list)
    lex_of: dict[int, float] = field(default_factory=dict)
    # The same candidates as arrays, in rank order (what fusion computes on).
    dense_ids: np.ndarray = field(default_factory=lambda: _EMPTY_IDS)
    dense_vals: np.ndarray = field(default_factory=lambda: _EMPTY_SCORES)
    lex_ids: np.ndarray = field(default_factory=lambda: _EMPTY_IDS)
    lex_scores: np.ndarray = field(default_factory=lambda: _EMPTY_SCORES)
    boosted_section: str | None = None
    norm_names: list[str] = field(default_factory=list)
    sources: frozenset[str] | None = None     # source names kept (None: every source)


def _union(*ids: np.ndarray) -> np.ndarray:
    """The distinct values of int64 arrays, ascending (``np.unique`` without its overhead)."""
    out = np.concatenate(ids)
    if out.size < 2:
        return out
    out.sort()
    keep = np.empty(out.size, dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def _rows_of(table_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """int64 (m,): the row of each id in ``table_ids`` (ascending), -1 where it is absent."""
    if not table_ids.size:
        return np.full(ids.size, -1, dtype=np.int64)
    rows = table_ids.searchsorted(ids)
    np.minimum(rows, table_ids.size - 1, out=rows)
    rows[table_ids[rows] != ids] = -1
    return rows


class _Fused(NamedTuple):
    """The candidates of one hybrid query and their fused scores."""

    ids: np.ndarray         # int64 (m,) chunk ids, unique (ascending until _leading orders them)
    rows: np.ndarray        # int64 (m,) each one's vector-table row, -1 for none
    scores: np.ndarray      # float64 (m,) fused score in RRF units, boosts not yet added
    routed: np.ndarray | None = None   # bool (m,) section routing boosts the table's row


# ---------------------------------------------------------------------------------------------
# The retriever
# ---------------------------------------------------------------------------------------------

@dataclass
class _TableCache:
    """Per vector-table arrays computed once (the table is cached by the index until it changes)."""

    table: Any
    sections_upper: np.ndarray      # str (n,): ``sections`` as an array (whole-table masks)
    ids: np.ndarray                 # int64 (n,), ascending (the table is in id order)
    kinds: list[str]                # per row, as Python lists: scalar access in the ranking loop
    sections: list[str]             # upper case
    titles: list[str]
    bm25: Bm25 | None = None        # in-process BM25 of the same index generation, made lazily
    files: dict[str, list] = field(default_factory=dict)   # path -> its chunks (small-to-big)
    # int64 (n,) per row: its file's number (empty when the table has no paths)
    file_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    labels: LabelBm25 | None = None     # BM25 over heading trail + title + file name, lazily
    # (boosted section, routing kinds) -> bool (n + 1,): the rows section routing boosts, and
    # False for row -1
    routed: dict[tuple, np.ndarray] = field(default_factory=dict)
    chunks: dict[int, Any] = field(default_factory=dict)   # id -> stored chunk, read before
    # path -> windows.places of its chunks (small-to-big of the result list)
    places: dict[str, dict] = field(default_factory=dict)
    vocabulary: frozenset[str] | None = None    # every FTS5 token (coverage), lazily
    # query word -> its forms in the vocabulary (``coverage.word_forms``), for this generation
    word_forms: dict[str, Any] = field(default_factory=dict)
    # vector-table row -> its _Label, made on first use (the same for every query)
    row_labels: dict[int, Any] = field(default_factory=dict)
    # chunk id -> its text lower-cased (exact-name boosts), for chunks read before
    lowered: dict[int, str] = field(default_factory=dict)


def _table_cache(table) -> _TableCache:
    """The per-table arrays of a vector table (``store.VectorTable``), computed in full."""
    ids = np.asarray(table.ids, dtype=np.int64)
    file_of = np.zeros(0, dtype=np.int64)
    paths = getattr(table, "paths", None)
    if paths is not None and len(paths) == len(ids):
        numbers: dict[str, int] = {}
        file_of = np.fromiter(
            (numbers.setdefault(str(p), len(numbers)) for p in np.asarray(paths).tolist()),
            dtype=np.int64, count=len(ids))
    # str.upper, never np.char.upper: that one keeps the array's width and cuts a name whose
    # upper case is longer ("Straße" -> "STRASS" when it is the longest).
    sections = [str(x).upper() for x in np.asarray(table.sections).tolist()]
    return _TableCache(
        table=table,
        sections_upper=np.array(sections, dtype=str),
        ids=ids,
        kinds=[str(x) for x in np.asarray(table.kinds).tolist()],
        sections=sections,
        titles=([str(x) for x in np.asarray(table.titles).tolist()]
                if getattr(table, "titles", None) is not None else []),
        file_of=file_of,
    )


class Retriever:
    """Hybrid retrieval over one index with one embedder. The dock holds one per process.

    Args:
        settings: ``varaverk.config.Settings`` (index path, embedder, ``ai_min_score``).
        index: an open ``varaverk.index.store.Index``; None opens ``settings.index_path`` read-only
            (raises ``IndexMissing`` when there is none).
        embedder: a ``varaverk.embedding.Embedder``; None makes one from settings.
        fusion: "score" (min-max normalised dense + BM25/max, the default) or "rrf"
            (weighted reciprocal rank fusion, for comparison).
        mode: "hybrid" (the default), "dense" or "lexical" (single retrievers, for the
            evaluation's comparison; boosts still apply in "hybrid" only).
        routing: False disables section routing (for measuring it).
        reranker: a ``varaverk.retrieval.rerank.Reranker`` for the leading candidates; None makes one
            from settings (``AI_RERANK_URL``; none when empty, the default); False: none.
        preload: read all of each index generation's postings (``lexical.Bm25``'s
            ``preload``) and, when they fit the retriever's caches, all its chunks at its
            first query, for processes that answer many questions (the dock, the
            evaluation); a one-shot query reads only what its own words and results need.
        min_score: relevance threshold on the best cosine similarity; None reads
            ``settings.ai_min_score`` (0 there means ``DEFAULT_MIN_SCORE``).
        min_margin: the coverage rule's threshold on the dense margin over the pool edge, less
            the missed-words cost (``varaverk.retrieval.coverage``), in cosine units; None reads
            ``settings.ai_min_margin`` (0 there means ``coverage.MIN_MARGIN``).
    """

    def __init__(self, settings, index=None, embedder=None, *, fusion: str = FUSION,
                 mode: str = "hybrid", routing: bool = True, min_score: float | None = None,
                 min_margin: float | None = None,
                 dense_weight: float = DENSE_WEIGHT, lexical_weight: float = LEXICAL_WEIGHT,
                 section_boost: float = SECTION_BOOST, label_weight: float = LABEL_WEIGHT,
                 file_weight: float = FILE_WEIGHT,
                 routing_kinds: tuple[str, ...] | None = ROUTING_KINDS,
                 reranker: Any = None, preload: bool = False) -> None:
        if index is None:
            from varaverk.index.store import Index
            index = Index.open(settings.index_path, readonly=True)
        if embedder is None and mode != "lexical":
            from varaverk.embedding import make_embedder
            embedder = make_embedder(settings)
        if embedder is not None and mode != "lexical":
            # Vectors of another model live in another space: refuse rather than rank noise.
            index.check_compatible(embedder.backend, embedder.model)
        self.settings = settings
        self.index = index
        self.embedder = embedder
        self.fusion = fusion
        self.mode = mode
        self.routing = routing
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.section_boost = section_boost
        self.label_weight = label_weight
        self.file_weight = file_weight
        self.routing_kinds = routing_kinds
        self.preload = preload
        configured = getattr(settings, "ai_min_score", 0.0) or 0.0
        self.min_score = float(min_score if min_score is not None
                               else (configured if configured > 0 else DEFAULT_MIN_SCORE))
        configured = getattr(settings, "ai_min_margin", 0.0) or 0.0
        self.min_margin = float(min_margin if min_margin is not None
                                else (configured if configured > 0 else _coverage.MIN_MARGIN))
        self._cache: _TableCache | None = None
        self._build_lock = threading.Lock()   # one thread builds each per-table lexical index
        if reranker is None and mode == "hybrid":
            from varaverk.retrieval.rerank import make_reranker
            reranker = make_reranker(settings)
        self.reranker = reranker or None

    # -- tables ---------------------------------------------------------------------------

    def _table(self) -> _TableCache:
        """The ``_TableCache`` of the index's current vector table, made once per index
        generation. It is published whole: the dock shares one Retriever between threads,
        and another thread may be replacing it (a new generation) or still ranking on the
        previous one."""
        table = self.index.vector_table()
        cache = self._cache
        if cache is None or cache.table is not table:
            cache = _table_cache(table)
            if self.preload:
                self._preload_chunks(cache)
            self._cache = cache
        return cache

    def _preload_chunks(self, cache: _TableCache) -> None:
        """Read every chunk of the index into ``cache`` at once, with each file's
        ``windows.places``, when all of them fit the retriever's caches (``CHUNK_CACHE``
        chunks, ``FILE_CACHE`` files): a preloading retriever then reads no chunk row per
        query."""
        if not 0 < cache.ids.size <= CHUNK_CACHE:
            return
        chunks = self.index.all_chunks()
        files: dict[str, list] = {}
        for c in chunks:
            files.setdefault(c.path, []).append(c)
        if len(chunks) > CHUNK_CACHE or len(files) > FILE_CACHE:
            return
        cache.files.update(files)
        cache.chunks.update((c.id, c) for c in chunks)
        cache.places.update((path, windows.places(of_file)) for path, of_file in files.items())

    def _labels(self, cache: _TableCache) -> LabelBm25 | None:
        """The label field (heading trail, title, file name) of this table, built once (by
        one thread: the first query after a re-index may come from several at once)."""
        if cache.labels is None and cache.file_of.size and len(cache.titles) == len(cache.ids):
            with self._build_lock:
                if cache.labels is None:
                    paths = np.asarray(cache.table.paths).tolist()
                    sections = np.asarray(cache.table.sections).tolist()
                    cache.labels = LabelBm25([
                        f"{_file_stem(p)} {sec} {title}"
                        for p, sec, title in zip(paths, sections, cache.titles)])
        return cache.labels

    def _bm25(self, cache: _TableCache) -> Bm25 | None:
        """The in-process BM25 for this table's index generation (None if FTS5's tables
        cannot be read that way; then every lexical query goes to ``Index.fts_search``)."""
        if cache.bm25 is None:
            with self._build_lock:
                if cache.bm25 is None:
                    try:
                        cache.bm25 = Bm25(self.index, preload=self.preload)
                    except Exception as exc:  # e.g. an SQLite without fts5vocab
                        log.warning("in-process BM25 unavailable (%s); using FTS5 queries", exc)
                        cache.bm25 = False  # type: ignore[assignment]
        return cache.bm25 or None

    def _mask(self, cache: _TableCache, kind: str | None, section: str | None,
              sources: frozenset[str] | None = None) -> np.ndarray | None:
        """bool (n,): the vector-table rows the hard filters allow; None when no filter is
        set (every row may rank: ``Index.vector_table`` leaves unusable vectors out,
        ``store.usable_rows`` being the one validity rule), so an unfiltered query spends no
        array operation on a mask."""
        if not kind and not section and sources is None:
            return None
        mask = filter_mask(np.asarray(cache.table.kinds), cache.sections_upper, kind, section)
        if sources is not None:
            mask &= np.isin(_table_sources(cache.table), sorted(sources))
        return mask

    # -- search ---------------------------------------------------------------------------

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
        wanted = _source_set(sources)
        k = max(1, int(k))
        # Per-call values live in a _Query: the dock shares one Retriever between threads.
        # At least the coverage rule's leading results are ranked whatever k is, so asking for
        # fewer results never changes the verdict (the first k are the same either way).
        cache = self._table()
        q = _Query(text=query, k=max(k, _coverage.LEADING), kind=kind, section=section,
                   cache=cache, mask=self._mask(cache, kind, section, wanted),
                   names=exact_names(query), unknown=tuple(self._unknown_names(query, cache)),
                   sources=wanted, lexical=lexical_text(query))
        # fts_terms of lexical_text's words are those words (no edge punctuation, stop word,
        # one-character word or repeat is left in them): a second pass would find nothing
        q.terms = q.lexical.split()
        q.pool = max(POOL, k * 3)
        self._dense(q)
        if self.mode in ("hybrid", "lexical"):
            q.lex_ids, q.lex_scores = self._lexical_scored(q.lexical, q.pool, cache, q.mask,
                                                           q.terms)
            q.lex_rank = q.lex_ids.tolist()
            q.lex_of = dict(zip(q.lex_rank, q.lex_scores.tolist()))
        if self.mode == "dense":
            hits = self._single(q, [(cid, q.dense_of[cid]) for cid in q.dense_rank[:q.k]])
        elif self.mode == "lexical":
            return self._single(q, [(cid, q.lex_of[cid]) for cid in q.lex_rank[:k]])
        else:
            hits = self._hybrid(q)
        measured = self._coverage(q, hits) if hits else None
        hits = hits[:k]
        for h in hits:
            h.coverage = measured
        return hits

    def _coverage(self, q: _Query, hits: Sequence[Hit]) -> Coverage:
        """The coverage signals of a searched query (``varaverk.retrieval.coverage``): the best cosine
        over the ``REF_RANK``-th among the rows the filters allow, and the query's words that
        the leading hits (``coverage.LEADING``) do not hold, the index's absent ones among
        them. Without the index's vocabulary or in-process BM25 the margin decides alone."""
        ranked = q.dense_vals[:_coverage.REF_RANK]
        if len(ranked) < _coverage.REF_RANK and q.scores is not None:
            # dense mode ranks only k; hybrid pools at least REF_RANK whenever the rows allow
            ranked = q.scores[top_k(q.scores, _coverage.REF_RANK, q.mask)]
        margin = _coverage.pool_margin(ranked)
        vocabulary = self._vocabulary(q.cache)
        bm25 = self._bm25(q.cache)
        if bm25 is None or not vocabulary:
            return Coverage(margin, 0)
        forms = q.cache.word_forms

        def forms_of(word: str) -> list[list[str]] | None:
            return _kept(forms, word, lambda: _coverage.word_forms(word, vocabulary),
                         WORD_FORMS_CACHE)
        return _coverage.measure(margin, q.terms, forms_of,
                                 lambda toks: bm25.phrase_rows(toks)[0],
                                 [h.chunk.id for h in hits], bm25.rows)

    def _vocabulary(self, cache: _TableCache) -> frozenset[str]:
        """Every token of this index generation's FTS5 index, read once (empty when FTS5
        cannot list it: then the coverage rule looks up no words). A preloaded ``Bm25``
        already holds it."""
        if cache.vocabulary is None:
            bm25 = self._bm25(cache)
            preloaded = bm25.vocabulary if bm25 is not None else None
            with self._build_lock:
                if cache.vocabulary is None:
                    try:
                        cache.vocabulary = (self.index.fts_vocabulary() if preloaded is None
                                            else preloaded)
                    except Exception as exc:  # e.g. an SQLite without fts5vocab
                        log.warning("index vocabulary unavailable (%s); coverage uses the "
                                    "dense margin alone", exc)
                        cache.vocabulary = frozenset()
        return cache.vocabulary

    def _dense(self, q: _Query) -> None:
        """Dense candidates of a query (the pool in hybrid mode, k in dense mode) into ``q``."""
        ids = q.cache.ids
        if self.mode not in ("hybrid", "dense") or self.embedder is None or not len(ids):
            return
        vec = np.asarray(self.embedder.embed_query(q.text), dtype=np.float32)
        q.scores = dense_scores(q.cache.table.matrix, vec)
        rows = top_k(q.scores, q.pool if self.mode == "hybrid" else q.k, q.mask)
        q.dense_ids = ids[rows]
        q.dense_vals = q.scores[rows].astype(np.float64)
        q.dense_rank = q.dense_ids.tolist()
        if self.mode == "dense":  # only the dense-only results look cosines up by id
            q.dense_of = dict(zip(q.dense_rank, q.dense_vals.tolist()))
        if rows.size:
            q.best_dense = float(q.scores[rows[0]])

    def _single(self, q: _Query, chosen: list[tuple[int, float]]) -> list[Hit]:
        """Hits of a single-retriever mode (dense or lexical), in the retriever's order."""
        chunks = self._chunks([cid for cid, _ in chosen], q.cache)
        return [Hit(chunks[cid], s, dense=q.dense_of.get(cid), lexical=q.lex_of.get(cid),
                    best_dense=q.best_dense, unknown=q.unknown)
                for cid, s in chosen if cid in chunks]

    def _hybrid(self, q: _Query) -> list[Hit]:
        """Fuse dense and lexical candidates, boost, rank and merge split sections."""
        cache = q.cache
        name_ids = self._name_lookups(q)
        fused = self._fuse(q, name_ids)
        if not fused.ids.size:
            return []
        rt = route(q.text) if self.routing else None
        q.boosted_section = rt.section if rt else None
        hits = self._boosted_hits(q, self._leading(q, fused, name_ids))
        prefer_headers(hits)
        hits.sort(key=lambda h: (-h.score, h.chunk.id))
        if self.reranker is not None:
            hits = self._reranked(q, hits)
        else:
            hits = self._merge_read(hits, q.k, q.cache)
        hits = windows.demote_repeats(hits)
        mark_aliases(q.text, hits)
        return hits

    def _reranked(self, q: _Query, hits: list[Hit]) -> list[Hit]:
        """The leading ``reranker.top_n`` results reordered by the reranker's relevance
        (a chunk titled with a name in the query stays first); the fused order when the
        reranker fails. Scores stay the fused ones (the threshold never sees the reranker's)."""
        pool = self._merge_read(hits, max(q.k, self.reranker.top_n), q.cache)
        scores = self.reranker.scores(q.text, [h.chunk.text for h in pool])
        if scores is None:
            return pool[:q.k]
        order = sorted(range(len(pool)), key=lambda i: (not pool[i].exact, -scores[i], i))
        return [pool[i] for i in order[:q.k]]

    def _name_lookups(self, q: _Query) -> list[int]:
        """Chunk ids each exact name of the query finds lexically on its own (best first per
        name, in name order); their BM25 joins ``q.lex_of`` where the main pass had none."""
        name_ids: list[int] = []
        for name in q.names:
            ids, scores = self._lexical_scored(name, 20, q.cache, q.mask)
            for cid, bm25 in zip(ids.tolist(), scores.tolist()):
                if cid not in name_ids:
                    name_ids.append(cid)
                q.lex_of.setdefault(cid, bm25)
        return name_ids

    def _fuse(self, q: _Query, name_ids: list[int]) -> _Fused:
        """Every candidate of the query (dense, lexical, exact-name and label matches) with
        its fused score: the fusion of dense and lexical, plus the label field's evidence,
        plus per-file aggregation over all of that (``file_gains``)."""
        cache = q.cache
        label_rows, label_gain = self._label_evidence(q)
        label_ids = cache.ids[label_rows]
        ids = _union(q.dense_ids, q.lex_ids, np.asarray(name_ids, dtype=np.int64), label_ids)
        scores = np.zeros(ids.size, dtype=np.float64)
        if self.fusion == "score":
            self._score_fusion(q, ids, scores)
        else:
            fused = rrf([q.dense_rank, q.lex_rank], RRF_K,
                        [self.dense_weight, self.lexical_weight])
            if fused:
                keys = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
                scores[np.searchsorted(ids, keys)] = np.fromiter(
                    fused.values(), dtype=np.float64, count=len(fused))
        if label_ids.size:
            scores[ids.searchsorted(label_ids)] += label_gain
        rows = _rows_of(cache.ids, ids)
        if self.file_weight and cache.file_of.size and ids.size:
            files = cache.file_of[rows]
            files[rows < 0] = -1
            gains = file_gains(scores, files, self.file_weight * _UNIT)
            if gains is not None:
                scores += gains
        return _Fused(ids, rows, scores)

    def _label_evidence(self, q: _Query) -> tuple[np.ndarray, np.ndarray]:
        """The label field's evidence: ``(vector-table rows int64, gains float64)`` of the
        best ``LABEL_POOL`` label matches the filters allow, each gain its BM25 over heading
        trail, title and file name divided by the best label score, times ``label_weight``
        (in fused units); empty arrays when no label matches."""
        labels = self._labels(q.cache) if self.label_weight else None
        if labels is None:
            return _EMPTY_IDS, _EMPTY_SCORES
        rows, scores = labels.score(q.text)
        if rows.size and q.mask is not None:
            keep = q.mask[rows]
            rows, scores = rows[keep], scores[keep]
        if not rows.size:
            return _EMPTY_IDS, _EMPTY_SCORES
        if rows.size > LABEL_POOL:
            best = np.argpartition(-scores, LABEL_POOL - 1)[:LABEL_POOL]
            rows, scores = rows[best], scores[best]
        unit = self.label_weight * _UNIT / float(scores.max())
        return rows, scores * unit

    def _routed(self, kind: str, section: str, boosted: str | None) -> bool:
        """Whether section routing boosts a chunk of this kind and (upper-case) section."""
        return bool(boosted) and section == boosted and (
            self.routing_kinds is None or kind in self.routing_kinds)

    def _routed_rows(self, cache: _TableCache, boosted: str | None) -> np.ndarray | None:
        """bool (n + 1,): the rows section routing boosts for ``boosted`` (None: no section),
        then False, which row -1 (a candidate without a vector row) reads; computed once per
        table and section."""
        if not boosted:
            return None
        key = (boosted, self.routing_kinds)
        found = cache.routed.get(key)
        if found is None:
            found = np.append(cache.sections_upper == boosted, False)
            if self.routing_kinds is not None:
                found[:-1] &= np.isin(np.asarray(cache.table.kinds), list(self.routing_kinds))
            cache.routed[key] = found
        return found

    def _leading(self, q: _Query, fused: _Fused, name_ids: list[int]) -> _Fused:
        """The candidates worth reading: the best by fused score plus section boost (what the
        vector table already knows; ties: lower id first), then every chunk an exact name
        found. A chunk outside them cannot reach the top k except through an exact name.

        Returns:
            Their ids, table rows and fused scores (boosts not added), in that order, with
            ``routed``: bool (m,), whether section routing boosts the table's row.
        """
        routed = self._routed_rows(q.cache, q.boosted_section)
        if routed is None:
            boosted, prelim = np.zeros(fused.ids.size, dtype=bool), fused.scores
        else:
            boosted = routed[fused.rows]
            prelim = fused.scores + self.section_boost * _UNIT * boosted
        # The ids ascend, so a stable sort puts the lower id first among equal scores.
        order = (-prelim).argsort(kind="stable")[: q.k * 3 + 10]
        if name_ids:
            chosen = set(fused.ids[order].tolist())
            extra = [cid for cid in name_ids if cid not in chosen]
            if extra:
                order = np.concatenate((order, fused.ids.searchsorted(extra)))
        return _Fused(fused.ids[order], fused.rows[order], fused.scores[order], boosted[order])

    def _boosted_hits(self, q: _Query, lead: _Fused) -> list[Hit]:
        """The Hits of the leading candidates with section and name boosts applied, in the
        order given; a candidate that fails the filters or vanished since the vector table
        was read is left out. Chunk text is read only where ranking needs it: for the name
        boosts, and for candidates the vector table does not describe (no usable vector)."""
        cache = q.cache
        q.norm_names = names = [normalise_title(n) for n in q.names]
        have_labels = len(cache.titles) == len(cache.ids)
        keep, rows = lead.ids.tolist(), lead.rows.tolist()
        read = keep if (q.norm_names or not have_labels) else [c for c, r in zip(keep, rows)
                                                                 if r < 0]
        chunks = self._chunks(read, cache)
        # Every row's cosine is known when dense ran (for the threshold and the report).
        dense = (q.scores[lead.rows].tolist() if q.scores is not None
                 else [None] * len(keep))
        bonus = self.section_boost * _UNIT
        lex_of, row_labels = q.lex_of, cache.row_labels
        hits: list[Hit] = []
        for cid, row, score, routed, cos in zip(keep, rows, lead.scores.tolist(),
                                                lead.routed.tolist(), dense):
            chunk = chunks.get(cid)
            if row < 0 or not have_labels:
                if chunk is None or not self._passes(chunk, q.kind, q.section, q.sources):
                    continue
                boosted = self._routed(chunk.kind, (chunk.section or "").upper(),
                                       q.boosted_section)
                label = chunk
            elif chunk is None:
                if names:
                    continue  # removed since the vector table was read
                label, boosted = row_labels.get(row), routed
                if label is None:  # _kept inline: a closure per candidate costs as much again
                    if len(row_labels) >= CHUNK_CACHE:
                        row_labels.clear()
                    label = row_labels[row] = _Label(cid, cache.kinds[row], cache.titles[row])
            else:
                label = chunk
                # the table's verdict holds unless the chunk now read has another kind
                boosted = routed if chunk.kind == cache.kinds[row] else self._routed(
                    chunk.kind, cache.sections[row], q.boosted_section)
            if boosted:
                score += bonus
            exact = False
            if names:
                name_bonus, exact = _name_bonus(names, label.title or "",
                                                self._lowered(cache, chunk))
                score += name_bonus
            # Hit(chunk, score, dense, lexical, exact, section_boosted, best_dense, unknown):
            # positional, as keywords cost more than the rest of this loop's work
            hits.append(Hit(label, score, cos if row >= 0 else None, lex_of.get(cid), exact,
                            boosted, q.best_dense, q.unknown))
        return hits

    @staticmethod
    def _lowered(cache: _TableCache, chunk) -> str:
        """A read chunk's text lower-cased, kept with ``cache`` (up to ``CHUNK_CACHE``): the
        exact-name boosts look for names in the same leading chunks query after query."""
        return _kept(cache.lowered, chunk.id, chunk.text.lower, CHUNK_CACHE)

    def _merge_read(self, hits: list[Hit], k: int, cache: _TableCache) -> list[Hit]:
        """``windows.merge_parts`` over ranked hits whose chunks may be labels only (a split
        section, a YAML block or a tiny chunk's parent section comes back as one result): the
        chunks of the leading hits are read as merging reaches them (``_read_in_turn``), all
        from the table the search ranked on (``cache``)."""
        return windows.merge_parts(self._read_in_turn(hits, k, cache), k,
                                   lambda path: self._places(path, cache))

    def _read_in_turn(self, hits: list[Hit], first: int, cache: _TableCache
                      ) -> Iterator[Hit]:
        """``hits`` in order, each with its stored chunk in place of a label: read ``first``
        at a time, then as many again as were read before (merging that consumed hits asks
        for more), so a caller that stops early reads no more; a hit whose chunk vanished
        since the vector table was read is left out."""
        start, stop = 0, max(1, first)
        while start < len(hits):
            batch = hits[start:stop]
            missing = [h.chunk.id for h in batch if isinstance(h.chunk, _Label)]
            found = self._chunks(missing, cache) if missing else {}
            for h in batch:
                if isinstance(h.chunk, _Label):
                    h.chunk = found.get(h.chunk.id, h.chunk)
                    if isinstance(h.chunk, _Label):
                        continue
                yield h
            start, stop = stop, stop * 2

    def _score_fusion(self, q: _Query, ids: np.ndarray, scores: np.ndarray) -> None:
        """Min-max normalised dense plus BM25/max, weighted, scaled to RRF units, into
        ``scores`` (float64 (m,), aligned with ``ids``, which holds every candidate)."""
        # Both lists are best first: their first value is their maximum, the last their minimum.
        if q.dense_ids.size:
            lo, hi = float(q.dense_vals[-1]), float(q.dense_vals[0])
            span = (hi - lo) or 1.0
            scores[ids.searchsorted(q.dense_ids)] = \
                self.dense_weight * (q.dense_vals - lo) / span
        if q.lex_ids.size:
            top = float(q.lex_scores[0]) or 1.0
            scores[ids.searchsorted(q.lex_ids)] += self.lexical_weight * q.lex_scores / top
        scores *= _UNIT

    def _lexical_scored(self, text: str, limit: int, cache: _TableCache,
                        mask: np.ndarray | None, terms: list[str] | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 hits for free text, best first (ties: lower id first), at most ``limit``,
        restricted to rows the mask allows (None: every row): ``(chunk ids int64, scores
        float64)``. ``terms``: ``fts_terms(text)`` when the caller has it already.

        Scored in-process from FTS5's own postings (``varaverk.retrieval.lexical.Bm25``: FTS5's numbers,
        without a ``MATCH`` per query); text only FTS5 can tokenize goes to
        ``Index.fts_search``, which makes it a safe MATCH expression. Chunks without a vector
        row (none in a healthy index) are kept and filtered later by their own kind/section.
        """
        if not text:
            return _EMPTY_IDS, _EMPTY_SCORES
        bm25 = self._bm25(cache)
        scored = None
        if bm25 is not None:
            try:
                scored = bm25.score(fts_terms(text) if terms is None else terms)
            except Exception as exc:  # an unreadable posting costs the fast path, not the query
                log.warning("in-process BM25 failed (%s); using FTS5", exc)
        if scored is None:
            found = self._lexical_fts(text, limit, cache, mask)
            return (np.array([c for c, _ in found], dtype=np.int64),
                    np.array([b for _, b in found], dtype=np.float64))
        rows, scores = scored
        if not rows.size:
            return _EMPTY_IDS, _EMPTY_SCORES
        ids = cache.ids
        if ids.size and mask is not None:
            pos = np.minimum(np.searchsorted(ids, rows), ids.size - 1)
            in_table = ids[pos] == rows
            allowed = ~in_table | mask[pos]
            rows, scores = rows[allowed], scores[allowed]
        if rows.size > limit:
            kth = np.partition(scores, rows.size - limit)[rows.size - limit]
            keep = scores >= kth
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((rows, -scores))[:limit]
        return rows[order].astype(np.int64, copy=False), scores[order].astype(np.float64, copy=False)

    def _lexical_fts(self, text: str, limit: int, cache: _TableCache,
                     mask: np.ndarray | None) -> list[tuple[int, float]]:
        """``_lexical_scored`` through an FTS5 MATCH, as ``[(chunk id, BM25)]`` best first
        (the reference path; non-ASCII queries)."""
        try:
            found = self.index.fts_search(text, limit * 2)
        except Exception as exc:  # a bad MATCH must cost the lexical half, not the query
            log.warning("lexical search failed (%s); using dense results only", exc)
            return []
        # A chunk without a vector row is kept (filtered later by its own kind and section).
        rows = (_rows_of(cache.ids, np.array([c for c, _ in found], dtype=np.int64))
                if mask is not None else None)
        out = []
        for i, (cid, bm25) in enumerate(found):
            if rows is not None and rows[i] >= 0 and not mask[rows[i]]:
                continue
            out.append((int(cid), float(bm25)))
            if len(out) >= limit:
                break
        return out

    def _file_chunks(self, path: str, cache: _TableCache | None = None) -> list[Any]:
        """Every chunk of one file in document order, kept for the index generation the
        vector table belongs to (up to ``FILE_CACHE`` files), since small-to-big reads the
        same long pages again and again. ``cache``: the table a search already holds (None:
        ask the index for its current one)."""
        return _kept((cache or self._table()).files, path,
                     lambda: self.index.chunks_for_path(path), FILE_CACHE)

    def _places(self, path: str, cache: _TableCache) -> dict[int, windows.Place]:
        """``windows.places`` of one file's chunks, kept with the table (up to ``FILE_CACHE``
        files): small-to-big reads the same pages again, and where each chunk sits among its
        siblings is the same for every query of an index generation."""
        return _kept(cache.places, path, lambda: windows.places(self._file_chunks(path, cache)),
                     FILE_CACHE)

    def _chunks(self, ids: list[int], cache: _TableCache) -> dict[int, Any]:
        """{id: stored chunk} of those ids that exist; chunks read once are kept with
        ``cache``, the table of their index generation (up to ``CHUNK_CACHE``), and not read
        again."""
        if not ids:
            return {}
        kept = cache.chunks
        # One look-up a chunk: another thread may empty the cache between two of them.
        found = {cid: c for cid in ids if (c := kept.get(cid)) is not None}
        missing = [cid for cid in ids if cid not in found]
        if missing:
            if len(kept) + len(missing) > CHUNK_CACHE:
                kept.clear()
            for c in self.index.get_chunks(missing):
                found[c.id] = kept[c.id] = c
        return found

    @staticmethod
    def _passes(chunk, kind: str | None, section: str | None,
                sources: frozenset[str] | None = None) -> bool:
        if kind and chunk.kind != kind:
            return False
        if sources is not None and getattr(chunk, "source", "repo") not in sources:
            return False
        if section and (chunk.section or "").upper() != section.strip().upper():
            return False
        return True

    def unknown_names(self, query: str) -> list[str]:
        """Names in ``query`` that no chunk contains: the question is about something else.

        A *name* is a word that looks like a proper or technical name rather than ordinary
        prose: capitalised other than at the start of a sentence ("Minecraft"), all capitals
        ("S3", "TOTP"), or holding a digit, underscore or dot ("MOVER_STOP_TIMEOUT", "k8s");
        not a quantity ("4G", "2GB": a leading digit) nor a two-letter abbreviation ("PC").
        Ordinary lower-case words, hyphenated ones included ("high-res", "brute-forcing"), are
        never counted: questions paraphrase and their absence means little.
        Each candidate is looked up in the lexical index (a cached posting list after the
        first time).
        """
        return self._unknown_names(query, self._table())

    def _unknown_names(self, query: str, cache: _TableCache) -> list[str]:
        """``unknown_names`` over the index generation of ``cache``."""
        bm25 = self._bm25(cache)
        out: list[str] = []
        for word in named_words(query):
            try:
                found = bm25.contains(word) if bm25 is not None else None
                if found is None:
                    found = bool(self.index.fts_search(word, 1))
            except Exception:  # a lookup failure must not make the answer "not covered"
                continue
            if not found:
                out.append(word)
        return out

    # -- relevance ------------------------------------------------------------------------

    def confident(self, hits: Sequence[Hit]) -> bool:
        """Whether the hits are relevant enough to answer from (the one entry point of the
        "not covered" decision; no model is called).

        In order: False for no hits; True when a name written in the query is a hit's title;
        False when the query names something the index never mentions (``Hit.unknown``:
        "Minecraft", "Kubernetes"); True when the query names a hit's note alias; False when
        the best cosine similarity (``Hit.best_dense``, else the hits' own) is below
        ``min_score``; else the coverage rule (``Hit.coverage``, ``varaverk.retrieval.coverage``): False
        when the best cosine stands out from the pool edge by less than ``min_margin`` after
        the cost of the query's words the leading hits do not hold. Lexical-only mode: any BM25
        hit counts. Below it, callers answer ``NOT_COVERED`` with the hits listed as the nearest
        sources, and call no model.
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
        if best < self.min_score:
            return False
        measured = next((h.coverage for h in hits if h.coverage is not None), None)
        return measured is None or measured.covered(self.min_margin)

    # -- small-to-big ---------------------------------------------------------------------

    def expand(self, hits: Sequence[Hit], budget_chars: int) -> list[list[Any]]:
        """A prompt's context groups for ``hits`` within ``budget_chars`` characters, labels
        counted: ``varaverk.retrieval.windows.expand`` over this index's chunks (shapes there)."""
        # One table for the whole packing: ``_table`` asks the index for its generation (an
        # SQL query), and expand reads a file's chunks for every hit.
        cache = self._table()
        return windows.expand(hits, budget_chars, lambda path: self._file_chunks(path, cache))


_MISSING = object()


def _kept(store: dict, key: Any, make: Callable[[], Any], limit: int) -> Any:
    """``store[key]``, made with ``make()`` and kept the first time: the retriever's bounded
    caches of one index generation (the store is emptied when it holds ``limit`` entries).
    One look-up, so another thread emptying the store meanwhile costs a recomputation, never
    a KeyError."""
    found = store.get(key, _MISSING)
    if found is _MISSING:
        if len(store) >= limit:
            store.clear()
        found = store[key] = make()
    return found


class _Label(NamedTuple):
    """What ranking needs of a chunk before its text is read (from the vector table)."""

    id: int
    kind: str
    title: str


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
