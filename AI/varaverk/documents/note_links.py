"""Notes sources: the titles that ``[[links]]`` between notes are written as.

Links between notes are written as their targets' titles in the embedded text, so a chunk
that says "see [[20240101120000]]" reads "see Backup rotation". That needs every note's title,
which ``link_titles`` collects from the source's tracked notes (only when a run has notes to
chunk: the no-op refresh reads nothing). A renamed target updates the notes linking to it
the next time those notes change.
"""

from __future__ import annotations

from typing import Callable, Iterable

from varaverk.documents.guard import attempt
from varaverk.documents.markdown_sections import parse_front_matter
from varaverk.documents.obsidian_notes import note_name, note_title
from varaverk.documents.org_notes import org_ids


def link_titles(notes: Iterable[tuple[str, str, Callable[[], str | None]]]) -> dict[str, str]:
    """Link target -> title for one notes source.

    Args:
        notes: ``(path in the source, kind note|org, read)`` for each tracked note; ``read()``
            returns its text as it is chunked (decoded, secrets masked) or None (left out).

    Returns:
        ``{note name (lower case file name without .md): title}`` for Obsidian notes and
        ``{"id:<ID>": title}`` for org nodes with an ``:ID:`` property.
    """
    titles: dict[str, str] = {}
    for path, kind, read in notes:
        # One note's failure costs its own title only (``guard``); it is skipped when chunked.
        found, _ = attempt(path, lambda: _note_titles(path, kind, read))
        for key, title in (found or {}).items():
            if kind == "org":
                titles[key] = title
            else:
                titles.setdefault(key, title)
    return titles


def _note_titles(path: str, kind: str, read: Callable[[], str | None]) -> dict[str, str]:
    """One note's entries for ``link_titles``."""
    text = read()
    if text is None:
        return {}
    if kind == "org":
        return {f"id:{k}": v for k, v in org_ids(path, text).items()}
    return {note_name(path): note_title(path, _front_matter(text))}


def _front_matter(text: str) -> dict:
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    return parse_front_matter(text[3:end])
