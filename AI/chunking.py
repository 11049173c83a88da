"""Chunks: the unit that is embedded, stored, scored and cited.

This module holds the ``Chunk`` record and ``chunk_document``, which dispatches a decoded
document to the chunker for its kind (script headers, Markdown, templates) and then enforces
the embedder's input budget (B18).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEP = " \u203a "  # " › " joins the context trail: path › SECTION › title


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of documentation.

    Attributes:
        path: repository-relative path (as ``git ls-files -z`` gives it).
        kind: header | readme | manual | template | doc.
        section: the header section (``OPERATIONAL SAFEGUARDS``) or the Markdown heading trail's
            top; empty when none.
        title: the named paragraph (``MOVER_STOP_TIMEOUT``) or the nearest Markdown heading;
            empty for a section's lead prose.
        start_line, end_line: 1-based inclusive line range in the decoded file.
        text: the verbatim text shown to users and handed to the model.
        context: the trail ``path › section › title`` (or the heading trail) that is embedded
            with the text so a chunk knows where it belongs.
        part: 0 for a whole chunk; 1..n when an over-budget chunk was split (B18).
        meta: extra metadata (front matter), never embedded.
    """

    path: str
    kind: str
    section: str
    title: str
    start_line: int
    end_line: int
    text: str
    context: str
    part: int = 0
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def embed_text(self) -> str:
        """What the embedder sees: the context trail, a newline, then the text."""
        return f"{self.context}\n{self.text}"

    @property
    def citation(self) -> str:
        """How answers cite this chunk: ``path › SECTION › title`` with empty parts left out."""
        return SEP.join(p for p in (self.path, self.section, self.title) if p)
