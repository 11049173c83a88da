"""The label field's statistics stored at write time (varaverk.index.store.labels) give the
label BM25 exactly the scores it computes from the vector table's labels, on real SQLite
indexes: a fresh one, one with a row the vector table leaves out, one migrated from schema 3,
and one refreshed after deletions."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from varaverk.documents.chunks import Chunk
from varaverk.index.store.index import Index
from varaverk.index.store.labels import chunk_label, label_text
from varaverk.index.store.records import FileRow, IndexChanges
from varaverk.index.store.schema import SCHEMA_VERSION
from varaverk.retrieval.caches import TableCache
from varaverk.retrieval.lexical import LabelBm25, StoredLabelBm25
from tests.support.older_index import rewrite_at_schema

WORDS = ["backup", "restore", "port", "cache", "factor", "size", "nightly", "mover", "the",
         "of", "Straße", "café", "max_upload_size", "x", "v2.1"]
QUERIES = ["the restore port", "cache factor cache", "max upload size of the mover",
           "Straße café", "nothing here", "v2 backup nightly nightly", "x of the",
           "stra e caf", "restore port factor size nightly mover backup cache"]


def chunks(n: int, seed: int) -> list[Chunk]:
    """n chunks over 12 files whose names, sections and titles draw on WORDS (repeated
    tokens, stop words, non-ASCII, underscores and dots)."""
    rng = np.random.default_rng(seed)

    def words(most: int) -> str:
        return " ".join(rng.choice(WORDS, int(rng.integers(0, most))).tolist())
    out = []
    for i in range(n):
        name = words(3).replace(" ", "-") or "x"
        path = f"docs/{i % 12}/{name}.{i % 12}.md"
        out.append(Chunk(path=path, kind="doc", section=words(4), title=words(4),
                         start_line=i + 1, end_line=i + 1, text=f"body {i}", context=path))
    return out


def vectors(n: int) -> np.ndarray:
    m = np.random.default_rng(1).standard_normal((n, 4)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def write(index: Index, made: list[Chunk], **kw) -> None:
    changes = IndexChanges(embedder=("test", "m", 4), **kw)
    changes.new_chunks.extend(zip(made, vectors(len(made))))
    changes.file_rows.extend(FileRow(path=p, kind="doc", size=1, mtime_ns=1, sha256="0",
                                     status="indexed") for p in sorted({c.path for c in made}))
    index.write(changes)


def assert_same_scores(index: Index) -> None:
    """StoredLabelBm25 of the index equals LabelBm25 over its vector table's labels, bit
    for bit, for every query."""
    table = index.vector_table()
    built = LabelBm25([label_text(p, s, t) for p, s, t in
                       zip(table.paths.tolist(), table.sections.tolist(), table.titles.tolist())])
    stored = StoredLabelBm25(index, np.asarray(table.ids, dtype=np.int64))
    assert stored.n == built.n == len(table.ids)
    found = 0
    for query in QUERIES:
        rows, scores = stored.score(query)
        want_rows, want_scores = built.score(query)
        assert rows.tolist() == want_rows.tolist(), query
        assert scores.tolist() == want_scores.tolist(), query
        found += rows.size
    assert found  # the queries do match labels


def test_stored_label_statistics_score_exactly_as_labels_built_from_the_table(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        write(index, chunks(200, 3))
        assert_same_scores(index)
        # A refresh deleting and replacing files keeps the stored statistics in step.
        write(index, chunks(40, 4)[:20], delete_paths=[f"docs/{i}/" for i in range(3)],
              replace_chunks_of=sorted({c.path for c in chunks(200, 3)[:60]}))
        assert_same_scores(index)


def test_a_row_left_out_of_the_vector_table_is_left_out_of_the_label_statistics(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        write(index, chunks(50, 5))
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text, "
                 "context, vec, label) VALUES ('docs/port.md', 'doc', 'restore port', "
                 "'cache', 1, 1, 't', 'c', ?, ?)",   # a 3-value vector: never ranked
                 (np.ones(3, "<f4").tobytes(), chunk_label("docs/port.md", "restore port",
                                                           "cache")))
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.commit()
    conn.close()
    with Index.open(tmp_path / "index.sqlite", readonly=True) as index:
        assert len(index.vector_table().excluded) == 1
        assert_same_scores(index)


def test_an_index_of_schema_3_gains_its_labels_when_migrated(tmp_path):
    path = tmp_path / "index.sqlite"
    made = chunks(80, 6)
    with Index.open(path) as index:   # made at the current schema, then taken back to 3
        write(index, made)
    conn = rewrite_at_schema(path, 3, ("path", "kind", "section", "title", "start_line",
                                       "end_line", "part", "text", "context", "meta", "vec",
                                       "source", "keywords"))
    conn.commit()
    conn.close()
    with Index.open(path) as index:   # migrates
        assert index.meta()["schema_version"] == str(SCHEMA_VERSION)
        assert index.fts_search("body", 100)   # the text's full-text index is untouched
        assert_same_scores(index)
        # New rows are labelled by their own write.
        write(index, chunks(30, 7)[:10], replace_chunks_of=[made[0].path])
        assert_same_scores(index)


def test_the_retriever_reads_stored_labels_and_falls_back_to_building_them(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        write(index, chunks(60, 8))
        cache = TableCache.of(index, index.vector_table())
        assert isinstance(cache.labels(), StoredLabelBm25)
        # A long-lived retriever of a small table builds them in memory (no reads per token).
        cache = TableCache.of(index, index.vector_table(), preload=True)
        assert type(cache.labels()) is LabelBm25
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    conn.execute("DELETE FROM labels_fts_docsize WHERE id = (SELECT min(id) FROM chunks)")
    conn.commit()
    conn.close()
    with Index.open(tmp_path / "index.sqlite", readonly=True) as index:
        cache = TableCache.of(index, index.vector_table())
        with pytest.raises(ValueError, match="no stored label"):
            StoredLabelBm25(index, cache.ids)
        labels = cache.labels()
        assert type(labels) is LabelBm25 and labels.score("restore port")[0].size
