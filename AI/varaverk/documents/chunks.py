"""Chunks: the unit that is embedded, stored, scored and cited, and the draft a chunker makes.

Every format chunker (``script_headers``, ``markdown_sections``, ``conf_templates``, ...)
produces ``Draft`` records; ``varaverk.documents.budget`` turns drafts into ``Chunk`` records
that fit the embedder's input budget; ``varaverk.documents.chunking`` picks the chunker for a
document's kind. This module imports no chunker, so every chunker can import it, with the
text helpers they share (``unique_words``, ``without_surrogates``, ``framed_name``,
``cap_label``, ``reads_as_prose``).

Conventions shared by every kind:
    - ``context`` is ``path › trail...`` joined with ``SEP``; for headers the trail is
      ``SECTION › title``, for Markdown the heading trail, for templates ``group › KEY``.
    - ``start_line``/``end_line`` are 1-based, inclusive, in the file as decoded (after BOM
      removal and newline normalisation, which never changes the line count).
    - A chunk's ``text`` is never empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

SEP = " \u203a "  # " › " joins the context trail: path › SECTION › title
HEADING_JOIN = " > "  # joins a Markdown heading trail inside ``section``

# Every document kind, in the order error messages list them.
KINDS = ("header", "readme", "manual", "template", "doc", "note", "org", "chat")

# The tokens a text costs. A counter may also have ``ceiling(text)``: an upper bound of that
# count, or None (``budget._fits``).
TokenCounter = Callable[[str], int]

_SURROGATE = re.compile("[\ud800-\udfff]")
# A label (a heading in a context trail, a section, a title, a chat's name) longer than this
# is cut with an ellipsis: it names text, it is not text, and every chunk under it repeats
# it. The Markdown, reStructuredText and org chunkers keep such a heading's words in the
# chunk text.
MAX_LABEL_CHARS = 1000
_WORD = re.compile(r"[A-Za-z]{2,}")
# Prose is mostly words; a commented-out command or a path is mostly punctuation and quotes.
_PROSE_SHARE = 0.6


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of documentation.

    Attributes:
        path: repository-relative path (as ``git ls-files -z`` gives it); for another source,
            the stored path ``NAME:relative/path``.
        kind: one of ``KINDS``: header (a script's header comment, usage text and banner
            sections), readme | manual | doc (Markdown or reStructuredText by heading),
            template (commented configuration by group and key), note (an Obsidian note),
            org (an org-mode note), chat (a run of messages from a chat export).
        section: the header section (``OPERATIONAL SAFEGUARDS``), the template group, the chat's
            name, or for Markdown and notes the heading trail above the nearest heading joined
            with `` > `` (``Deploy Guide > Steps`` for a chunk under ``### Substep``); empty
            when none.
        title: the named paragraph (``MOVER_STOP_TIMEOUT``), the template key, a chat run's
            time span, or the nearest heading's text (no ``#``s, trimmed); empty for a
            section's lead prose.
        start_line, end_line: 1-based inclusive line range in the decoded file.
        text: the verbatim text shown to users and handed to the model.
        context: the trail ``path › section › title`` (or the heading trail) that is embedded
            with the text so a chunk knows where it belongs.
        part: 0 for a whole chunk; 1..n when an over-budget chunk was split.
        meta: extra metadata (front matter, property drawers), never embedded; its
            ``keywords`` list (tags, aliases) is indexed for lexical search only.
        source: the named source the chunk comes from (``repo``, the homelab repository, or a
            name from ``AI_SOURCES``; see ``varaverk.named_sources``).
    """

    path: str
    kind: str
    section: str
    title: str
    start_line: int
    end_line: int
    text: str
    context: str
    part: int = 0
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    source: str = "repo"

    @property
    def embed_text(self) -> str:
        """What the embedder sees: the context trail, a newline, then the text."""
        return f"{self.context}\n{self.text}"

    @property
    def citation(self) -> str:
        """How answers cite this chunk: ``path › SECTION › title`` with empty parts left out."""
        return SEP.join(p for p in (self.path, self.section, self.title) if p)


@dataclass
class Draft:
    """A chunk before budgeting, as the format chunkers produce it.

    Attributes:
        section: see ``Chunk.section``.
        title: see ``Chunk.title``.
        trail: context elements after the path (``["CONFIGURATION", "MOVER_STOP_TIMEOUT"]``).
        lines: the chunk text as ``(line_number, text)`` pairs, 1-based file line numbers,
            in order; the chunk text is the texts joined with newlines.
        start_line: first line of the chunk's range when it begins before its first text line
            (a Markdown heading whose body is the text); None means the first text line.
        meta: metadata copied to every part (front matter).
        part_labels: for a part of a split draft that starts at line N, ``part_labels[N]``
            is appended to that part's context: where inside a long block the part begins
            (the YAML key path ``birdseye > layout`` inside a reference config), which the
            part's own text no longer shows.
    """

    section: str
    title: str
    trail: list[str]
    lines: list[tuple[int, str]]
    start_line: int | None = None
    meta: dict = field(default_factory=dict)
    part_labels: dict[int, str] = field(default_factory=dict)


def heading_path(chunk) -> str:
    """The full heading path of a chunk: ``section > title`` (``Deploy Guide > Steps``)."""
    return HEADING_JOIN.join(p for p in (chunk.section, chunk.title) if p)


def unique_words(words: Iterable[str]) -> list[str]:
    """``words`` without empties and case-insensitive repeats, first spelling kept, in order.

    For a note's ``meta["keywords"]`` (tags, aliases), which the index matches lexically.
    """
    seen: set[str] = set()
    out = []
    for w in words:
        if w and w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def without_surrogates(text: str) -> str:
    """``text`` with surrogate pairs joined and every lone surrogate written as U+FFFD.

    JSON and YAML escapes (``"\\ud83d"``, half an emoji in a cut export) decode to lone
    surrogates, which no UTF-8 consumer takes: SQLite refuses the whole write, the tokenizer
    the text. Linear; a text without them comes back as it is.
    """
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def framed_name(text: str, chars: str, *, need_word: bool = True) -> str | None:
    """The name between two runs of at least two of ``chars`` (``── Mover ──``, ``=== X
    ===``), stripped; None when ``text`` (stripped) is not framed so.

    ``need_word``: the name must hold a character that is neither white space nor one of
    ``chars`` (else an empty name is allowed when something stands between the runs).
    String methods only: a pattern with a lazy name between two such runs backtracked over
    every character of a long ruler (quadratic, and worse).
    """
    core = text.strip()
    inner = core.lstrip(chars)
    if len(core) - len(inner) < 2:
        return None
    name = inner.rstrip().rstrip(chars)
    if len(inner.rstrip()) - len(name) < 2 or not name:
        return None
    if need_word and not any(not c.isspace() and c not in chars for c in name):
        return None
    return name.strip()


def cap_label(text: str) -> str:
    """``text``, cut to ``MAX_LABEL_CHARS`` characters and an ellipsis when longer."""
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS] + "\u2026"


def trim_blank_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``[(line number, text)]`` without its blank lines at both ends."""
    start, end = 0, len(lines)
    while start < end and not lines[start][1].strip():
        start += 1
    while end > start and not lines[end - 1][1].strip():
        end -= 1
    return lines[start:end]


def reads_as_prose(text: str, min_words: int) -> bool:
    """Whether ``text`` reads as prose: at least ``min_words`` words (runs of two or more
    ASCII letters) making up at least ``_PROSE_SHARE`` of its characters other than spaces."""
    words = _WORD.findall(text)
    visible = len(text) - text.count(" ")
    return len(words) >= min_words and sum(map(len, words)) >= _PROSE_SHARE * visible

