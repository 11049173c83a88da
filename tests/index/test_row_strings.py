"""Kinds, sections and paths stored as numbers at write time (varaverk.index.store.row_strings,
schema migration 6) on real SQLite files: the triggers keep ``row_strings`` and
``chunk_numbers`` exact through inserts, deletes and updates; an index of schema 5 gains them
when migrated; the vector table read from them equals the strings read row by row; numbers
out of step with the chunks are refused with a way out."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from varaverk.documents.chunks import Chunk
from varaverk.index.store.errors import IndexCorrupt
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges
from varaverk.index.store.schema import SCHEMA_VERSION
from tests.support.older_index import rewrite_at_schema


def _chunks(n: int, seed: int) -> list[tuple[Chunk, np.ndarray]]:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, 4)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return [(Chunk(path=f"docs/f{i % 5}.md", kind=("doc", "note", "manual")[i % 3],
                   section=("Install", "Backups › Restore", "doc", f"Part {i}")[i % 4],
                   title=f"T{i}", start_line=i + 1, end_line=i + 1, text=f"text {i}",
                   context="c"), m[i]) for i in range(n)]


def _write(index: Index, rows, replace_paths=()) -> None:
    paths = sorted({c.path for c, _ in rows})
    index.write(IndexChanges(new_chunks=rows, embedder=("t", "m", 4),
                             replace_chunks_of=list(replace_paths),
                             file_rows=[FileRow(p, "doc", 1, 1, "x", "indexed") for p in paths]))


def _stored(path) -> tuple[list[tuple], dict[str, int], list[tuple]]:
    """(chunks' id, kind, section, path in id order; {string: refs}; chunk_numbers rows
    resolved to strings in id order)."""
    conn = sqlite3.connect(path)
    try:
        chunks = conn.execute("SELECT id, kind, section, path FROM chunks ORDER BY id").fetchall()
        refs = dict(conn.execute("SELECT value, refs FROM row_strings"))
        numbers = conn.execute(
            "SELECT n.id, k.value, s.value, p.value FROM chunk_numbers n"
            " JOIN row_strings k ON k.id = n.kind JOIN row_strings s ON s.id = n.section"
            " JOIN row_strings p ON p.id = n.path ORDER BY n.id").fetchall()
    finally:
        conn.close()
    return chunks, refs, numbers


def _assert_exact(path) -> None:
    chunks, refs, numbers = _stored(path)
    assert numbers == chunks
    assert refs == dict(Counter(v for row in chunks for v in row[1:]))


def _assert_table_matches_rows(index: Index, path) -> None:
    table = index.vector_table()
    chunks = {row[0]: row[1:] for row in _stored(path)[0]}
    kept = [chunks[i] for i in table.ids.tolist()]
    assert table.kinds.tolist() == [k for k, _, _ in kept]
    assert table.sections.tolist() == [s for _, s, _ in kept]
    assert table.paths.tolist() == [p for _, _, p in kept]
    first: dict[str, int] = {}
    assert table.path_numbers.tolist() == [first.setdefault(p, len(first)) for _, _, p in kept]
    first = {}
    assert table.section_numbers.tolist() == [first.setdefault(s, len(first))
                                              for _, s, _ in kept]


def test_the_triggers_keep_the_numbers_exact_through_writes_replacements_and_updates(tmp_path):
    path = tmp_path / "index.sqlite"
    with Index.open(path) as index:
        _write(index, _chunks(12, 1))
        _assert_exact(path)
        # docs/f0.md's chunks replaced by fewer: its "Part 0", "Part 4"... strings are gone
        _write(index, [(replace(c, section="Only new"), v) for c, v in _chunks(2, 2)[:1]],
               replace_paths=["docs/f0.md"])
        _assert_exact(path)
        assert "Part 0" not in _stored(path)[1] and "Only new" in _stored(path)[1]
        _assert_table_matches_rows(index, path)
    conn = sqlite3.connect(path)
    with conn:   # a foreign writer's update of the numbered columns
        conn.execute("UPDATE chunks SET section = path, kind = 'renamed' WHERE id % 2 = 0")
    conn.close()
    _assert_exact(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM chunks")
    conn.close()
    assert _stored(path) == ([], {}, [])


def test_an_index_of_schema_5_gains_its_numbers_when_migrated(tmp_path):
    path = tmp_path / "index.sqlite"
    with Index.open(path) as index:   # made at the current schema, then taken back to 5
        _write(index, _chunks(20, 3))
    conn = rewrite_at_schema(path, 5, ("path", "kind", "section", "title", "start_line",
                                       "end_line", "part", "text", "context", "meta", "vec",
                                       "source", "keywords", "label"))
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text,"
                 " context, vec) VALUES ('odd.md', 'odd', 'Short', 'T', 1, 1, 't', 'c', ?)",
                 (np.ones(3, "<f4").tobytes(),))   # a wrong-length vector: never ranked
    conn.commit()
    conn.close()
    with Index.open(path) as index:   # migrates
        assert index.meta()["schema_version"] == str(SCHEMA_VERSION)
        _assert_exact(path)
        table = index.vector_table()
        assert len(table.excluded) == 1 and "odd.md" not in table.paths.tolist()
        _assert_table_matches_rows(index, path)


def test_numbers_out_of_step_with_the_chunks_are_refused_with_a_way_out(tmp_path):
    path = tmp_path / "index.sqlite"
    with Index.open(path) as index:
        _write(index, _chunks(6, 4))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM chunk_numbers WHERE id = (SELECT max(id) FROM chunks)")
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.close()
    with Index.open(path, readonly=True) as index:
        with pytest.raises(IndexCorrupt, match="out of step.*ai-index --force"):
            index.vector_table()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO chunk_numbers VALUES ((SELECT max(id) FROM chunks), 999, 999,"
                     " 999)")
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.close()
    with Index.open(path, readonly=True) as index:
        with pytest.raises(IndexCorrupt, match="does not hold.*ai-index --force"):
            index.vector_table()
