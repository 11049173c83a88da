"""Coverage: whether the index answers a question at all, judged relative to the index itself.

An absolute cosine threshold does not carry from one corpus to the next: a small embedder's best
cosine for a question the documentation never answers (a near-miss topic) can be as high as for
one it does, and what counts as high moves with the corpus's vocabulary and chunk sizes. Two
signals that are relative to the index replace it as the deciding rule:

- **Dense margin** (cosine units): the best cosine similarity of the query minus the cosine of
  the ``REF_RANK``-th best chunk, the edge of the retrieval pool. A question the documentation
  answers has a chunk that stands out from the query's typical neighbourhood; a question about
  something absent meets a flat field of look-alikes (every chunk a little similar, none much
  more so). Comparing with the query's own pool edge calibrates for corpora whose chunks are
  all alike (one product's reference pages) or all different.
- **Missed words** (a share in [0, 1]): of the query's content words
  (``varaverk.text.lexical_text``, the same words the lexical retriever scores), those that none
  of the ``LEADING`` best results holds in any inflection (``varaverk.text.inflections``:
  "pixelated" counts for "pixelate", "switch" for "switched"; a hyphenated word only as the
  phrase), each weighted by its BM25 inverse document frequency over the index. A result holds
  what FTS5 indexed of its own chunk (text and heading trail), not the neighbours merged in for
  context, which come for their position. A near-miss question is about a topic the
  documentation covers but asks for something it does not: the results are about the topic, and
  the question's distinctive words ("authenticator", "privacy", "allowance") are in none of
  them, or in no chunk at all (*absent* words, the rarest there are). Words the whole corpus
  uses ("camera" in a camera NVR's manual, the product's own name) weigh nothing, so the share
  is about what makes the question specific; a paraphrased everyday word costs little.

The rule: not covered when ``margin − MISSED_COST × missed share < MIN_MARGIN``. It is off
unless ``AI_MIN_MARGIN`` sets the threshold (``varaverk.retrieval.relevance``): calibrated
leave-one-corpus-out over the five dev corpora, no threshold fitted on four refused no
answerable question of the fifth. The signals are still measured on every search (``ai-eval
-v`` prints them) for calibrating on other corpora. An index too small to have a pool edge
(fewer than ``REF_RANK`` rows after filters) gives no margin, and the rule abstains.

Costs per query: the margin reads scores the dense retriever already ranked; the missed words
are set look-ups in the index's vocabulary (``Index.fts_vocabulary``, read once per index
generation; the retriever keeps each word's forms found there) and, per form, a binary search
of the leading results' ids in the lexical retriever's posting rows (cached per index
generation; an inflected form no query used before costs one posting read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Container, Iterable, Sequence

import numpy as np

from varaverk.text import fts_tokens, inflections

REF_RANK = 50           # the pool edge: the margin is over the cosine of the 50th best chunk
# The results whose words count as found: the default top-k (AI_TOP_K), what a prompt is
# usually made of. Search ranks at least this many whatever k it is asked for, so the
# verdict does not depend on k.
LEADING = 5
# The rule's two settings when it is turned on (``AI_MIN_MARGIN``; above). A near-miss
# question's margin can be as high as an answerable one's: what tells them apart is the
# distinctive words the results miss, so those cost margin, and the threshold is left low
# enough for answerable questions worded otherwise than their documentation (a paraphrase
# misses words too).
MIN_MARGIN = 0.05       # cosine units, after the missed-words cost
MISSED_COST = 0.15      # cosine units per unit of missed share: the most missed words can cost


@dataclass(frozen=True)
class Coverage:
    """The coverage signals of one query (the same on every hit of one search).

    Attributes:
        margin: best cosine minus the cosine at ``REF_RANK`` among the rows the filters allow,
            in cosine units; None when fewer rows than that are allowed, or no dense scores.
        words: how many content words of the query were looked up.
        absent: those the index holds in no inflection, as written in the query.
        missed: those none of the leading results holds (the absent ones included).
        missed_share: the missed words' share of the looked-up words' IDF weight, in [0, 1]
            (``word_weight``; 0 when no word weighs anything).
    """

    margin: float | None
    words: int
    absent: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()
    missed_share: float = 0.0

    def effective_margin(self, missed_cost: float = MISSED_COST) -> float | None:
        """The margin less ``missed_cost`` × the missed share; None without a margin."""
        if self.margin is None:
            return None
        return self.margin - missed_cost * self.missed_share

    def covered(self, min_margin: float = MIN_MARGIN, missed_cost: float = MISSED_COST) -> bool:
        """False when the effective margin is below ``min_margin``; True without a margin
        (the rule abstains on an index too small to have a pool edge)."""
        effective = self.effective_margin(missed_cost)
        return effective is None or effective >= min_margin


class Deferred:
    """A ``Coverage`` measured when first read (``value``): most searches are never judged by
    the coverage rule (``AI_MIN_MARGIN`` is off by default), and measuring is a pass over the
    question's words and their postings. Two threads reading it at once may both measure it,
    and get the same value. Equal to what it measures (and to a ``Coverage`` of that value).
    Until it is read it keeps what measuring needs (its search's index generation: a hit
    kept past a re-index keeps that generation's tables alive until it is dropped).

    Args:
        make: measures the coverage, called at most once by one thread (no arguments).
    """

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], Coverage]) -> None:
        self._make: Callable[[], Coverage] | None = make
        self._value: Coverage | None = None

    def value(self) -> Coverage:
        """The measured ``Coverage`` (measured now on the first call)."""
        make = self._make
        if make is not None:
            # the value is in place before the maker is dropped: a thread that sees no maker
            # reads a value
            self._value = make()
            self._make = None
        return self._value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Deferred):
            other = other.value()
        return self.value() == other

    def __repr__(self) -> str:
        return f"Deferred({self.value()!r})"


def pool_margin(ranked: Sequence[float], rank: int = REF_RANK) -> float | None:
    """``ranked[0] − ranked[rank − 1]``: the best cosine over the pool edge.

    Args:
        ranked: cosine similarities of the best rows, best first (at least ``rank`` of them
            for a margin).
        rank: the 1-based rank of the reference cosine.

    Returns:
        The margin in cosine units, or None when ``ranked`` holds fewer than ``rank`` scores.
    """
    if rank < 1 or len(ranked) < rank:
        return None
    return float(ranked[0]) - float(ranked[rank - 1])


def word_weight(holding: int, rows: int) -> float:
    """The BM25 inverse document frequency of a word held by ``holding`` of ``rows`` chunks,
    ``ln((rows − holding + 0.5) / (holding + 0.5))``, floored at 0: a word in half the chunks
    or more says nothing about what a question is after."""
    return max(math.log((rows - holding + 0.5) / (holding + 0.5)), 0.0)


def word_forms(word: str, vocabulary: Container[str]) -> list[list[str]] | None:
    """The token sequences that stand for ``word`` in the index: one per inflection of a
    one-token word that ``vocabulary`` holds (sorted), the word's tokens as one phrase for a
    hyphenated or dotted word; [] when no single-token form occurs; None when the word is not
    looked up (a non-ASCII character or no token: only the index's tokenizer may split it)."""
    toks = fts_tokens(word)
    if not toks:
        return None
    if len(toks) > 1:
        return [toks]
    return [[form] for form in sorted(inflections(toks[0])) if form in vocabulary]


def measure(margin: float | None, words: Iterable[str],
            forms_of: Callable[[str], list[list[str]] | None],
            rows_of: Callable[[list[str]], np.ndarray], leading: Sequence[int],
            rows: int) -> Coverage:
    """The coverage signals of one query.

    Args:
        margin: ``pool_margin`` of the query's dense scores (None: none).
        words: the query's content words (the words of ``varaverk.text.lexical_text``).
        forms_of: ``word_forms`` of a word over the index's vocabulary (a caller may cache it).
        rows_of: sorted unique chunk ids (int64) holding a token sequence as a phrase
            (``Bm25.phrase_rows``); it may raise: that word then weighs nothing and is never
            missed (a failed lookup must not make a question "not covered").
        leading: chunk ids of the leading results, best first (the first ``LEADING`` count;
            a merged result counts by the chunk that ranked).
        rows: chunks in the index (for the inverse document frequency).

    Returns:
        A ``Coverage``. A word's weight is that of its most frequent form (``word_weight``);
        an absent word holds in no chunk and weighs the most.
    """
    lead = np.asarray(list(leading)[:LEADING], dtype=np.int64)
    looked = 0
    absent: list[str] = []
    missed: list[str] = []
    total = lost = 0.0
    for word in words:
        forms = forms_of(word)
        if forms is None:
            continue
        looked += 1
        holding, held = 0, False
        try:
            for form in forms:
                found = rows_of(form)
                holding = max(holding, found.size)
                held = held or _holds(found, lead)
        except Exception:  # a lookup failure must not make the answer "not covered"
            continue
        weight = word_weight(holding, rows)
        total += weight
        if not holding:
            absent.append(word)
        if not held:
            missed.append(word)
            lost += weight
    return Coverage(margin, looked, tuple(absent), tuple(missed),
                    lost / total if total > 0 else 0.0)


def _holds(postings: np.ndarray, lead: np.ndarray) -> bool:
    """Whether sorted ``postings`` holds any of the ids in ``lead`` (a binary search each: the
    lists may be long, the leading ids are few)."""
    if not postings.size or not lead.size:
        return False
    # count_nonzero, not any(): a reduction's set-up costs more than these few values' test
    return np.count_nonzero(postings.take(postings.searchsorted(lead), mode="clip") == lead) > 0
