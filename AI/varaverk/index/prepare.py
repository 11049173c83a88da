"""Preparing one tracked document for the index: read (never through a link), hash, decode,
mask secrets, chunk. Shared by refresh and plan, so a dry run predicts exactly what a run
stores.

The chunkers (``varaverk.documents.chunking``, ``note_links``) and hashlib are imported only
when a document is read or chunked: the no-op refresh does neither, and
``tests/benchmarks/bench_refresh.py`` names the chunkers among the modules it must not load.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from varaverk.documents import guard, tracked_files
from varaverk.index.classify import Entry
from varaverk.index.secret_masks import mask, masked_text, report_masked
from varaverk.named_sources import DEFAULT_SOURCE, NOTE_KINDS

log = logging.getLogger(__name__)

REASON_NO_HEADER = "no leading comment, usage text or commented section"
REASON_NO_TEXT = "no text to index"


def read_document(root: Path, entry: Entry) -> tuple[bytes | None, str]:
    """A document's bytes, or ``(None, reason)`` when it cannot be read (logged).

    ``root``: the repository; an entry of another source is read from its own work tree.
    """
    try:
        with tracked_files.open_tracked(entry.root or root, entry.rel or entry.path,
                                        entry.st) as fh:
            return fh.read(), ""
    except OSError as exc:
        reason = f"{tracked_files.REASON_UNREADABLE}: {exc.strerror or exc}"
        log.warning("%s: %s", entry.path, reason)
        return None, reason


def sha256(data: bytes) -> str:
    """The hex SHA-256 of a document's bytes (the ``files.sha256`` column)."""
    import hashlib  # loads OpenSSL's bindings: only runs that read a file need it
    return hashlib.sha256(data).hexdigest()


def decode_and_chunk(entry: Entry, data: bytes, count_tokens, max_tokens: int,
                     links: Callable[[], dict] | None = None, contextual: bool = False
                     ) -> tuple[tracked_files.Decoded, list, str]:
    """Decode and chunk one document: ``(decoded, chunks, skip reason or "")``.

    ``links``: a zero-argument callable giving the source's link titles (notes sources;
    ``LinkTitles.getter``). ``decoded.masked`` keeps the masked values a chunk holds.
    ``contextual`` (``AI_CONTEXTUAL_CHUNKS``): every chunk's context starts with its
    document's line (``contextual_chunks``).
    """
    decoded = tracked_files.decode(data)
    if decoded.text is None:
        log.warning("%s: skipped: %s", entry.path, decoded.warning)
        return decoded, [], decoded.warning
    if decoded.warning:
        log.warning("%s: %s", entry.path, decoded.warning)
    from varaverk.documents.chunking import chunk_document

    decoded = mask(decoded, entry.kind)
    titles = links() if links is not None and entry.kind in NOTE_KINDS else None
    chunks = chunk_document(entry.path, entry.kind, decoded.text, max_tokens=max_tokens,
                            count_tokens=count_tokens, links=titles)
    if contextual and chunks:
        from varaverk.index.contextual_chunks import with_document_line
        chunks = with_document_line(chunks, count_tokens, max_tokens, lambda room: chunk_document(
            entry.path, entry.kind, decoded.text, max_tokens=room, count_tokens=count_tokens,
            links=titles))
    decoded = report_masked(entry.path, decoded, chunks)
    if entry.source != DEFAULT_SOURCE:
        from dataclasses import replace  # loaded with the chunkers; change detection is not

        chunks = [replace(c, source=entry.source) for c in chunks]
    if not chunks:
        return decoded, [], REASON_NO_HEADER if entry.kind == "header" else REASON_NO_TEXT
    return decoded, chunks, ""


def guarded_decode_and_chunk(entry: Entry, data: bytes, count_tokens, max_tokens: int,
                             links: Callable[[], dict] | None = None, contextual: bool = False
                             ) -> tuple[tracked_files.Decoded | None, list, str, str]:
    """``decode_and_chunk`` under the per-file guard (``documents.guard.attempt``):
    ``(decoded, chunks, skip reason or "", failure or "")``.

    Decoding, masking, front matter, chunking and the source's link titles all run inside
    it, so whatever one file raises, or its time overrun, is that file's ``failure`` (then
    ``decoded`` is None, ``chunks`` empty and the reason is the failure); the run goes on.

    Raises:
        VaraverkError, KeyboardInterrupt, SystemExit: errors of the run, not of the file.
    """
    done, failure = guard.attempt(entry.path, lambda: decode_and_chunk(
        entry, data, count_tokens, max_tokens, links, contextual), size=len(data))
    if done is None:
        return None, [], failure, failure
    return (*done, "")


class LinkTitles:
    """The link titles of each notes source (``varaverk.documents.note_links.link_titles``),
    read once per run, when a note of that source is first chunked.

    ``entries``: every source's classified paths; ``root``: the repository.
    """

    def __init__(self, entries: list[Entry], root: Path):
        self._entries = entries
        self._root = root
        self._by_source: dict[str, Any] = {}

    def getter(self, entry: Entry) -> Callable[[], dict]:
        """A zero-argument callable giving the link titles of ``entry``'s source."""
        return lambda: self.of(entry.source)

    def of(self, source: str) -> dict:
        """The link titles of one source (read on first use)."""
        if source not in self._by_source:
            from varaverk.documents.note_links import link_titles

            notes = [e for e in self._entries if e.source == source and not e.reason
                     and e.kind in NOTE_KINDS]
            self._by_source[source] = link_titles(
                (e.rel or e.path, e.kind, lambda e=e: _note_text(self._root, e)) for e in notes)
        return self._by_source[source]


def _note_text(root: Path, entry: Entry) -> str | None:
    """A note's text as it is chunked (decoded, secrets masked), or None when unreadable.
    Link titles come from it, so a secret in one note's title never enters another's text."""
    data = read_document(root, entry)[0]
    decoded = tracked_files.decode(data) if data is not None else None
    if decoded is None or decoded.text is None:
        return None
    return masked_text(decoded.text, entry.kind)
