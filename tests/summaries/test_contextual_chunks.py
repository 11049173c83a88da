"""Contextual chunks: every chunk embedded and indexed with its document's line, recorded by
the store, never mixed with plain chunks, and kept within the embedder's budget."""

from __future__ import annotations

import pytest

from tests.index.conftest import embed_inputs, run_index
from tests.summaries.conftest import summary_settings
from varaverk import exitcodes
from varaverk.documents.chunks import Chunk
from varaverk.index.contextual_chunks import with_document_line
from varaverk.index.refresh import refresh
from varaverk.index.store.errors import IndexMismatch
from varaverk.index.store.index import Index

MEDIA_LINE = ("Media: The media jobs keep the library index current and clean up after "
              "downloads.")


def test_each_chunk_is_embedded_and_indexed_with_its_document_line(docs_repo, tmp_path,
                                                                    model_server):
    settings = summary_settings(docs_repo, tmp_path, model_server, ai_contextual_chunks=True)
    refresh(settings, progress=False)
    with Index.open(settings.index_path, readonly=True) as idx:
        orphans = [c for c in idx.chunks_for_path("Docs/README-Media.md") if c.title == "Orphans"]
        assert idx.meta()["chunk_context"] == "title"
        trail = "Docs/README-Media.md \u203a Media \u203a Orphans"
        assert orphans[0].context == f"{MEDIA_LINE}\n{trail}"
        # "current" is only in the document's first sentence: the line makes the section findable.
        found = {cid for cid, _ in idx.fts_search("orphan current", 5)}
        assert orphans[0].id in found
    assert f"{orphans[0].context}\n{orphans[0].text}" in embed_inputs(model_server)
    model_server.reset()
    again = refresh(settings, progress=False)
    assert not again.wrote and embed_inputs(model_server) == []  # the no-op run stays a no-op


def test_switching_contextual_chunks_is_refused_until_force(docs_repo, tmp_path, model_server):
    plain = summary_settings(docs_repo, tmp_path, model_server)
    refresh(plain, progress=False)
    with Index.open(plain.index_path, readonly=True) as idx:
        assert idx.meta()["chunk_context"] == "off"
    contextual = plain.replace(ai_contextual_chunks=True)
    with pytest.raises(IndexMismatch, match="AI_CONTEXTUAL_CHUNKS=true"):
        refresh(contextual, progress=False)
    cli = run_index(contextual, env_extra={"AI_CONTEXTUAL_CHUNKS": "true"})
    assert cli.returncode == exitcodes.MISMATCH and "ai-index --force" in cli.stderr
    refresh(contextual, force=True, progress=False)
    with Index.open(plain.index_path, readonly=True) as idx:
        assert idx.meta()["chunk_context"] == "title"
        assert all(c.context.startswith(MEDIA_LINE)
                   for c in idx.chunks_for_path("Docs/README-Media.md"))


def _chunk(title: str, text: str) -> Chunk:
    return Chunk("a.md", "doc", "Guide", title, 1, 2, text, f"a.md \u203a Guide \u203a {title}")


def test_a_line_that_would_overflow_a_chunk_makes_the_document_chunked_with_less_room():
    words = len  # one token per character keeps the arithmetic visible
    full = [_chunk("Guide", "The guide explains everything."), _chunk("Step", "x" * 60)]
    asked = []

    def rechunk(room: int) -> list[Chunk]:
        asked.append(room)
        return [_chunk("Guide", "The guide explains everything."), _chunk("Step", "x" * 30),
                _chunk("Step", "x" * 30)]

    out = with_document_line(full, words, 100, rechunk)
    line = "Guide: The guide explains everything."
    assert asked == [100 - len(line + "\n")]
    assert [c.text for c in out] == ["The guide explains everything.", "x" * 30, "x" * 30]
    assert all(c.context.startswith(line + "\n") for c in out)
    # Room enough: chunked once.
    assert len(with_document_line(full, words, 1000, rechunk)) == 2 and len(asked) == 1
