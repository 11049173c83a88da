"""The SQLite index: schema, vector table (B19c, B20), full-text search, one-transaction writes."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from varaverk.documents.chunks import Chunk
from varaverk.index.store.errors import IndexCorrupt, IndexMismatch, IndexMissing
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges
from varaverk.index.store.stored_chunk import StoredChunk
from varaverk.text import fts_query


def _chunk(path: str, title: str, text: str, section: str = "CONFIGURATION", line: int = 1,
           kind: str = "header") -> Chunk:
    return Chunk(path=path, kind=kind, section=section, title=title, start_line=line,
                 end_line=line + 1, text=text, context=f"{path} › {section} › {title}")


def _unit(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def _write(idx: Index, items, dim=3, backend="ollama", model="all-minilm", **kw) -> None:
    changes = IndexChanges(new_chunks=list(items), embedder=(backend, model, dim), **kw)
    paths = sorted({c.path for c, _ in items})
    changes.replace_chunks_of = paths
    changes.file_rows = [FileRow(p, "header", 1, 1, "x", "indexed", "",
                                 sum(1 for c, _ in items if c.path == p)) for p in paths]
    idx.write(changes)


@pytest.fixture
def idx(tmp_path):
    with Index.open(tmp_path / "data" / "index.sqlite") as index:
        yield index


def test_schema_wal_and_migrations(tmp_path, idx):
    conn = sqlite3.connect(idx.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT version, name FROM schema_migrations").fetchall() == [
        (1, "initial"), (2, "sources and keywords"), (3, "ctime, inode and device"),
        (4, "stored labels"), (5, "summaries"), (6, "numbered row strings")]
    assert idx.meta()["schema_version"] == "6"
    conn.close()
    with Index.open(idx.path) as again:  # reopening applies nothing twice
        assert again.meta()["schema_version"] == "6"


def test_an_older_schema_is_refused_read_only_and_migrated_by_the_next_writer(tmp_path, idx):
    _write(idx, [(_chunk("a.md", "Alpha", "alpha text"), _unit([1, 2, 2]))])
    ids = [c.id for c in idx.chunks_for_path("a.md")]
    idx.close()
    conn = sqlite3.connect(idx.path)
    with conn:   # what schema 5 held
        for statement in ("DROP TRIGGER numbers_ai", "DROP TRIGGER numbers_ad",
                          "DROP TRIGGER numbers_au", "DROP TABLE chunk_numbers",
                          "DROP TABLE row_strings",
                          "DELETE FROM schema_migrations WHERE version = 6"):
            conn.execute(statement)
    conn.close()
    with pytest.raises(IndexCorrupt, match="schema version 5 .* reads version 6 — run ai-index"):
        Index.open(idx.path, readonly=True)
    Index.open(idx.path).close()     # the next writer (ai-index) migrates in place
    with Index.open(idx.path, readonly=True) as again:
        assert again.meta()["schema_version"] == "6"
        assert [c.id for c in again.chunks_for_path("a.md")] == ids
        assert again.vector_table().paths.tolist() == ["a.md"]


def test_readonly_open_of_missing_index_raises(tmp_path):
    with pytest.raises(IndexMissing, match="run ai-index"):
        Index.open(tmp_path / "nothing.sqlite", readonly=True)
    assert not (tmp_path / "nothing.sqlite").exists()


def test_vectors_round_trip_little_endian_and_contiguous(idx):
    a, b = _unit([1, 2, 2]), _unit([0, 1, 0])
    _write(idx, [(_chunk("a.sh", "A", "alpha"), a), (_chunk("b.sh", "B", "beta"), b)])
    blob = sqlite3.connect(idx.path).execute("SELECT vec FROM chunks ORDER BY id").fetchone()[0]
    assert blob == a.astype("<f4").tobytes() and len(blob) == 12
    table = idx.vector_table()
    assert table.matrix.dtype == np.float32 and table.matrix.flags.c_contiguous
    assert table.matrix.shape == (2, 3) and table.dimension == 3
    np.testing.assert_allclose(table.matrix[0], a)
    assert list(table.kinds) == ["header", "header"]
    assert list(table.sections) == ["CONFIGURATION", "CONFIGURATION"]
    chunks = idx.get_chunks([int(table.ids[1]), int(table.ids[0]), 999])
    assert [c.title for c in chunks] == ["B", "A"]
    assert isinstance(chunks[0], StoredChunk) and chunks[0].id == int(table.ids[1])
    assert chunks[1].citation == "a.sh › CONFIGURATION › A"


def test_a_read_chunk_is_the_chunk_its_constructor_makes(idx):
    from dataclasses import asdict, fields
    chunk = Chunk(path="a.sh", kind="template", section="CONFIGURATION", title="A",
                  start_line=3, end_line=9, text="alpha", context="a.sh › A", part=2,
                  meta={"block": 3, "aliases": ["x"]}, source="vault")
    _write(idx, [(chunk, _unit([1, 2, 2]))])
    [read] = idx.chunks_for_path("a.sh")
    made = StoredChunk(**asdict(chunk), id=read.id)
    assert read == made and asdict(read) == asdict(made) and read.meta == made.meta
    assert list(vars(read)) == [f.name for f in fields(StoredChunk)] == list(vars(made))
    assert idx.get_chunks([read.id]) == [made] and hash(read) == hash(made)
    with pytest.raises(AttributeError):
        read.text = "changed"  # still frozen


def test_a_stored_chunk_pickles_as_itself(idx):
    import pickle
    chunk = Chunk(path="a.sh", kind="template", section="S", title="A", start_line=1,
                  end_line=2, text="alpha", context="a.sh › A", meta={"keywords": ["k"]})
    _write(idx, [(chunk, _unit([1, 2, 2]))])
    [read] = idx.chunks_for_path("a.sh")
    back = pickle.loads(pickle.dumps(read))
    assert type(back) is StoredChunk and back == read and back.id == read.id
    assert back.meta == read.meta == {"keywords": ["k"]}


def test_vector_table_is_cached_until_the_index_changes(idx):
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0]))])
    first = idx.vector_table()
    assert idx.vector_table() is first
    _write(idx, [(_chunk("b.sh", "B", "beta"), _unit([0, 1, 0]))])
    second = idx.vector_table()
    assert second is not first and second.matrix.shape == (2, 3)


def test_cache_sees_a_write_by_another_connection(idx):
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0]))])
    reader = Index.open(idx.path, readonly=True)
    assert reader.vector_table().matrix.shape == (1, 3)
    _write(idx, [(_chunk("b.sh", "B", "beta"), _unit([0, 1, 0]))])
    assert reader.vector_table().matrix.shape == (2, 3)
    reader.close()


def test_b19c_zero_and_nan_rows_are_excluded(tmp_path):
    path = tmp_path / "index.sqlite"
    with Index.open(path) as idx:
        _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0] + [0] * 765)),
                     (_chunk("b.sh", "B", "beta"), _unit([0, 1, 0] + [0] * 765))], dim=768)
    conn = sqlite3.connect(path)
    # Rows as a broken writer would have left them: 3072 zero bytes, a NaN, a short BLOB.
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text,"
                 " context, vec) VALUES ('z.sh','header','','Z',1,1,'zero','z', ?)", (b"\0" * 3072,))
    nan = np.zeros(768, dtype="<f4")
    nan[0] = np.nan
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text,"
                 " context, vec) VALUES ('n.sh','header','','N',1,1,'nan','n', ?)", (nan.tobytes(),))
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text,"
                 " context, vec) VALUES ('s.sh','header','','S',1,1,'short','s', ?)", (b"\0" * 1536,))
    conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    conn.commit()
    conn.close()
    with Index.open(path, readonly=True) as idx:
        table = idx.vector_table()
        assert table.matrix.shape == (2, 768)
        assert len(table.excluded) == 3
        query = _unit([1, 0.5, 0] + [0] * 765)
        scores = table.matrix @ query
        assert np.isfinite(scores).all()
        ranked = [c.title for c in idx.get_chunks(table.ids[np.argsort(-scores)])]
        assert ranked == ["A", "B"]


def test_vector_validity_is_one_rule_on_write_and_on_read(idx):
    """A vector the read side would leave out is never written: the whole write is refused."""
    from varaverk.index.store.vectors import usable_rows, vector_problem

    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0]))])
    before = idx.meta()["generation"]
    for bad in (np.zeros(3), np.array([np.nan, 1, 0]), np.array([1e-8, 0, 0]),
                np.array([np.inf, 0, 0])):
        assert not usable_rows(bad[None, :].astype(np.float32))[0]
        assert vector_problem(bad)
        with pytest.raises(ValueError, match="never stored; nothing was written"):
            _write(idx, [(_chunk("b.sh", "B", "beta"), _unit([0, 1, 0])),
                         (_chunk("c.sh", "C", "gamma"), bad.astype(np.float32))])
    assert idx.meta()["generation"] == before
    assert [c.title for c in idx.chunks_for_path("b.sh")] == []
    _write(idx, [(_chunk("d.sh", "D", "delta"), np.array([0, 3, 4], dtype=np.float32))])
    table = idx.vector_table()
    np.testing.assert_allclose(table.matrix[-1], [0, 0.6, 0.8], rtol=1e-6)  # stored unit-length
    assert usable_rows(table.matrix).all() and table.excluded == ()
    assert vector_problem([0, 3, 4]) == "" and vector_problem([0, 3, 4], 4) == \
        "3 dimensions, expected 4"
    assert vector_problem("abc") == "a vector that is not a list of numbers"
    assert vector_problem(np.zeros(3)) == "an all-zero vector"


def test_b20_check_compatible_message(idx):
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit(np.ones(384)))], dim=384)
    idx.check_compatible("ollama", "all-minilm", 384)
    with pytest.raises(IndexMismatch) as err:
        idx.check_compatible("ollama", "nomic-embed-text", 768)
    assert str(err.value) == ("index built with ollama/all-minilm (384 dims); this run uses "
                              "ollama/nomic-embed-text (768 dims) — run ai-index --force to rebuild")


def test_compatibility_is_decided_by_the_index_from_its_meta(idx):
    """One home: the stored provenance against an embedder, and the settings' recorded names."""
    from varaverk.index.store.compatibility import check_compatible, names_other_embedder

    check_compatible(idx.meta(), "ollama", "other")  # no vectors yet: compatible with anything
    assert not names_other_embedder(idx.meta(), "ollama", "other")
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0]))], configured=("ollama", ""))
    meta = idx.meta()
    assert (meta["config_backend"], meta["config_model"]) == ("ollama", "")
    assert not names_other_embedder(meta, "ollama", "")
    assert names_other_embedder(meta, "ollama", "all-minilm")  # same model, named differently
    assert names_other_embedder(meta, "local", "")
    check_compatible(meta, "ollama", "all-minilm", 3)
    with pytest.raises(IndexMismatch) as err:
        check_compatible(meta, "ollama", "all-minilm", 4)
    assert str(err.value) == ("index built with ollama/all-minilm (3 dims); this run uses "
                              "ollama/all-minilm (4 dims) — run ai-index --force to rebuild")
    _write(idx, [(_chunk("b.sh", "B", "beta"), _unit([0, 1, 0]))])  # configured=None keeps them
    assert idx.meta()["config_model"] == ""


def test_b20_write_refuses_another_model_without_replace_all(idx):
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit(np.ones(384)))], dim=384)
    before = idx.meta()["generation"]
    with pytest.raises(IndexMismatch, match="all-minilm \\(384 dims\\)"):
        _write(idx, [(_chunk("b.sh", "B", "beta"), _unit(np.ones(768)))], dim=768,
               model="nomic-embed-text")
    assert idx.meta()["generation"] == before  # nothing written
    _write(idx, [(_chunk("b.sh", "B", "beta"), _unit(np.ones(768)))], dim=768,
           model="nomic-embed-text", replace_all=True)
    lengths = sqlite3.connect(idx.path).execute("SELECT DISTINCT length(vec) FROM chunks").fetchall()
    assert lengths == [(3072,)]
    assert idx.meta()["embed_model"] == "nomic-embed-text" and idx.meta()["embed_dimension"] == "768"


def test_failed_write_leaves_the_index_unchanged(idx):
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0]))])

    class Boom(np.ndarray):
        def astype(self, *a, **k):
            raise KeyboardInterrupt

    bad = np.asarray(_unit([0, 1, 0])).view(Boom)
    with pytest.raises(KeyboardInterrupt):
        _write(idx, [(_chunk("a.sh", "A2", "changed"), _unit([0, 0, 1])),
                     (_chunk("b.sh", "B", "beta"), bad)])
    assert [c.title for c in idx.chunks_for_path("a.sh")] == ["A"]
    assert idx.chunks_for_path("b.sh") == []


def test_fts_matches_identifiers_and_options_as_words(idx):
    items = [
        (_chunk("Tools/mover_stop.sh", "MOVER_STOP_TIMEOUT",
                "Seconds to wait for the mover to finish before killing it (default: 300)"),
         _unit([1, 0, 0])),
        (_chunk("Tools/mover_stop.sh", "MOVER_STOP_RETRIES", "How often the stop is retried"),
         _unit([0, 1, 0])),
        (_chunk("Backup/rsync_mirror.sh", "Delete Ratio Ceiling",
                "If the dry run reports deletions above the percentage, the share is skipped. "
                "--force-delete lifts this ceiling for one run.", section="OPERATIONAL SAFEGUARDS"),
         _unit([0, 0, 1])),
        (_chunk("Backup/other.sh", "Force", "Use force to delete nothing; delete is separate.",
                section="RUNTIME MODES"), _unit([1, 1, 0])),
    ]
    _write(idx, items)
    by_id = {c.id: c.title for c in idx.get_chunks(range(1, 10))}
    hits = idx.fts_search("MOVER_STOP_TIMEOUT", 10)
    assert [by_id[i] for i, _ in hits] == ["MOVER_STOP_TIMEOUT"]  # not the other MOVER_STOP_* key
    hits = idx.fts_search("what does --force-delete do?", 10)
    assert by_id[hits[0][0]] == "Delete Ratio Ceiling"
    assert all(score > 0 for _, score in hits)  # higher is better
    assert hits == sorted(hits, key=lambda h: -h[1])
    assert idx.fts_search("force-delete", 10)[0][0] == hits[0][0]


def _fts_segments(idx: Index) -> int:
    return idx._conn.execute("SELECT count(DISTINCT segid) FROM chunks_fts_idx").fetchone()[0]


def _three_writes(idx: Index) -> None:
    _write(idx, [(_chunk("a.sh", "A", "alpha mover rsync"), _unit([1, 0, 0])),
                 (_chunk("b.sh", "B", "beta mover"), _unit([0, 1, 0]))])
    _write(idx, [(_chunk("a.sh", "A", "alpha again rsync rsync"), _unit([1, 0, 0]))])
    idx.write(IndexChanges(delete_paths=["b.sh"]))


def test_a_write_merges_a_small_full_text_index_into_one_segment(idx):
    _three_writes(idx)
    assert _fts_segments(idx) == 1
    (a,) = idx.chunks_for_path("a.sh")
    assert idx.fts_search("mover", 10) == []     # b.sh's chunk is gone, a.sh's changed
    assert [i for i, _ in idx.fts_search("rsync alpha", 10)] == [a.id]


def test_a_large_full_text_index_keeps_fts5s_own_merging(idx, monkeypatch):
    from varaverk.index.store import fts

    monkeypatch.setattr(fts, "MAX_MERGED_FTS_PAGES", 0)
    _three_writes(idx)
    assert _fts_segments(idx) > 1
    (a,) = idx.chunks_for_path("a.sh")
    assert idx.fts_search("mover", 10) == []
    assert [i for i, _ in idx.fts_search("rsync alpha", 10)] == [a.id]


@pytest.mark.parametrize("query", ['"unbalanced', "a AND OR NOT", "NEAR(x y", "col:value", "*",
                                   "^start", "(((", "'; DROP TABLE chunks; --", ""])
def test_fts_query_is_safe_for_any_text(idx, query):
    _write(idx, [(_chunk("a.sh", "A", "alpha value start"), _unit([1, 0, 0]))])
    assert isinstance(idx.fts_search(query, 5), list)
    assert idx.vector_table().matrix.shape == (1, 3)


def test_fts_query_drops_question_words_but_keeps_content():
    assert fts_query("What is the MOVER_STOP_TIMEOUT?") == '"MOVER_STOP_TIMEOUT"'
    assert fts_query('say "hi"') == '"say" OR "hi"'
    assert fts_query("what is it") == '"what" OR "is" OR "it"'  # nothing left: keep all
    assert fts_query("   ") == ""


def test_status_counts_and_skips(idx):
    _write(idx, [(_chunk("a.sh", "A", "alpha"), _unit([1, 0, 0])),
                 (_chunk("a.sh", "A2", "alpha 2"), _unit([0, 1, 0]))])
    idx.write(IndexChanges(file_rows=[FileRow("logo.png", "", -1, -1, "", "skipped",
                                              "not a documentation kind")]))
    info = idx.status()
    assert info["files"] == {"indexed": 1, "skipped": 1} and info["tracked"] == 2
    assert info["chunks_by_kind"] == {"header": 2} and info["chunks"] == 2
    assert info["skipped"] == [{"path": "logo.png", "kind": "", "reason": "not a documentation kind"}]
    assert info["meta"]["embed_dimension"] == "3" and info["size_bytes"] > 0


def test_another_files_migrations_never_run_the_index_backfills(tmp_path):
    """apply_migrations is shared (memory uses it): a file whose own migration 4 is not the
    index's must not get the index's label backfill run on it (it has no chunks table)."""
    import sqlite3

    from varaverk.index.store.schema import apply_migrations
    steps = [(1, "initial", "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"),
             (2, "two", "CREATE TABLE a (x);"), (3, "three", "CREATE TABLE b (x);"),
             (4, "four", "CREATE TABLE c (x);")]
    conn = sqlite3.connect(tmp_path / "other.db")
    with conn:
        apply_migrations(conn, steps, "other", "move it away")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"a", "b", "c", "meta", "schema_migrations"} <= tables
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("4",)
