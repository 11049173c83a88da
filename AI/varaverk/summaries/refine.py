"""The model summary of one document: a refine pass over its chunks through the generation
client (``varaverk.answering.generation``).

The chunks, in document order, are grouped into parts of at most ``part_chars`` characters.
The model summarises the first part; each further part goes to the model with the summary so
far, to be refined so that it covers that part too (LangChain's "refine" summarisation). A
short file costs one request, a long one a request per part. The stored text is the document's
title (``extractive.document_title``) on the first line, then the model's summary, so every
summary starts the same way whichever model made it.
"""

from __future__ import annotations

from typing import Any, Sequence

from varaverk.answering.generation.events import GenerationError
from varaverk.summaries.extractive import ChunkLike, document_title

PART_CHARS = 6000
MAX_SUMMARY_CHARS = 1200

SYSTEM = ("You summarise technical documentation for a search index. Write plain text, at most "
          "five sentences: what the document is, what it covers and the names (settings, "
          "commands, files) a reader would search for. No preamble, no lists, no markup.")
FIRST = "Document {path}:\n\n{part}\n\nSummarise this document."
REFINE = ("A summary of the document {path}, made from its earlier parts:\n\n{summary}\n\n"
          "Its next part:\n\n{part}\n\nRewrite the summary so that it also covers this part. "
          "Keep it at most five sentences.")


def parts(chunks: Sequence[ChunkLike], part_chars: int = PART_CHARS) -> list[str]:
    """The chunks' texts, each under its heading trail (``section > title``), grouped in
    document order into parts of at most ``part_chars`` characters (a longer chunk is cut)."""
    out, current = [], ""
    for chunk in chunks:
        heading = " > ".join(p for p in (chunk.section, chunk.title) if p)
        piece = (f"## {heading}\n{chunk.text}" if heading else chunk.text)[:part_chars]
        if current and len(current) + len(piece) + 2 > part_chars:
            out.append(current)
            current = ""
        current = f"{current}\n\n{piece}" if current else piece
    if current:
        out.append(current)
    return out


def model_summary(chunks: Sequence[ChunkLike], chat_client: Any,
                  part_chars: int = PART_CHARS) -> str:
    """The refine-pass summary of one document (its chunks in document order).

    ``chat_client`` is a ``ChatClient`` (``.stream(messages)`` yielding events, the last with
    a ``completion``). Returns "" for no chunks. Raises GenerationUnavailable (no server) or
    GenerationError (a failed turn, or a model that answered nothing for the first part).
    """
    if not chunks:
        return ""
    path = chunks[0].path
    summary = ""
    for i, part in enumerate(parts(chunks, part_chars)):
        template = FIRST if i == 0 else REFINE
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": template.format(path=path, part=part,
                                                                 summary=summary)}]
        answer = _complete(chat_client, messages)
        if answer:
            summary = answer[:MAX_SUMMARY_CHARS]
        elif i == 0:
            raise GenerationError(f"the model gave no summary of {path}")
    return f"{document_title(list(chunks))}\n{summary}"


def _complete(chat_client: Any, messages: list[dict[str, str]]) -> str:
    """The answer text of one turn (reasoning left out), stripped."""
    for event in chat_client.stream(messages):
        if event.type == "done" and event.completion is not None:
            return " ".join(event.completion.answer.split())
    return ""
