"""A question's words are worked out once per text and index generation (``question.Words``),
never carried into the next generation."""

from __future__ import annotations

import numpy as np

from varaverk.config import Settings
from varaverk.documents.chunks import Chunk
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges
from varaverk.retrieval.options import RetrieverOptions
from varaverk.retrieval.question import Words
from varaverk.retrieval.search import Retriever

QUESTION = "Does Minecraft back up with rsync?"


def _write(index: Index, path: str, text: str, row: int) -> None:
    chunk = Chunk(path=path, kind="doc", section="Backups", title="Backups", start_line=1,
                  end_line=2, text=text, context=path)
    index.write(IndexChanges(new_chunks=[(chunk, np.eye(4, dtype=np.float32)[row])],
                             embedder=("test", "m", 4),
                             file_rows=[FileRow(path, "doc", 1, 1, "x", "indexed", "", 1)]))


def test_unknown_names_are_looked_up_again_in_a_new_generation(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        _write(index, "a.md", "The mover copies shares with rsync every night.", 0)
        lexical = Retriever(Settings(), index, options=RetrieverOptions(mode="lexical"))
        first = lexical.search(QUESTION, 5)
        assert [h.unknown for h in first] == [("Minecraft",)]
        assert lexical.search(QUESTION, 5)[0].unknown == ("Minecraft",)   # kept, the same
        _write(index, "b.md", "The Minecraft world is copied with rsync too.", 1)
        again = lexical.search(QUESTION, 5)
        assert sorted(h.chunk.path for h in again) == ["a.md", "b.md"]
        assert all(h.unknown == () for h in again)


def test_words_of_a_text_are_those_of_its_analysis(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        _write(index, "a.md", "MOVER_STOP_TIMEOUT stops the mover.", 0)
        table = Retriever(Settings(), index, options=RetrieverOptions(mode="lexical"))._table()
        words = Words.of("How long is MOVER_STOP_TIMEOUT on Zfs2Cloud?", table)
        assert words == Words("long MOVER_STOP_TIMEOUT Zfs2Cloud",
                              ("long", "MOVER_STOP_TIMEOUT", "Zfs2Cloud"),
                              ("MOVER_STOP_TIMEOUT",), ("Zfs2Cloud",))
        assert Words.of("How long is MOVER_STOP_TIMEOUT on Zfs2Cloud?", table) is words
