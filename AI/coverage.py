"""Coverage: whether the index answers a question at all, judged relative to the index itself.

An absolute cosine threshold does not carry from one corpus to the next: a small embedder's best
cosine for a question the documentation never answers (0.45–0.65 on a near-miss topic) is as
high as for one it does, and what counts as high moves with the corpus's vocabulary and chunk
sizes. Two signals that are relative to the index replace it as the deciding rule:

- **Dense margin** (cosine units): the best cosine similarity of the query minus the cosine of
  the ``REF_RANK``-th best chunk, the edge of the retrieval pool. A question the documentation
  answers has a chunk that stands out from the query's typical neighbourhood; a question about
  something absent meets a flat field of look-alikes (every chunk a little similar, none much
  more so). Comparing with the query's own pool edge calibrates for corpora whose chunks are
  all alike (one product's reference pages) or all different.
- **Absent words** (a share in [0, 1]): of the query's content words (``search.lexical_text``,
  the same words the lexical retriever scores), those that occur nowhere in the index in any
  inflection ("pixelated" counts for "pixelate", "switch" for "switched"); a hyphenated word
  counts as present only as the phrase ("two-factor" is absent although "two" and "factor"
  occur). The more of a question's words the documentation never uses, the less it can cover
  the question; a single paraphrased word costs little because the share is over all words.

The rule: not covered when ``margin − ABSENT_COST × absent share < MIN_MARGIN``. Calibrated on
the harborlab, Frigate and Synapse dev sets together with ``ai-eval`` (answerable questions
refused against unanswerable ones caught, swept over both settings; validated by fitting on
two corpora and testing on the third). An index too small to have a pool edge (fewer than
``REF_RANK`` rows after filters) gives no margin, and the rule abstains.

Costs per query: the margin reads scores the dense retriever already ranked; absent words are
set look-ups in the index's vocabulary (``Index.fts_vocabulary``, read once per index
generation) and, for hyphenated words, the lexical retriever's cached phrase rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Container, Iterable, Sequence

from varaverk.lexical import tokens

REF_RANK = 50           # the pool edge: the margin is over the cosine of the 50th best chunk
MIN_MARGIN = 0.10       # cosine units, after the absent-words cost
ABSENT_COST = 0.25      # cosine units per unit of absent share (all words absent: 0.25)

_SUFFIXES = ("ing", "ies", "ied", "ed", "es", "s", "d", "ly")


@dataclass(frozen=True)
class Coverage:
    """The coverage signals of one query (the same on every hit of one search).

    Attributes:
        margin: best cosine minus the cosine at ``REF_RANK`` among the rows the filters allow,
            in cosine units; None when fewer rows than that are allowed, or no dense scores.
        words: how many content words of the query were looked up.
        absent: those the index holds in no inflection, as written in the query.
    """

    margin: float | None
    words: int
    absent: tuple[str, ...] = ()

    @property
    def absent_share(self) -> float:
        """``len(absent) / words`` in [0, 1] (0 for a query without content words)."""
        return len(self.absent) / self.words if self.words else 0.0

    def effective_margin(self, absent_cost: float = ABSENT_COST) -> float | None:
        """The margin less ``absent_cost`` × the absent share; None without a margin."""
        if self.margin is None:
            return None
        return self.margin - absent_cost * self.absent_share

    def covered(self, min_margin: float = MIN_MARGIN, absent_cost: float = ABSENT_COST) -> bool:
        """False when the effective margin is below ``min_margin``; True without a margin
        (the rule abstains on an index too small to have a pool edge)."""
        effective = self.effective_margin(absent_cost)
        return effective is None or effective >= min_margin


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


def inflections(token: str) -> set[str]:
    """``token`` and the regular English inflections it may stand for or take: the stem under
    -ing/-ed/-es/-s/-d/-ly (with a final e restored, a doubled consonant undone, -ies/-ied as
    -y), and the stem's -s/-es/-d/-ed/-ing forms. Lower-case ASCII tokens in, lower case out;
    a token under four characters is only given its plural and past forms."""
    out = {token, token + "s", token + "es", token + "d", token + "ed", token + "ing"}
    for suffix in _SUFFIXES:
        stem = token[: -len(suffix)]
        if not token.endswith(suffix) or len(stem) < 3:
            continue
        stems = {stem, stem + "e"}
        if suffix in ("ies", "ied"):
            stems.add(stem + "y")
        if len(stem) > 3 and stem[-1] == stem[-2]:
            stems.add(stem[:-1])
        for s in stems:
            out |= {s, s + "s", s + "es", s + "d", s + "ed", s + "ing"}
    return out


def absent_words(words: Iterable[str], vocabulary: Container[str],
                 phrase_exists: Callable[[list[str]], bool]) -> tuple[int, tuple[str, ...]]:
    """The content words of a query that the index never holds.

    Args:
        words: the query's content words (``store.fts_terms`` of ``search.lexical_text``).
        vocabulary: every token of the index (``Index.fts_vocabulary``).
        phrase_exists: whether a phrase of several tokens occurs (e.g. ``Bm25.phrase_rows``).

    Returns:
        ``(words looked up, absent words as written)``; words with a non-ASCII character or
        no token are not looked up (only the index's tokenizer may split those).
    """
    looked = 0
    absent: list[str] = []
    for word in words:
        toks = tokens(word)
        if not toks:
            continue
        looked += 1
        if len(toks) > 1:
            found = phrase_exists(toks)
        else:
            found = toks[0] in vocabulary or any(v in vocabulary for v in inflections(toks[0]))
        if not found:
            absent.append(word)
    return looked, tuple(absent)
