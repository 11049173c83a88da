"""A chunk as the index stores it: ``StoredChunk`` (a ``Chunk`` plus its row id), the columns
it is read from, and how a row becomes one (``chunk_from_row``).

``Index`` imports this module on its first chunk read: importing it builds the chunk records
(``varaverk.documents.chunks``) and ``StoredChunk``, classes the no-op refresh, which opens the
index only to compare file rows, never needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from varaverk.documents.chunks import Chunk

# The columns ``chunk_from_row`` turns into a StoredChunk, in its order.
CHUNK_COLUMNS = ("id, path, kind, section, title, start_line, end_line, part, text, context,"
                 " meta, source")


@dataclass(frozen=True)
class StoredChunk(Chunk):
    """A chunk as stored: every ``Chunk`` field plus its row ``id`` in the index."""

    id: int = field(default=-1, kw_only=True)


def chunk_from_row(row: Iterable[Any]) -> StoredChunk:
    """The StoredChunk of one row selected as ``CHUNK_COLUMNS``; ``meta`` that is not valid
    JSON reads as ``{}``."""
    (cid, path, kind, section, title, start, end, part, text, context, meta, source) = row
    try:
        meta_dict = json.loads(meta) if meta and meta != "{}" else {}
    except ValueError:
        meta_dict = {}
    # Every field set in field order, without the frozen dataclass's __init__ (one
    # object.__setattr__ per field): building chunks was most of reading a file's chunks,
    # which a query does for every file it merges in first (StoredChunk has no
    # __post_init__; tests/index/test_store.py checks the fields against the constructor).
    chunk = object.__new__(StoredChunk)
    chunk.__dict__.update(path=path, kind=kind, section=section, title=title, start_line=start,
                          end_line=end, text=text, context=context, part=part, meta=meta_dict,
                          source=source, id=cid)
    return chunk
