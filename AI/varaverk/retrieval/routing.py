"""Section routing: the shape of a question decides which header section gets a score boost.

A question's *shape* is read from its wording with a few cue patterns (no model involved), and
mapped to the header section that usually answers that kind of question, as
../shared/header-convention.md lays the six sections out:

    shape               cue (examples)                              section boosted
    configuration       "how long", "default", "which port", NAMES  CONFIGURATION
    safeguard           "prevent", "what stops", "protect", "safe"  OPERATIONAL SAFEGUARDS
    runtime_mode        "flag", "--option", "mode", "dry run"       RUNTIME MODES
    design              "why ..."                                   DESIGN PRINCIPLES
    operational_model   "how does X work/decide/check"              OPERATIONAL MODEL
    definitional        "what is X", "what does X mean"             PURPOSE
    procedure, other    "how do I", "what should I do"              (none)

The boost is added to the fused score of chunks of that section; it is a boost, never a
filter, so it cannot exclude the chunk that holds the answer (the search module's tests check
that). ``route`` is cheap (a handful of regular expressions) and runs on every query.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

SHAPE_SECTIONS: dict[str, str | None] = {
    "configuration": "CONFIGURATION",
    "safeguard": "OPERATIONAL SAFEGUARDS",
    "runtime_mode": "RUNTIME MODES",
    "design": "DESIGN PRINCIPLES",
    "operational_model": "OPERATIONAL MODEL",
    "definitional": "PURPOSE",
    "procedure": None,
    "other": None,
}

# Cue patterns per shape, each with a weight and its triggers. They are matched
# case-insensitively against the question; the shape with the highest total wins (ties go to
# the earlier shape in _ORDER). A cue's triggers are lower-case strings at least one of which
# every match of its pattern contains: route searches a pattern only when the lower-cased
# (ASCII) question holds one, so the case-insensitive patterns, which cost the most, run only
# where they could match. A cue whose pattern gains an alternative needs that alternative's
# trigger too (tests/query/test_scoring.py checks every match on many questions).
_CUES: dict[str, list[tuple[str, float, tuple[str, ...]]]] = {
    "safeguard": [
        (r"\b(prevent|prevents|preventing|protect|protects|protection|safeguard|guard)\b", 2.0,
         ("prevent", "protect", "guard")),
        (r"\b(what|which)\b[^?]{0,40}\b(stop|stops|keeps?|limits?|blocks?)\b", 2.0,
         ("stop", "keep", "limit", "block")),
        (r"\bfrom (being |getting )?\w+ing\b", 1.0, ("from ",)),
        (r"\b(tricked|abuse|brute[- ]?forc\w*|accidental\w*|by mistake|refuses?|interlock)\b", 1.5,
         ("tricked", "abuse", "brute", "accidental", "by mistake", "refuse", "interlock")),
        (r"\bwhat happens (if|when)\b[^?]*\b(fail|fails|dies|doesn't|does not|isn't|full|fills|down)\b", 1.5,
         ("what happens if", "what happens when")),
        (r"\bcould\b[^?]*\b(delete|wipe|lose|overwrite|destroy|remove)\b", 1.5, ("could",)),
        (r"\b(won't|will not|never)\b", 0.5, ("won't", "will not", "never")),
        (r"\bsafe(ly|ty)?\b", 1.0, ("safe",)),
    ],
    "configuration": [
        (r"\bdefault(s|ed)?\b", 4.0, ("default",)),
        (r"\bhow (long|many|much|far|often|old|big|large|high|low)\b", 1.5,
         ("how long", "how many", "how much", "how far", "how often", "how old", "how big",
          "how large", "how high", "how low")),
        (r"\b(longest|shortest|maximum|minimum|max|min|most|least|at what)\b", 1.0,
         ("longest", "shortest", "max", "min", "most", "least", "at what")),
        (r"\b(which|what) (\w+ ){0,2}(value|setting|variable|option|port|address|path|"
         r"temperature|threshold|limit|interval|timeout|percentage|size|key)\b", 2.0,
         ("value", "setting", "variable", "option", "port", "address", "path", "temperature",
          "threshold", "limit", "interval", "timeout", "percentage", "size", "key")),
        (r"\b(setting|settings|configure|configured|configuration|config|variable|threshold|"
         r"timeout|set to|what do i set|where do i put)\b", 1.0,
         ("setting", "config", "variable", "threshold", "timeout", "set to", "what do i set",
          "where do i put")),
        # an UPPER_SNAKE key, case-sensitive
        (r"(?-i:\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b)", 2.0, ("_",)),
    ],
    "runtime_mode": [
        (r"(^|\s)--[a-z][\w-]*", 2.0, ("--",)),
        (r"\b(flag|switch|mode|modes|dry[- ]?run|rehearse|simulate|rollback|roll back|"
         r"put \w+ back|restore|revert|status|verbose|one-off|by hand|manually)\b", 1.0,
         ("flag", "switch", "mode", "dry", "rehearse", "simulate", "rollback", "roll back",
          "put ", "restore", "revert", "status", "verbose", "one-off", "by hand", "manually")),
        (r"\bcan (i|the|it|you)\b[^?]*\b(run|copy|tell|show|rehearse|switch|toggle)\b", 0.75,
         ("can i", "can the", "can it", "can you")),
    ],
    "design": [
        (r"^\s*why\b", 2.5, ("why",)),
        (r"\bwhy (does|do|is|are|was|not)\b", 1.5, ("why ",)),
        (r"\b(rationale|reason|design|instead of|rather than|point in|bother|simpler)\b", 1.0,
         ("rationale", "reason", "design", "instead of", "rather than", "point in", "bother",
          "simpler")),
    ],
    "operational_model": [
        (r"\bhow (does|do|is|are) (?!i\b|we\b|you\b)(the |a |an )?[\w' -]{1,40}? (work|decide|check|find|get|"
         r"run|handle|choose|pick|pass|spread|know|detect|select|schedule)\w*\b", 2.5,
         ("how does ", "how do ", "how is ", "how are ")),
        (r"\b(in what order|what order|step by step|walk me through|what does it do)\b", 1.5,
         ("what order", "step by step", "walk me through", "what does it do")),
        (r"\bactually\b", 0.5, ("actually",)),
    ],
    "definitional": [
        (r"^\s*what(\s+is|'s|\s+was|\s+are|\s+were)\s+(a|an|the)?\s*[\w' -]{1,40}\??\s*$", 2.5,
         ("what",)),
        (r"\bwhat (exactly )?(is|was|are) (a |an |the )?['\"`]?[\w-]+['\"`]?\b", 0.75,
         ("what is ", "what was ", "what are ", "what exactly ")),
        (r"\bwhat does ['\"`]?[\w -]+['\"`]? mean\b", 2.5, ("what does ",)),
        (r"\b(what is|what's) [\w' -]+ for\b", 2.0, ("what is ", "what's ")),
        (r"\b(meaning of|definition of|difference between|different from)\b", 1.5,
         ("meaning of", "definition of", "difference between", "different from")),
    ],
    "procedure": [
        (r"\bhow (do|can|should) i\b", 1.5, ("how do i", "how can i", "how should i")),
        (r"\bwhat (do|should) i do\b", 2.5, ("what do i do", "what should i do")),
        (r"\b(steps?|recover|repair|fix|get back|set up|install|upgrade|replace)\b", 1.0,
         ("step", "recover", "repair", "fix", "get back", "set up", "install", "upgrade",
          "replace")),
    ],
}
_ORDER = ("safeguard", "configuration", "runtime_mode", "design", "operational_model",
          "definitional", "procedure")
_IN_ORDER = [(shape, cue) for shape in _ORDER for cue in _CUES[shape]]
# Every cue as (shape, pattern, weight), shape by shape in _ORDER, each shape's in its order.
# The patterns compile on first use (``_cue_pattern``): a question triggers a few cues, and a
# one-shot ai-query need not compile the others.
_CUE_LIST = tuple((shape, p, w) for shape, (p, w, _) in _IN_ORDER)


@functools.lru_cache(maxsize=None)
def _cue_pattern(pattern: str) -> re.Pattern:
    """A cue's pattern, compiled case-insensitively once per process."""
    return re.compile(pattern, re.IGNORECASE)


def _trie(words: list[str]) -> str:
    """A regular expression matching any of ``words`` (literal strings), factored by their
    leading characters: a search tries a position's character once per level, not once per
    word. Where one word starts another, the longer is tried first (greedy), so a match is
    the longest word that starts where it starts."""
    by_first: dict[str, list[str]] = {}
    for w in words:
        if w:
            by_first.setdefault(w[0], []).append(w[1:])
    if not by_first:
        return ""
    body = "|".join(re.escape(first) + _trie(rest) for first, rest in sorted(by_first.items()))
    return f"(?:{body})" + ("?" if "" in words else "")


_TRIGGERS = sorted({t for _, (_, _, triggers) in _IN_ORDER for t in triggers})
# One search finds, at each position of the question, the longest trigger starting there (a
# lookahead, so overlapping triggers are all found); every trigger that starts it occurs
# there too: _CUES_STARTING names the cues (indices in _CUE_LIST) one of whose triggers does.
_TRIGGER_SCAN = re.compile(f"(?=({_trie(_TRIGGERS)}))")
_CUES_STARTING = {
    longest: frozenset(i for i, (_, (_, _, triggers)) in enumerate(_IN_ORDER)
                       if any(longest.startswith(t) for t in triggers))
    for longest in _TRIGGERS
}


def _triggered(lowered: str) -> list[tuple[str, str, float]]:
    """The cues (``_CUE_LIST`` entries, in its order) one of whose triggers occurs in
    ``lowered``, the lower-cased question."""
    found: set[int] = set()
    for longest in _TRIGGER_SCAN.findall(lowered):
        found |= _CUES_STARTING[longest]
    return [_CUE_LIST[i] for i in sorted(found)]


@dataclass(frozen=True)
class Route:
    """The routing decision for one question.

    Attributes:
        shape: one of SHAPE_SECTIONS' keys ("other" when no cue matched).
        section: the header section boosted for this shape, or None.
        scores: every shape's cue total, for debugging and the evaluation report.
    """

    shape: str
    section: str | None
    scores: dict[str, float]


def route(question: str) -> Route:
    """Read the question's shape from its wording and name the section to boost.

    Args:
        question: the (standalone) question text.

    Returns:
        A Route. ``section`` is None for procedures and unrecognised questions: nothing is
        boosted then, and retrieval ranks on content alone.
    """
    # Triggers are ASCII and lower-case: for an ASCII question lower() folds case exactly as
    # IGNORECASE does; other questions are searched with every pattern.
    scores = dict.fromkeys(_ORDER, 0.0)
    for shape, pattern, weight in (_triggered(question.lower()) if question.isascii()
                                   else _CUE_LIST):
        if _cue_pattern(pattern).search(question):
            scores[shape] += weight
    best = max(_ORDER, key=scores.__getitem__)    # the first of equal totals: the earlier shape
    if scores[best] <= 0:
        return Route("other", None, scores)
    return Route(best, SHAPE_SECTIONS[best], scores)
