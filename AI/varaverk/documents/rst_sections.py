"""reStructuredText chunking by section titles (``README.rst``, ``UPGRADE.rst``, Sphinx pages).

A section title is a line of text at the left margin, underlined, and optionally overlined,
by one punctuation character repeated at least as long as the title::

    =========          Introduction
    Synapse            ============
    =========

Levels follow docutils' rule: each new style (character, with or without overline) is one
level deeper than every style seen before it, so the first style met is level 1. Text inside
literal blocks is indented, so it is never a title; a line of punctuation with no title above
it (a transition) is body text. Substitution references (``|pypi|`` badges) are dropped from
the title's text.

The outline then goes through the Markdown chunker's ``heading_drafts``: one chunk per title,
the same fields (``title``, ``section`` trail, ``context``), and the text kept verbatim, rules
included, so ``--search`` shows the file as written.
"""

from __future__ import annotations

import re

from varaverk.documents.chunks import Draft
from varaverk.documents.markdown_sections import Outline, heading_drafts

# The characters docutils accepts as section adornment.
_ADORNMENT = re.compile(r"""^([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1{2,}\s*$""")
# A substitution reference (``|pypi|``): in a title, almost always a badge image.
_SUBSTITUTION = re.compile(r"\|[^|\s][^|]*\|")


def _title_at(lines: list[str], n: int) -> tuple[int, int, str, tuple[str, bool]] | None:
    """The title whose text is line ``n`` (0-based): (first, end, text, style), else None.

    ``first`` is the overline's line when there is one, ``end`` the line after the underline.
    """
    text = lines[n]
    if not text.strip() or text[0].isspace() or _ADORNMENT.match(text) or n + 1 >= len(lines):
        return None
    under = _ADORNMENT.match(lines[n + 1])
    if not under or len(lines[n + 1].rstrip()) < len(text.strip()):
        return None
    char = under.group(1)
    over = n > 0 and lines[n - 1].rstrip() == lines[n + 1].rstrip()
    first = n - 1 if over else n
    if first > 0 and lines[first - 1].strip():  # a title follows a blank line or the start
        return None
    words = " ".join(_SUBSTITUTION.sub(" ", text).split()) or text.strip()
    return first, n + 2, words, (char, over)


def rst_outline(lines: list[str]) -> Outline:
    """Section titles of a reStructuredText document as (level, first, end, text), 0-based."""
    outline = Outline()
    styles: list[tuple[str, bool]] = []
    n = 0
    while n < len(lines):
        found = _title_at(lines, n)
        if found is None:
            n += 1
            continue
        first, end, text, style = found
        if style not in styles:
            styles.append(style)
        outline.headings.append((styles.index(style) + 1, first, end, text))
        n = end
    return outline


def rst_drafts(path: str, text: str) -> list[Draft]:
    """Chunk drafts for a reStructuredText document, one per section title plus the text
    before the first (``path`` kept for the chunkers' uniform signature)."""
    lines = text.split("\n")
    outline = rst_outline(lines)
    first_title = outline.headings[0][1] if outline.headings else len(lines)
    before = [(n + 1, lines[n]) for n in range(first_title)]
    drafts = [Draft("", "", [], before)] if any(t.strip() for _, t in before) else []
    return drafts + heading_drafts(outline, lines, [])
