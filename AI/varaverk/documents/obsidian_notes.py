"""Obsidian notes (kind ``note``): Markdown with front matter, wikilinks, embeds and callouts.

A note is chunked by headings like any Markdown document
(``varaverk.documents.markdown_sections``), after these Obsidian rules:

* Front matter (YAML) is metadata, never text: its ``tags`` and ``aliases`` (a list, or one
  string of comma/space-separated words) become the chunk's lexical ``keywords``, with the
  note's inline ``#tags``. An alias or a tag then matches lexically (FTS5), though neither is
  embedded.
* An inline ``#tag`` is never a heading (CommonMark needs a space after ``#``); it stays in the
  text as written.
* ``[[target]]``, ``[[target|shown]]``, ``[[target#heading]]`` and embeds ``![[target]]`` are
  written as what a reader sees: the shown text, else the target note's title (front matter
  ``title``, else its file name), with `` › heading`` when a heading is linked. Embedded
  attachments (``![[diagram.png]]``) keep their file name.
* Callouts ``> [!warning] Title`` stay as text, with the marker written as a word
  (``> Warning: Title``). ``%% comments %%`` (Obsidian's hidden text) are left out.
* The note's title (front matter ``title``, else the file name without ``.md``) leads every
  chunk's context trail, and titles the text before the first heading.

Every rewrite stays on its line, so line numbers remain those of the file.
"""

from __future__ import annotations

import os
import re
from typing import Any

from varaverk.documents.chunks import Draft, unique_words
from varaverk.documents.markdown_sections import markdown_drafts
from varaverk.named_sources import file_stem

WIKILINK = re.compile(r"(!?)\[\[([^\[\]|#]*)(?:#([^\[\]|]*))?(?:\|([^\[\]]*))?\]\]")
INLINE_TAG = re.compile(r"(?<![\w&/#])#([A-Za-z_][\w/-]*)")
_CALLOUT = re.compile(r"^(\s*(?:>\s*)+)\[!([A-Za-z-]+)\][+-]?\s*")
_COMMENT = re.compile(r"%%.*?%%")
_FENCE = re.compile(r"^\s*(```|~~~)")


def note_name(path: str) -> str:
    """The name a wikilink uses for a note: its file name without ``.md``, lower case."""
    base = os.path.basename(path)
    stem, ext = os.path.splitext(base)
    return (stem if ext.lower() in (".md", ".markdown") else base).strip().lower()


def note_title(path: str, meta: dict[str, Any]) -> str:
    """A note's title: front matter ``title``, else its file name without the extension."""
    title = meta.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return file_stem(path)


def as_words(value: Any, separators: str = r"[,\s]+") -> list[str]:
    """Front matter tags or aliases as a list of strings: a YAML list, or one string split at
    ``separators`` (tags: commas and spaces; aliases: ``as_words(v, ",")``, commas only)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip().lstrip("#") for v in value if str(v).strip()]
    return [w.strip().lstrip("#") for w in re.split(separators, str(value)) if w.strip("# ")]


def resolve_links(line: str, links: dict[str, str]) -> str:
    """``line`` with every wikilink and embed written as its shown text or target title."""
    def shown(m: re.Match) -> str:
        embed, target, heading, alias = m.group(1), m.group(2).strip(), m.group(3), m.group(4)
        if alias and alias.strip():
            return alias.strip()
        if not target:  # [[#heading]]: a heading of this note
            return (heading or "").strip()
        name = note_name(target)
        title = links.get(name)
        if title is None:
            ext = os.path.splitext(target)[1].lower()
            title = target if (embed and ext and ext not in (".md", ".markdown")) \
                else os.path.basename(target).removesuffix(".md")
        return f"{title} › {heading.strip()}" if heading and heading.strip() else title
    return WIKILINK.sub(shown, line)


def _rewrite_lines(text: str, links: dict[str, str]) -> tuple[str, list[str]]:
    """The note text with links, callouts and comments rewritten; and its inline tags."""
    out, tags, fenced = [], [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced:
            line = _COMMENT.sub("", line)
            line = resolve_links(line, links)
            line = _CALLOUT.sub(lambda m: f"{m.group(1)}{m.group(2).capitalize()}: ", line)
            tags.extend(INLINE_TAG.findall(line))
        out.append(line)
    return "\n".join(out), tags


def obsidian_drafts(path: str, text: str, links: dict[str, str]) -> list[Draft]:
    """Chunk drafts for one Obsidian note (see the module doc).

    Args:
        path: the stored path (``vault:Backups/restic.md``).
        text: the decoded note. links: note name (``note_name``) -> title, for wikilinks.

    Returns:
        Markdown drafts whose ``meta`` holds the front matter plus ``keywords`` (tags, aliases,
        inline tags; deduplicated) and ``title``.
    """
    rewritten, inline = _rewrite_lines(text, links)
    drafts = markdown_drafts(path, rewritten)
    meta = dict(drafts[0].meta) if drafts else {}
    title = note_title(path, meta)
    aliases = unique_words(as_words(meta.get("aliases"), ",") + as_words(meta.get("alias"), ","))
    keywords = unique_words(as_words(meta.get("tags")) + aliases + inline)
    meta.update(title=title, keywords=keywords, aliases=aliases)
    for draft in drafts:
        draft.meta = meta
        if not draft.trail or draft.trail[0] != title:
            draft.trail = [title, *draft.trail]
        if not draft.title and not draft.section:
            draft.title = title
    return drafts
