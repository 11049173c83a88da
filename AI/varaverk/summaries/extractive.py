"""The extractive summary of one document: its title, its first paragraph and its heading
outline, taken from its chunks; no model, no server, deterministic.

Shape (plain text, at most ``MAX_CHARS``)::

    <title>
    <first prose paragraph, cut at a sentence or word boundary>
    Sections: <heading>; <heading>; ...

The first line is always the title, and ``first_sentence`` of the second is what a contextual
chunk carries (``context_line``). Made from the stored chunks, so secrets the index masked
stay masked.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Protocol

MAX_CHARS = 900
PARAGRAPH_CHARS = 400
MAX_OUTLINE = 12
HEADING_CHARS = 60
EXTRACTIVE_MODEL = "extractive"
# Kinds whose first chunk's heading trail names the document (a Markdown H1, a note's title).
_TITLED_KINDS = frozenset({"readme", "manual", "doc", "note", "org"})
# A block that is markup or a list, not prose: a directive, table, fence, heading, HTML,
# rule, front matter, a list (YAML too).
_NOT_PROSE = re.compile(r"^\s*(\.\. |\||```|~~~|#|<|---|===|\+--|\{|[-*+] )")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")


class ChunkLike(Protocol):
    path: str
    kind: str
    section: str
    title: str
    text: str


def document_title(chunks: list[ChunkLike]) -> str:
    """The document's title: for prose kinds the top of the first chunk's heading trail, else
    the file name (``path`` without a source prefix or folders)."""
    first = chunks[0]
    if first.kind in _TITLED_KINDS:
        top = first.section.split(" > ")[0].strip() or first.title.strip()
        if top:
            return _clip(top, HEADING_CHARS * 2)
    return posixpath.basename(first.path.split(":", 1)[-1]) or first.path


def first_paragraph(chunks: Iterable[ChunkLike]) -> str:
    """The first block of prose (blank-line separated, not markup) of the first chunks, lines
    joined, cut to ``PARAGRAPH_CHARS`` at a sentence or word boundary; "" when none."""
    for chunk in chunks:
        for block in re.split(r"\n\s*\n", chunk.text):
            text = " ".join(line.strip().lstrip("#").strip() for line in block.splitlines())
            if len(text) >= 30 and not _NOT_PROSE.match(block) and any(
                    c.isalpha() for c in text[:5]):
                return _clip(text, PARAGRAPH_CHARS)
    return ""


def outline(chunks: Iterable[ChunkLike], title: str) -> list[str]:
    """The headings (chunk titles) in document order, each once, the title left out, at most
    ``MAX_OUTLINE``."""
    seen, out = {title}, []
    for chunk in chunks:
        heading = _clip(chunk.title.strip(), HEADING_CHARS)
        if heading and heading not in seen:
            seen.add(heading)
            out.append(heading)
    return out[:MAX_OUTLINE]


def extractive_summary(chunks: list[ChunkLike]) -> str:
    """The extractive summary of one document from its chunks in document order ("" for
    none); see the module docstring for its shape."""
    if not chunks:
        return ""
    title = document_title(chunks)
    lines = [title]
    paragraph = first_paragraph(chunks[:5])
    if paragraph:
        lines.append(paragraph)
    headings = outline(chunks, title)
    if headings:
        lines.append("Sections: " + "; ".join(headings))
    return _clip("\n".join(lines), MAX_CHARS)


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (up to the first ``.``, ``!`` or ``?`` followed by a
    space and a capital or digit), or all of it."""
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0] if text.strip() else ""


def context_line(summary: str) -> str:
    """What a contextual chunk carries from its document's summary: the title and the first
    sentence of the paragraph below it, ``Title: sentence`` (or the title alone)."""
    lines = summary.splitlines()
    if not lines:
        return ""
    second = lines[1] if len(lines) > 1 and not lines[1].startswith("Sections: ") else ""
    sentence = _clip(first_sentence(second), 200)
    return f"{lines[0]}: {sentence}" if sentence else lines[0]


def _clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at a sentence end when one falls in the
    last third, else at a word, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    if end >= limit * 2 // 3:
        return cut[:end + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "\u2026"
