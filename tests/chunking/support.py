"""Helpers for the chunking tests: decoding fixture files and harborlab's kinds."""

from __future__ import annotations

from varaverk.documents.chunks import Chunk
from tests.support.repos import harborlab_files


def decode(data: bytes) -> str:
    """Bytes to text as the sources module hands them over: BOM dropped, cp1252 fallback."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252")


def read_fixture(rel: str) -> str:
    """A harborlab fixture file, decoded."""
    return decode(harborlab_files()[rel])


def harborlab_kind(path: str) -> str | None:
    """The kind harborlab's layout gives a tracked path (the default globs), or None."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith((".sh", ".py", ".php")):
        return "header"
    if name.startswith("README-") and name.endswith(".md"):
        return "readme"
    if name.startswith("Manual-") and name.endswith(".md"):
        return "manual"
    if path.startswith("Deployment/") and name.endswith(".template"):
        return "template"
    if path in ("README.md", "Manual.md") or (name.startswith("Notes_") and "/" not in path):
        return "doc"
    return None


def by_title(chunks: list[Chunk], section: str, title: str) -> list[Chunk]:
    """The chunks (all parts) with this section and title."""
    return [c for c in chunks if c.section == section and c.title == title]


def squeeze(text: str) -> str:
    """Text without white space, to compare what parts hold with what the whole held."""
    return "".join(text.split())
