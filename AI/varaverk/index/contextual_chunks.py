"""Contextual chunks (``AI_CONTEXTUAL_CHUNKS``): every chunk of a document embedded, and indexed
for lexical search, with a line saying which document it belongs to.

The line is the document's title and the first sentence of its extractive summary
(``varaverk.summaries.extractive.context_line``), put before the chunk's own context trail
(``path › heading trail``): Anthropic's "contextual retrieval" with a summary made without a
model. It is the extractive summary, never the stored (possibly model-made) one, so a
document's vectors depend on its content alone. The line costs tokens of the embedder's
budget: when it would push a chunk past ``max_tokens`` the document is chunked again with
that much less room, so no chunk's text is cut off by the embedder.

The store records whether its chunks carry the line (meta ``chunk_context``,
``varaverk.index.store.compatibility.check_chunk_context``); vectors with and without it are
never mixed in one index. Imported only when a document is chunked with the line: the no-op
refresh never loads it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from varaverk.summaries.extractive import context_line, extractive_summary

# Less room than this per chunk would chunk a document into shreds: keep the budget instead.
MIN_ROOM_FRACTION = 0.5


def with_document_line(chunks: list, count_tokens: Callable[[str], int], max_tokens: int,
                       rechunk: Callable[[int], list]) -> list:
    """``chunks`` (one document's, document order) with the document line before each
    context; ``rechunk(room)`` chunks the document again with ``room`` tokens per chunk when
    the line would not fit beside the longest chunk."""
    line = context_line(extractive_summary(chunks))
    if not line:
        return chunks
    cost = count_tokens(line + "\n")
    if any(count_tokens(c.embed_text) + cost > max_tokens for c in chunks):
        room = max(int(max_tokens * MIN_ROOM_FRACTION), max_tokens - cost)
        chunks = rechunk(room) or chunks
    return [replace(c, context=f"{line}\n{c.context}") for c in chunks]
