"""The words of a question and of a chunk: the one definition every part of the library uses.

Lexical search (FTS5 phrases, in-process BM25, the label field), the exact-name boosts, the
"not covered" rule and follow-up rewriting all split text into words; they take the stop words
and the word rules from here, so a question means the same words to each of them. Where two
parts need different words (what FTS5 indexes is not what looks like a name), each rule keeps a
pattern of its own, named for what it finds.
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

# ---------------------------------------------------------------------------------------------
# FTS5: query phrases and the tokens the index holds
# ---------------------------------------------------------------------------------------------

_WORD_EDGE = re.compile(r"^[^\w-]+|[^\w]+$")
# What FTS5's ``unicode61`` tokenizer with ``tokenchars '_'`` makes of ASCII text.
_FTS_TOKEN = re.compile(r"[a-z0-9_]+")
# A chunk label's tokens: underscores and dots split, so ``max_upload_size`` matches "upload".
_LABEL_TOKEN = re.compile(r"[a-z0-9]+")


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


def fts_tokens(word: str) -> list[str] | None:
    """The tokens FTS5 (``unicode61``, ``tokenchars '_'``) makes of an ASCII word: runs of
    ``[a-z0-9_]``, lower-cased; None for a word with any non-ASCII character (only the index's
    tokenizer knows how it folds those)."""
    if not word.isascii():
        return None
    return _FTS_TOKEN.findall(word.lower())


def label_tokens(text: str) -> list[str]:
    """The tokens of a chunk label (heading trail, title, file name) or of a question matched
    against labels: runs of ``[a-z0-9]``, lower-cased (stop words not removed)."""
    return _LABEL_TOKEN.findall(text.lower())


# ---------------------------------------------------------------------------------------------
# The words a question is matched on
# ---------------------------------------------------------------------------------------------

_LEXICAL_WORD = re.compile(r"\w+(?:-\w+)*")
# A word with an apostrophe inside: "doesn't" is one stop word, whereas its pieces would leave
# "doesn" to be matched as a word of the question. The search tries only where a word starts
# and takes its run of word characters whole (possessively: a shorter run ends before a word
# character, never before the apostrophe), so it finds the matches of \w+['’]\w+ without
# going over each word again from every one of its letters.
_CONTRACTION = re.compile(r"\b\w++['\u2019]\w+")


def lexical_text(text: str) -> str:
    """The words of a question worth matching lexically: ``\\w+`` runs (``-`` joined ones kept
    whole, so ``--force-delete`` stays a phrase) of two or more characters, question and stop
    words removed, deduplicated in order, joined by spaces. ``Index.fts_search`` quotes each
    word and ORs them, so nothing here can become FTS5 syntax. Its words are their own
    ``fts_terms``.
    """
    words: list[str] = []
    seen: set[str] = set()      # the kept words, lower-cased
    for w in _LEXICAL_WORD.findall(_CONTRACTION.sub(_without_stop_contraction, text)):
        lowered = w.lower()
        if len(w) < 2 or lowered in STOPWORDS or lowered in seen:
            continue
        seen.add(lowered)
        words.append(w)
    return " ".join(words)


def _without_stop_contraction(m: re.Match) -> str:
    """A contraction that is a stop word ("doesn't", "won’t") as a space; any other word
    with an apostrophe ("mirror's", "O'Reilly") as it was."""
    return " " if m.group(0).lower().replace("\u2019", "'") in STOPWORDS else m.group(0)


# ---------------------------------------------------------------------------------------------
# Names: written exactly (boosted), or looking like one (must be in the index)
# ---------------------------------------------------------------------------------------------

# Each pattern with the character every match of it holds: a query without that character
# skips the pattern (most questions hold none of them).
_NAME_PATTERNS = (
    ("`", re.compile(r"`([^`\n]{2,80})`")),                          # anything in backticks
    ("-", re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*[\w])")),         # --force-delete, -n
    ("_", re.compile(r"\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b")),   # MOVER_STOP_TIMEOUT
    (".", re.compile(r"\b([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+)\b")),   # auth.session_length
)
# A word that may be a name: ASCII letters or digits at both ends, ``_ . -`` inside.
_NAME_CANDIDATE = re.compile(r"[A-Za-z0-9][\w.-]*[A-Za-z0-9]|[A-Za-z0-9]")


def exact_names(query: str) -> list[str]:
    """Names written in the query that should find their own chunk first.

    Recognises backticked spans, command-line flags (``--force-delete``), identifiers with an
    underscore (``MOVER_STOP_TIMEOUT``, ``loitering_time``) and dotted keys
    (``auth.session_length``, ``config.yml``). Single dashes need at least two letters after
    them so "a-b" prose does not count.
    """
    names: list[str] = []
    for marker, pattern in _NAME_PATTERNS:
        if marker not in query:
            continue
        for m in pattern.finditer(query):
            name = m.group(1).strip()
            if name.startswith("-") and not name.startswith("--") and len(name) < 3:
                continue
            if name and name not in names:
                names.append(name)
    return names


def normalise_title(title: str) -> str:
    """A title as compared with a name: lower case, backticks, quotes and trailing ':' removed."""
    return title.strip().strip("`'\"").rstrip(":").strip("`'\" ").lower()


def named_words(query: str) -> list[str]:
    """The words of ``query`` that look like proper or technical names, distinct, in order.

    A name is capitalised other than at the start of a sentence ("Minecraft"), all capitals
    ("S3", "TOTP"), or holds a digit, underscore or dot ("MOVER_STOP_TIMEOUT", "k8s"); not a
    quantity ("4G", "2GB": a leading digit) nor a two-letter abbreviation ("PC"), nor a stop
    word or a single character. Ordinary lower-case words, hyphenated ones included
    ("high-res", "brute-forcing"), never are: questions paraphrase.
    """
    out: list[str] = []
    for m in _NAME_CANDIDATE.finditer(query):
        word = m.group(0)
        if (len(word) < 2 or word.lower() in STOPWORDS or word in out
                or not _looks_named(word, query, m.start())):
            continue
        out.append(word)
    return out


def _looks_named(word: str, query: str, at: int) -> bool:
    """Whether ``word`` (a ``_NAME_CANDIDATE`` match of two or more characters at ``at`` in
    ``query``) looks like a name rather than prose, as ``named_words`` says."""
    # Quantities ("4G", "2GB", "10k") and two-letter abbreviations ("PC", "OS", "UI") are
    # ordinary words of a question, not names the documentation must contain.
    if word[0].isdigit() or (len(word) == 2 and word.isalpha() and word.isupper()):
        return False
    # Cheapest tests first: most words of a question are lower-case letters only.
    return (word.isupper()
            or (word[0].isupper() and not _sentence_start(query, at))
            or (not word.isalpha() and any(c.isdigit() or c in "_." for c in word)))


def _sentence_start(text: str, at: int) -> bool:
    """Whether position ``at`` of ``text`` opens a sentence: only blanks before it, or a
    sentence mark, colon, quote, bracket or dash (a capital there is no sign of a name)."""
    before = text[:at].rstrip()
    return not before or before[-1] in ".?!:;\"'(—-"


# ---------------------------------------------------------------------------------------------
# Content words (a conversation's subject) and inflections (a word's forms)
# ---------------------------------------------------------------------------------------------

# A word of running text: word characters at both ends, ``' . -`` inside ("mirror's", "k8s.io").
_CONTENT_WORD = re.compile(r"[\w][\w'.-]*[\w]|\w")
_SUFFIXES = ("ing", "ies", "ied", "ed", "es", "s", "d", "ly")


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry meaning, distinct case-insensitively: its
    ``exact_names`` first, then every other word of 3+ characters that is not a stop word."""
    names = exact_names(text)
    words = list(names)
    seen = {n.lower() for n in names}
    for w in _CONTENT_WORD.findall(text):
        key = w.lower()
        if key in seen or key in STOPWORDS or len(w) < 3:
            continue
        seen.add(key)
        words.append(w)
    return words


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
