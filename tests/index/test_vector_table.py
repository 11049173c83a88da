"""The vector table read into one matrix (varaverk.index.store.vectors.read_vector_table) on
real SQLite files: unusable rows left out wherever they sit, the numbered columns still
aligned with the rows kept, and FTS5 document sizes that cannot be decoded refused."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from varaverk.documents.chunks import Chunk
from varaverk.index.store import fts
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges
from varaverk.retrieval.caches import TableCache


def _rows(n: int) -> list[tuple[Chunk, np.ndarray]]:
    m = np.random.default_rng(3).standard_normal((n, 4)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return [(Chunk(path=f"f{i % 3}.md", kind=("doc", "note")[i % 2], section=f"Sec {i % 4}",
                   title=f"T{i}", start_line=i + 1, end_line=i + 1, text=f"t{i}",
                   context="c"), m[i]) for i in range(n)]


def _insert(path, section: str, file: str, vec: bytes) -> None:
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text,"
                 " context, vec) VALUES (?, 'odd', ?, 'T', 1, 1, 't', 'c', ?)",
                 (file, section, vec))
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.commit()
    conn.close()


def test_unusable_rows_are_left_out_and_the_numbered_columns_stay_aligned(tmp_path):
    path = tmp_path / "index.sqlite"
    rows = _rows(9)
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows[:4], embedder=("t", "m", 4), file_rows=[
            FileRow(p, "doc", 1, 1, "x", "indexed") for p in ("f0.md", "f1.md", "f2.md")]))
    # The first row of their path and section each: a wrong length, a zero vector.
    _insert(path, "Only here", "lost.md", np.ones(3, "<f4").tobytes())
    _insert(path, "Zero", "zero.md", np.zeros(4, "<f4").tobytes())
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows[4:], embedder=("t", "m", 4)))
        table = index.vector_table()
        cache = TableCache.of(index, table)
        # titles are read from the open index, each when first asked for
        last_title = cache.titles[len(table.ids) - 1]
        titles = table.titles.tolist()
        conn = sqlite3.connect(path)
        stored = conn.execute("SELECT id, kind, section, title, source, path, vec FROM chunks "
                              "ORDER BY id").fetchall()
        conn.close()
    good = [r for r in stored if r[5] not in ("lost.md", "zero.md")]
    assert table.excluded == tuple(r[0] for r in stored if r[5] in ("lost.md", "zero.md"))
    assert table.ids.tolist() == [r[0] for r in good]
    assert table.kinds.tolist() == [r[1] for r in good]
    assert table.sections.tolist() == [r[2] for r in good]
    assert titles == [r[3] for r in good]
    assert table.sources.tolist() == [r[4] for r in good]
    assert table.paths.tolist() == [r[5] for r in good]
    np.testing.assert_array_equal(table.matrix, np.stack([np.frombuffer(r[6], "<f4")
                                                          for r in good]))
    # Numbers in order of first appearance among the rows kept.
    first: dict[str, int] = {}
    assert table.path_numbers.tolist() == [first.setdefault(r[5], len(first)) for r in good]
    first = {}
    assert table.section_numbers.tolist() == [first.setdefault(r[2], len(first)) for r in good]
    assert cache.file_of.tolist() == table.path_numbers.tolist()
    assert cache.sections_upper.tolist() == [r[2].upper() for r in good]
    assert [cache.sections[i] for i in range(len(good))] == [r[2].upper() for r in good]
    assert type(last_title) is str and last_title == good[-1][3]


def test_an_index_without_chunks_reads_an_empty_table(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        index.write(IndexChanges(embedder=("t", "m", 4)))
        table = index.vector_table()
        assert table.matrix.shape[0] == table.ids.size == table.kinds.size == 0
        cache = TableCache.of(index, table)
        assert cache.sections_upper.size == len(cache.titles) == 0


def test_upper_case_sections_keep_their_full_length(tmp_path):
    # "ß" upper-cases to "SS": np.char.upper would cut it to the array's width.
    with Index.open(tmp_path / "index.sqlite") as index:
        rows = [(replace(c, section=s), v) for (c, v), s in zip(_rows(2), ("Straße", "Port"))]
        index.write(IndexChanges(new_chunks=rows, embedder=("t", "m", 4)))
        cache = TableCache.of(index, index.vector_table())
        assert cache.sections_upper.tolist() == ["STRASSE", "PORT"]


def test_document_sizes_of_the_wrong_count_are_refused(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as index:
        index.write(IndexChanges(new_chunks=_rows(3), embedder=("t", "m", 4)))
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    ids, lengths = fts.doc_lengths(conn)
    assert ids.size == 3 and (lengths > 0).all()
    conn.execute("UPDATE chunks_fts_docsize SET sz = x'010203' WHERE id = ?",
                 (int(ids[0]),))   # three columns' sizes in a table of two
    with pytest.raises(ValueError, match="7 FTS5 document sizes for 3 rows"):
        fts.doc_lengths(conn)
    conn.close()


def test_rows_read_in_batches_match_a_row_by_row_read(tmp_path, monkeypatch):
    # Several batches, BLOBs holding zero bytes, a wrong-length BLOB inside a batch and a
    # section holding the batches' string separator (its batch is read row by row).
    from varaverk.index.store import vectors

    monkeypatch.setattr(vectors, "VECTOR_BATCH_BYTES", 3 * 4 * 4)   # three 4-d vectors
    path = tmp_path / "index.sqlite"
    rows = _rows(8)
    rows[2] = (rows[2][0], np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32))
    rows[5] = (replace(rows[5][0], section="Odd\x1fone"), rows[5][1])
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows[:6], embedder=("t", "m", 4)))
    _insert(path, "Short", "short.md", np.ones(3, "<f4").tobytes())
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows[6:], embedder=("t", "m", 4)))
        table = index.vector_table()
        titles = table.titles.tolist()
        some = [table.titles[i] for i in (4, 0, -1)]
    conn = sqlite3.connect(path)
    stored = conn.execute("SELECT id, kind, section, title, source, path, vec FROM chunks "
                          "ORDER BY id").fetchall()
    conn.close()
    good = [r for r in stored if r[5] != "short.md"]
    assert table.excluded == tuple(r[0] for r in stored if r[5] == "short.md")
    assert table.ids.tolist() == [r[0] for r in good]
    np.testing.assert_array_equal(table.matrix, np.stack([np.frombuffer(r[6], "<f4")
                                                          for r in good]))
    assert table.sections.tolist() == [r[2] for r in good]
    assert "Odd\x1fone" in table.sections.tolist()
    assert table.kinds.tolist() == [r[1] for r in good]
    assert table.paths.tolist() == [r[5] for r in good]
    # paths and sections held as distinct values and a number per row
    assert np.asarray(table.paths).tolist() == [r[5] for r in good]
    assert table.sections[1] == good[1][2] and type(table.sections[1]) is str
    assert table.paths.distinct.size == len({r[5] for r in good})
    assert titles == [r[3] for r in good]
    assert some == [good[4][3], good[0][3], good[-1][3]]


def test_a_utf16_index_reads_the_same_vectors_and_document_sizes(tmp_path):
    # Its BLOBs would change if passed through text: every batch is read row by row, and
    # FTS5's document sizes through hex.
    path = tmp_path / "index.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA encoding = 'UTF-16le'")
    conn.execute("CREATE TABLE made_first (x)")
    conn.commit()
    conn.close()
    rows = _rows(7)
    rows[3] = (replace(rows[3][0], section="Straße › Ports"), rows[3][1])
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows, embedder=("t", "m", 4)))
        table = index.vector_table()
        ids, lengths = index.fts_doc_lengths()
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-16le"
        stored = conn.execute("SELECT id, section, vec FROM chunks ORDER BY id").fetchall()
        conn.close()
    assert table.ids.tolist() == ids.tolist() == [r[0] for r in stored]
    assert table.sections.tolist() == [r[1] for r in stored]
    np.testing.assert_array_equal(table.matrix, np.stack([np.frombuffer(r[2], "<f4")
                                                          for r in stored]))
    with Index.open(tmp_path / "utf8.sqlite") as index:   # the same chunks, UTF-8
        index.write(IndexChanges(new_chunks=rows, embedder=("t", "m", 4)))
        assert lengths.tolist() == index.fts_doc_lengths()[1].tolist()
    assert (lengths > 0).all()


def test_sources_stay_aligned_with_the_rows_kept(tmp_path):
    # Three sources, the most common one first in no id order, and an unusable row of a
    # minority source: each row keeps its own source's name.
    path = tmp_path / "index.sqlite"
    names = ["repo", "notes", "repo", "chats", "notes", "repo", "repo", "notes"]
    rows = [(replace(c, source=s), v) for (c, v), s in zip(_rows(len(names)), names)]
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows[:4], embedder=("t", "m", 4)))
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text,"
                 " context, vec, source) VALUES ('z.md', 'doc', 'S', 'T', 1, 1, 't', 'c', ?,"
                 " 'chats')", (np.zeros(4, "<f4").tobytes(),))
    conn.commit()
    conn.close()
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows[4:], embedder=("t", "m", 4)))
        table = index.vector_table()
    conn = sqlite3.connect(path)
    stored = conn.execute("SELECT id, source, path FROM chunks ORDER BY id").fetchall()
    conn.close()
    good = [r for r in stored if r[2] != "z.md"]
    assert len(good) == len(names) and table.ids.tolist() == [r[0] for r in good]
    assert table.sources.tolist() == [r[1] for r in good] == names
    assert np.isin(table.sources, ["notes"]).sum() == 3


def test_chunks_of_several_sources_without_a_known_dimension_read_an_empty_table(tmp_path):
    path = tmp_path / "index.sqlite"
    rows = [(replace(c, source=s), v) for (c, v), s in zip(_rows(3), ("repo", "notes", "repo"))]
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows, embedder=("t", "m", 4)))
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM meta WHERE key = 'embed_dimension'")
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.commit()
    conn.close()
    with Index.open(path, readonly=True) as index:
        table = index.vector_table()
    assert table.ids.size == table.sources.size == table.matrix.shape[0] == 0


def test_paths_are_numbered_in_order_of_first_appearance_among_the_rows_kept(tmp_path):
    # Paths not in alphabetical order, interleaved, and the first chunk of "z.md" unusable:
    # its file is first seen at its next chunk.
    path = tmp_path / "index.sqlite"
    with Index.open(path) as index:
        index.write(IndexChanges(embedder=("t", "m", 4)))
    _insert(path, "S", "z.md", np.zeros(4, "<f4").tobytes())
    files = ["m.md", "z.md", "a.md", "z.md", "m.md", "b.md"]
    rows = [(replace(c, path=f), v) for (c, v), f in zip(_rows(len(files)), files)]
    with Index.open(path) as index:
        index.write(IndexChanges(new_chunks=rows, embedder=("t", "m", 4)))
        table = index.vector_table()
    assert len(table.excluded) == 1 and table.paths.tolist() == files
    assert table.paths.distinct.tolist() == ["m.md", "z.md", "a.md", "b.md"]
    assert table.path_numbers.tolist() == [0, 1, 2, 1, 0, 3]


def test_the_matrix_the_vectors_are_read_into_starts_as_writable_zeros():
    from varaverk.index.store.vectors import _zeroed_matrix

    m = _zeroed_matrix(3, 4)
    assert m.shape == (3, 4) and m.dtype == np.float32 and not m.any()
    m[2] = 1.5      # the vectors are copied into it batch by batch
    assert m.sum() == 6.0
    assert _zeroed_matrix(0, 4).shape == (0, 4)
