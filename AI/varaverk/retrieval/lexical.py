"""BM25 over FTS5's own postings, scored in-process with numpy (the same numbers FTS5 gives).

SQLite FTS5 stays the lexical index of record: it tokenizes and stores every chunk, and
``Index.fts_search`` (a ``MATCH`` ordered by ``bm25()``) is the reference. Running that
``MATCH`` costs milliseconds per query on a large index, because FTS5 calls its BM25 function
row by row and looks up each row's length, while a whole hybrid query has a budget of its own
(the targets in ``tests/benchmarks/bench_scoring.py``, "hybrid search").
``Bm25`` computes the identical score from the same data, read once and cached: the token
count of every row (FTS5's ``docsize`` table) and, per query token on first use, its
occurrences (an ``fts5vocab`` instance table). After that a query is a few numpy operations
over the matching rows.

The formula is FTS5's ``bm25()`` with every column weight 1 (as ``fts_search`` calls it),
k1 = 1.2, b = 0.75, for a query that ORs one phrase per query word (``varaverk.text.fts_query``)::

    score(D) = Σ_phrases IDF(p) · f(p, D) · (k1 + 1) / (f(p, D) + k1 · (1 − b + b · |D| / avgdl))
    IDF(p)   = ln((N − n(p) + 0.5) / (n(p) + 0.5)), or 1e-6 when that is ≤ 0

with f(p, D) the phrase's occurrences in the row (all columns), |D| the row's token count,
N the rows and n(p) the rows holding the phrase; evaluated in the same order as SQLite's C
code, so scores match to the last bit and ties stay ties.

Only the index's own tokenizer knows how it splits non-ASCII text (``unicode61`` folding and
diacritics), so a query with a non-ASCII word, or a word with no token at all, returns None
and the caller asks FTS5 itself. ASCII words split exactly as ``unicode61`` with
``tokenchars '_'`` does (``varaverk.text.fts_tokens``).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from varaverk.text import STOPWORDS, fts_tokens, label_tokens

K1 = 1.2
B = 0.75
# Posting values (8 bytes each) kept per index generation before the caches restart: 40 MB.
MAX_CACHED_VALUES = 5_000_000
# Tokens in the index up to which ``Bm25(preload=True)`` reads every posting list at once
# (32 bytes kept per token and row holding it).
MAX_PRELOADED_TOKENS = 1_000_000

# Position keys for phrase matching: row id | column (4 bits) | token offset (24 bits).
_COL_SHIFT = 24
_DOC_SHIFT = 28


class Bm25:
    """FTS5's BM25 for one index generation, scored in-process.

    Args:
        index: an open ``varaverk.index.store.index.Index`` (``fts_doc_lengths``, ``fts_postings``,
            ``fts_all_postings``).
        preload: read every token's posting list at construction, in one scan, when the index
            holds at most ``MAX_PRELOADED_TOKENS`` tokens: for long-lived processes, whose
            queries then read nothing for single-token words. Otherwise (and always for the
            positions that phrases need) posting lists are read lazily, per token.

    Build once per index generation (the retriever keeps it beside the vector table and drops
    it when the table changes); reads every row's length at construction.
    """

    def __init__(self, index, preload: bool = False) -> None:
        self.index = index
        ids, lengths = index.fts_doc_lengths()
        self.ids = np.asarray(ids, dtype=np.int64)             # sorted (id order)
        self.lengths = np.asarray(lengths, dtype=np.float64)
        self.rows = int(self.ids.size)
        total = float(self.lengths.sum())
        self.avgdl = total / float(self.rows) if self.rows else 0.0
        # The part of the BM25 denominator that depends on the row alone, per row (id order).
        self._norm = K1 * (1 - B + B * self.lengths / self.avgdl) if self.avgdl else self.lengths
        self._postings: dict[str, tuple[np.ndarray, ...]] = {}
        self._positions: dict[str, tuple[np.ndarray, ...]] = {}
        self._phrases: dict[tuple[str, ...], tuple[np.ndarray, ...]] = {}
        self._cached = 0
        # token -> its slice of ``self._flat`` (``_phrase``'s four arrays for every token)
        self._preloaded: dict[str, tuple[int, int]] | None = None
        self._flat: tuple[np.ndarray, ...] = ()
        if preload and 0 < total <= MAX_PRELOADED_TOKENS:
            self._preload()

    def _preload(self) -> None:
        """``_phrase`` of every single token at once, from one scan of the postings
        (``Index.fts_all_postings``): per element the same float64 operations in the same
        order as ``_phrase``, so scores are bit-identical."""
        toks, sizes, docs = self.index.fts_all_postings()
        if not docs.size:  # emptied since the lengths were read: stay lazy
            return
        # One key per (token, row) pair, so that a run of equal keys is one token's
        # occurrences in one row, ascending by token, then row.
        span = int(docs.max()) + 1
        pairs, freq = _runs(np.repeat(np.arange(len(toks), dtype=np.int64) * span, sizes) + docs)
        run_token, rows = np.divmod(pairs, span)
        per_token = np.bincount(run_token, minlength=len(toks))
        idf = np.array([_idf(float(self.rows), float(hits)) for hits in per_token.tolist()])
        pos = np.searchsorted(self.ids, rows)
        part = idf[run_token] * ((freq * (K1 + 1.0)) / (freq + self._norm[pos]))
        for a in (rows, freq, pos, part):
            a.flags.writeable = False
        self._flat = (rows, freq, pos, part)
        bounds = np.cumsum(per_token).tolist()
        self._preloaded = dict(zip(toks, zip([0] + bounds[:-1], bounds)))

    @property
    def vocabulary(self) -> frozenset[str] | None:
        """Every token the index holds (``Index.fts_vocabulary``), when preloaded; else None."""
        return None if self._preloaded is None else frozenset(self._preloaded)

    def _posting(self, token: str, positions: bool = False) -> tuple[np.ndarray, ...]:
        """Row ids of every occurrence of ``token``; with ``positions`` also (column numbers,
        token offsets), read only for tokens of a phrase."""
        cache = self._positions if positions else self._postings
        hit = cache.get(token)
        if hit is None:
            hit = self.index.fts_postings(token, positions=positions)
            self._reserve(sum(a.size for a in hit))
            cache[token] = hit
        return hit

    def _reserve(self, values: int) -> None:
        """Count ``values`` more cached numbers; past ``MAX_CACHED_VALUES`` start afresh."""
        self._cached += values
        if self._cached > MAX_CACHED_VALUES:
            self._postings.clear()
            self._positions.clear()
            self._phrases.clear()
            self._cached = values

    def phrase_rows(self, toks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Rows holding the phrase ``toks`` (consecutive tokens in one column) and how many
        times: ``(sorted unique row ids int64, occurrences float64)`` (cached per phrase)."""
        rows, freq, _, _ = self._phrase(toks)
        return rows, freq

    def _phrase(self, toks: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:
        """``phrase_rows`` plus each row's position in ``self.ids`` and the phrase's BM25
        term in it, ``IDF · f · (k1 + 1) / (f + k1 · (1 − b + b · |D| / avgdl))``: every
        part of it is fixed for the index generation, so it is computed once per phrase.
        The arrays are read-only (they are cached)."""
        key = tuple(toks)
        hit = self._phrases.get(key)
        if hit is not None:
            return hit
        if len(toks) == 1 and self._preloaded is not None:
            start, end = self._preloaded.get(toks[0], (0, 0))
            rows, freq, pos, part = self._flat
            hit = self._phrases[key] = (rows[start:end], freq[start:end], pos[start:end],
                                        part[start:end])
            self._reserve(4)  # views: only the cache entry itself is counted
            return hit
        if len(toks) == 1:
            docs = self._posting(toks[0])[0]
        else:
            # One key per position; the phrase occurs where token i sits at start + i.
            docs, col, off = self._posting(toks[0], positions=True)
            start = (docs << _DOC_SHIFT) | (col << _COL_SHIFT) | off
            for i, tok in enumerate(toks[1:], start=1):
                if not start.size:
                    break
                d2, c2, o2 = self._posting(tok, positions=True)
                later = ((d2 << _DOC_SHIFT) | (c2 << _COL_SHIFT) | o2) - i
                start = start[np.isin(start, later)]
            docs = start >> _DOC_SHIFT
        if docs.size:
            rows, freq = _runs(docs)
            pos = np.searchsorted(self.ids, rows)
            norm = self._norm[pos]
            # Same operations, same order as sqlite's fts5Bm25Function.
            part = _idf(float(self.rows), float(rows.size)) * ((freq * (K1 + 1.0)) / (freq + norm))
        else:
            rows = pos = np.zeros(0, dtype=np.int64)
            freq = part = np.zeros(0, dtype=np.float64)
        hit = (rows, freq, pos, part)
        for a in hit:
            a.flags.writeable = False
        self._reserve(4 * rows.size)
        self._phrases[key] = hit
        return hit

    def contains(self, word: str) -> bool | None:
        """Whether any row holds ``word`` (as FTS5 would match the quoted word); None when the
        word cannot be tokenized here (ask FTS5)."""
        toks = fts_tokens(word)
        if not toks:
            return None
        return bool(self.phrase_rows(toks)[0].size)

    def score(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """BM25 of every row matching any of ``words`` (each word one phrase, ORed).

        Args:
            words: the query words exactly as ``varaverk.text.fts_terms`` gives them.

        Returns:
            ``(row ids int64 ascending, scores float64)``, higher is better (FTS5's bm25()
            negated, as ``Index.fts_search`` reports it); None when a word cannot be tokenized
            here (the caller falls back to ``Index.fts_search``).
        """
        found = self.score_rows(words)
        return None if found is None else (self.ids[found[0]], found[1])

    def score_rows(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """``score`` with each row given by its position in ``self.ids`` (int64 ascending):
        a caller that keeps a few of the rows looks up only their ids."""
        phrases = []
        for w in words:
            toks = fts_tokens(w)
            if not toks:
                return None
            phrases.append(toks)
        if not phrases or not self.rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        found = [hit for hit in map(self._phrase, phrases) if hit[0].size]
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        # phrase by phrase, as FTS5's C loop adds them
        return summed_by_row([hit[2] for hit in found], [hit[3] for hit in found], self.rows)


def summed_by_row(rows: Sequence[np.ndarray], weights: Sequence[np.ndarray],
                  n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's weights added up in the order the lists are given, starting from 0.0 (the
    order FTS5's bm25() adds a row's phrase terms in, so the sums are bit-identical).

    Args:
        rows: one int64 array per term: the rows (0 ≤ row < n) holding it, ascending, distinct.
        weights: float64 arrays aligned with ``rows``, every weight > 0.
        n: the number of rows.

    Returns:
        ``(rows int64 ascending, totals float64)`` of the rows holding any term (new arrays).

    Costs what the terms' postings cost when they hold few of the rows (``SPARSE_SHARE``), a
    pass over all ``n`` rows otherwise (where that pass is the cheaper).
    """
    if len(rows) == 1:
        return rows[0].copy(), weights[0].copy()
    held = np.concatenate(rows)
    if n < SPARSE_FROM or held.size * SPARSE_SHARE > n:
        # bincount adds in array order: each row's weights term by term.
        total = np.bincount(held, weights=np.concatenate(weights), minlength=n)
        held = np.flatnonzero(total > 0)
        return held, total[held]
    # Only the postings: each one's place among the distinct rows (a stable sort keeps every
    # term's rows ascending), then the terms added in turn, as bincount adds them.
    order = held.argsort(kind="stable")
    ranked = held[order]
    first = np.empty(ranked.size, dtype=bool)
    first[0] = True
    np.not_equal(ranked[1:], ranked[:-1], out=first[1:])
    place = np.empty(held.size, dtype=np.int64)
    place[order] = np.cumsum(first) - 1
    total = np.zeros(int(place[order[-1]]) + 1, dtype=np.float64)
    start = 0
    for w in weights:
        total[place[start:start + w.size]] += w    # a term's rows are distinct
        start += w.size
    return ranked[first], total


# Rows from which ``summed_by_row`` may add only the postings, and the share of the rows the
# postings must stay under for it (1/8): below either a pass over every row costs less
# (tests/RESULTS.md, the perfq2 entry).
SPARSE_FROM = 20000
SPARSE_SHARE = 8


def _idf(n: float, hits: float) -> float:
    """FTS5's IDF of a phrase held by ``hits`` of ``n`` rows (as sqlite computes it)."""
    idf = math.log((n - hits + 0.5) / (hits + 0.5))
    return 1e-6 if idf <= 0.0 else idf


def _runs(docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values int64, how many times each float64)`` of a non-empty int64 array,
    values ascending: ``np.unique(docs, return_counts=True)`` without its sort and overheads
    when ``docs`` is already in order, as FTS5 returns a posting (row id order)."""
    if docs.size > 1 and (docs[1:] < docs[:-1]).any():
        docs = np.sort(docs)
    starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
    ends = np.append(starts[1:], docs.size)
    return docs[starts], (ends - starts).astype(np.float64)


class LabelBm25:
    """BM25 over one short text per row (a chunk's heading trail, title and file name), kept in
    memory: the *label* as a lexical field of its own, so a query naming a section ("the
    restream port", "cache factor") finds the chunk whose heading says so even when its body
    spends its words elsewhere.

    Tokens are ``varaverk.text.label_tokens`` (underscores and dots split, so
    ``max_upload_size`` also matches "upload size"), ``varaverk.text.STOPWORDS`` removed;
    k1 = 1.2, b = 0.75 as in ``Bm25``. An index's labels are stored tokenized at write time:
    ``StoredLabelBm25`` reads the same statistics from it and gives the same scores.

    Args:
        labels: one string per row, aligned with the vector table.
    """

    def __init__(self, labels: Sequence[str]) -> None:
        postings: dict[str, dict[int, int]] = {}
        lengths = np.zeros(len(labels), dtype=np.float64)
        for row, label in enumerate(labels):
            tokens = [t for t in label_tokens(label) if t not in STOPWORDS]
            lengths[row] = len(tokens)
            for t in tokens:
                counts = postings.setdefault(t, {})
                counts[row] = counts.get(row, 0) + 1
        self.n = len(labels)
        norm = _label_norm(lengths)
        # Every token's rows and each row's BM25 term weight, computed once per table in one
        # pass over all postings; a token maps to its slice of the flat arrays.
        counts = list(postings.values())
        sizes = np.fromiter(map(len, counts), dtype=np.int64, count=len(counts))
        rows = np.fromiter((r for c in counts for r in c), dtype=np.int64, count=int(sizes.sum()))
        tf = np.fromiter((f for c in counts for f in c.values()), dtype=np.float64,
                         count=rows.size)
        idf = np.repeat([_label_idf(self.n, size) for size in sizes.tolist()], sizes)
        self._rows = rows
        self._weights = _label_weights(idf, tf, norm[rows])
        ends = np.cumsum(sizes).tolist()
        self._postings = dict(zip(postings, zip([0] + ends[:-1], ends)))

    def _term(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows int64 ascending, BM25 term weights float64) of one token; None when no
        label holds it."""
        where = self._postings.get(token)
        if where is None:
            return None
        start, end = where
        return self._rows[start:end], self._weights[start:end]

    def score(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows int64 ascending, scores float64) of the rows whose label holds a query token;
        each distinct query token counts once, its weights added in the order the tokens
        first occur. Empty arrays when none does."""
        seen: set[str] = set()
        found = []
        for t in label_tokens(text):
            if len(t) > 1 and t not in seen and t not in STOPWORDS:
                seen.add(t)
                term = self._term(t)
                if term is not None:
                    found.append(term)
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return summed_by_row([rows for rows, _ in found], [w for _, w in found], self.n)


class StoredLabelBm25(LabelBm25):
    """``LabelBm25`` of a vector table from the label statistics its index stored at write
    time (``Index.label_lengths``, ``Index.label_postings``): opening reads one length per row,
    and each query token's rows are read on first use and kept. The same floats in the same
    order as ``LabelBm25`` over the table's labels, so scores are bit-identical.

    Args:
        index: an open ``varaverk.index.store.index.Index``.
        ids: int64 (n,), the vector table's chunk ids, ascending (its rows).

    Raises ValueError when the stored labels do not cover every row (the caller builds a
    ``LabelBm25`` from the table instead).
    """

    def __init__(self, index, ids: np.ndarray) -> None:
        self.index = index
        self.ids = ids
        self.n = int(ids.size)
        stored, counts = index.label_lengths()
        pos = np.searchsorted(stored, ids)
        if self.n and (pos.max() >= stored.size or (stored[pos] != ids).any()):
            raise ValueError("the index holds no stored label for some chunks")
        self._norm = _label_norm(counts[pos].astype(np.float64))
        self._terms: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}

    def _term(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        found = self._terms.get(token, _UNREAD)
        if found is _UNREAD:
            found = self._read_term(token)
            if len(self._terms) >= MAX_LABEL_TERMS:
                self._terms.clear()
            self._terms[token] = found
        return found

    def _read_term(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.n:
            return None
        docs = self.index.label_postings(token)
        rows = np.searchsorted(self.ids, docs)
        if rows.size:
            np.minimum(rows, self.n - 1, out=rows)
            rows = rows[self.ids[rows] == docs]   # rows of the table only
        if not rows.size:
            return None
        rows, tf = _runs(rows)
        weights = _label_weights(_label_idf(self.n, rows.size), tf, self._norm[rows])
        for a in (rows, weights):
            a.flags.writeable = False
        return rows, weights


# Query tokens whose label rows a ``StoredLabelBm25`` keeps before it starts afresh.
MAX_LABEL_TERMS = 20000
_UNREAD = object()


def _label_norm(lengths: np.ndarray) -> np.ndarray:
    """float64 (n,): the part of a label's BM25 denominator that depends on its length alone,
    ``k1 · (1 − b + b · |L| / avg |L|)`` (avg 1.0 for an empty table or empty labels)."""
    avg = float(lengths.mean()) if lengths.size and lengths.sum() else 1.0
    return K1 * (1 - B + B * lengths / avg)


def _label_idf(n: int, size: int) -> float:
    """The label field's IDF of a token held by ``size`` of ``n`` labels (always > 0)."""
    return math.log((n - size + 0.5) / (size + 0.5) + 1.0)


def _label_weights(idf, tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """float64: ``idf · tf · (k1 + 1) / (tf + norm)`` per element (idf a float or an array
    aligned with ``tf``), in this order of operations (both label classes use it)."""
    return idf * tf * (K1 + 1) / (tf + norm)
