"""The words of a question and of a chunk: the one definition every part of the library uses.

Lexical search (FTS5 phrases, in-process BM25), the "not covered" rule and follow-up rewriting
all split text into words; they take the stop words and the word rules from here, so a question
means the same words to each of them.
"""

from __future__ import annotations

import re


# Words that carry no retrieval signal in a question; dropped from lexical queries only.
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being
below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
down during each few for from further had hadn't has hasn't have haven't having he her here hers
herself him himself his how i i'm if in into is isn't it it's its itself just let's me more most
my myself no nor not now of off on once only or other ought our ours ourselves out over own same
she should shouldn't so some such than that that's the their theirs them themselves then there
there's these they this those through to too under until up very was wasn't we were weren't what
what's when where which while who whom why will with won't would wouldn't you your yours yourself
yourselves s t d ll m re ve y get got also use used using i'd i've it'll
""".split())
_WORD_EDGE = re.compile(r"^[^\w-]+|[^\w]+$")


def fts_terms(query: str) -> list[str]:
    """The words of free text that ``fts_query`` turns into phrases, in order.

    Whitespace-separated words with edge punctuation removed (a leading ``-`` is kept), common
    question words (``STOPWORDS``) and one-character words dropped unless nothing else remains,
    deduplicated case-insensitively.
    """
    words = [w for w in (_WORD_EDGE.sub("", raw) for raw in query.split()) if w]
    kept = [w for w in words if w.lower() not in STOPWORDS and len(w) > 1] or words
    seen: set[str] = set()
    terms = []
    for w in kept:
        key = w.lower()
        if key in seen:
            continue
        seen.add(key)
        terms.append(w)
    return terms


def fts_query(query: str) -> str:
    """Turn free text into a safe FTS5 MATCH expression.

    Every word of ``fts_terms`` becomes a double-quoted string (FTS5 tokenizes it with the
    index's tokenizer, so ``--force-delete`` becomes the phrase "force delete" and
    ``MOVER_STOP_TIMEOUT`` one token); words are joined with OR so BM25 ranks partial matches.
    FTS5 operators and punctuation in the query are thereby literal text, never syntax.
    Common question words are dropped unless nothing else remains. Empty result: no query.
    """
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in fts_terms(query))
