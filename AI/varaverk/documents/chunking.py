"""Chunking a document: the kind -> chunker table and ``chunk_document``.

``chunk_document`` normalises a decoded document's text, hands it to the format chunker for its
kind (``CHUNKERS``), each of which returns ``Draft`` records, and holds every draft to the
embedder's input budget (``varaverk.documents.budget``). The records and conventions every
kind shares are in ``varaverk.documents.chunks``.

Importing this module imports every chunker, and with them markdown-it-py and PyYAML; the
indexer imports it only when a document is to be chunked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from varaverk.documents.budget import budget_draft, char_count
from varaverk.documents.chat_exports import chat_drafts
from varaverk.documents.chunks import KINDS, Chunk, Draft, TokenCounter, without_surrogates
from varaverk.documents.conf_templates import template_drafts
from varaverk.documents.markdown_sections import markdown_drafts
from varaverk.documents.obsidian_notes import obsidian_drafts
from varaverk.documents.org_notes import org_drafts
from varaverk.documents.rst_sections import rst_drafts
from varaverk.documents.script_headers import header_drafts
from varaverk.documents.tracked_files import normalise_newlines


@dataclass(frozen=True)
class Document:
    """What a chunker may need to know about one document.

    Attributes:
        path: the stored path, used in every chunk's context and citation.
        text: the decoded, normalised text.
        count: the embedder's token counter. max_tokens: its input budget.
        links: for notes, link target -> title (``note_links.link_titles``).
    """

    path: str
    text: str
    count: TokenCounter
    max_tokens: int
    links: dict[str, str]


def _headed_drafts(doc: Document) -> list[Draft]:
    """Markdown, or reStructuredText for a ``.rst`` file, by heading."""
    if doc.path.lower().endswith(".rst"):
        return rst_drafts(doc.path, doc.text)
    return markdown_drafts(doc.path, doc.text)


# Kind -> the chunker that cuts a document of that kind into drafts, in ``KINDS`` order.
CHUNKERS: dict[str, Callable[[Document], list[Draft]]] = {
    "header": lambda doc: header_drafts(doc.path, doc.text),
    "readme": _headed_drafts,
    "manual": _headed_drafts,
    "template": lambda doc: template_drafts(doc.path, doc.text),
    "doc": _headed_drafts,
    "note": lambda doc: obsidian_drafts(doc.path, doc.text, doc.links),
    "org": lambda doc: org_drafts(doc.path, doc.text, doc.links),
    # Chats are cut into runs of messages by the chunker itself (each run's time span is its
    # title), so it budgets with the embedder's own counter.
    "chat": lambda doc: chat_drafts(doc.path, doc.text, doc.count, doc.max_tokens),
}


def normalise_text(text: str) -> str:
    """Drop every U+FEFF, turn CRLF and lone CR into LF, and lone surrogates into U+FFFD
    (``without_surrogates``).

    ``tracked_files.decode`` already drops a leading byte order mark and turns line ends;
    doing it here keeps the chunkers safe when called directly. A mark is dropped wherever it
    is: one left after the first (a tool that adds one, files joined with ``cat``) hides the
    front matter or a heading, and inside text it is a deprecated zero-width space.
    """
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")
    return without_surrogates(normalise_newlines(text))


def chunk_document(path: str, kind: str, text: str, *, max_tokens: int = 256,
                   count_tokens: TokenCounter | None = None,
                   links: dict[str, str] | None = None) -> list[Chunk]:
    """Cut one decoded document into chunks that each fit the embedder's budget.

    Args:
        path: repository-relative path, used in every chunk's context and citation.
        kind: one of ``KINDS`` (see ``Chunk.kind``).
        text: the decoded file; a leading BOM and CR/CRLF line ends are normalised here too.
        max_tokens: the embedder's input budget; every chunk's ``embed_text`` counts at most
            this many tokens with ``count_tokens``.
        count_tokens: the embedder's token counter; None counts one token per character,
            which is conservative for YAML, banners and other dense text.
        links: for notes (kinds note, org), link target -> title (``note_links.link_titles``),
            used to write ``[[links]]`` as their targets' titles; None: links keep their text.

    Returns:
        The chunks in file order; ``[]`` for a script without a header comment (or with only
        a trivial one) and for a document without any text.

    Raises:
        ValueError: an unknown kind, or a budget below 8 tokens.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}; expected one of {', '.join(KINDS)}")
    text = normalise_text(text)
    count = count_tokens or char_count
    drafts = CHUNKERS[kind](Document(path, text, count, max_tokens, links or {}))
    chunks: list[Chunk] = []
    for draft in drafts:
        chunks.extend(budget_draft(path, kind, draft, count, max_tokens))
    return chunks
