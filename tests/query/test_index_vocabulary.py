"""The index's vocabulary looked up token by token (caches.IndexVocabulary) answers as the whole
vocabulary read at once (Index.fts_vocabulary) does, on a real SQLite index."""

from __future__ import annotations

import numpy as np

from varaverk.documents.chunks import Chunk
from varaverk.index.store.index import Index
from varaverk.index.store.records import IndexChanges
from varaverk.retrieval.caches import IndexVocabulary, TableCache


def _index(path, texts: list[str]) -> Index:
    index = Index.open(path)
    m = np.eye(4, dtype=np.float32)
    index.write(IndexChanges(embedder=("t", "m", 4), new_chunks=[
        (Chunk(path=f"d{i}.md", kind="doc", section="S", title="T", start_line=1, end_line=1,
               text=text, context=f"d{i}.md"), m[i % 4]) for i, text in enumerate(texts)]))
    return index


def test_token_look_ups_agree_with_the_whole_vocabulary(tmp_path):
    with _index(tmp_path / "i.sqlite", ["restic backups nightly", "MOVER_STOP_TIMEOUT café",
                                        "the port 8443"]) as index:
        whole = index.fts_vocabulary()
        lazy = IndexVocabulary(index)
        assert lazy and {"restic", "mover_stop_timeout", "8443", "d0", "cafe"} <= whole
        for token in sorted(whole) + ["absent", "backup", "", "RESTIC", "caf"]:
            assert (token in lazy) == (token in whole), token
        assert 5 not in lazy
        # An unpreloaded retriever's table gives the look-up container, a preloaded one the set.
        assert isinstance(TableCache.of(index, index.vector_table()).vocabulary(),
                          IndexVocabulary)
        assert TableCache.of(index, index.vector_table(), preload=True).vocabulary() == whole


def test_an_index_without_tokens_has_an_empty_vocabulary(tmp_path):
    with _index(tmp_path / "i.sqlite", []) as index:
        assert not IndexVocabulary(index) and "anything" not in IndexVocabulary(index)
        assert index.fts_vocabulary() == frozenset()
