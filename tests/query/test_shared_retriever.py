"""One Retriever shared between threads, as the dock's workers share it: what one thread puts
in or takes out of the per-table caches never gives another thread a wrong answer.

Each test makes one interleaving happen for certain: a real second thread runs, and is
joined, at the point where the first one could be switched out (the hook says where)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from varaverk.documents.chunks import Chunk
from varaverk.config import Settings
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges


def _write(index: Index, paths: list[str]) -> None:
    """Two chunks in each of ``paths`` (a new index generation)."""
    items = []
    for n, path in enumerate(paths):
        for line in (1, 5):
            vec = np.zeros(3, dtype=np.float32)
            vec[(n + line) % 3] = 1.0
            items.append((Chunk(path=path, kind="doc", section="NOTES", title=f"{path} {line}",
                                start_line=line, end_line=line + 3,
                                text=f"rsync mover note {line} of {path}",
                                context=f"{path} › NOTES"), vec))
    index.write(IndexChanges(
        new_chunks=items, embedder=("test", "m", 3), replace_chunks_of=paths,
        file_rows=[FileRow(p, "doc", 1, 1, "x", "indexed", "", 2) for p in paths]))


@pytest.fixture
def index(tmp_path):
    with Index.open(tmp_path / "index.sqlite") as opened:
        _write(opened, ["a.md", "b.md"])
        yield opened


def _in_another_thread(work) -> None:
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def _file_numbers_match_the_table(cache) -> None:
    """``cache.file_of`` numbers the files of ``cache``'s own table, row by row."""
    paths = [str(p) for p in np.asarray(cache.table.paths).tolist()]
    numbers: dict[str, int] = {}
    assert cache.file_of.size == cache.ids.size == len(paths)
    assert cache.file_of.tolist() == [numbers.setdefault(p, len(numbers)) for p in paths]


def test_a_table_cache_is_whole_when_another_thread_replaces_it(index, monkeypatch):
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    retriever = Retriever(Settings(), index, options=RetrieverOptions(mode="lexical"))
    old = index.vector_table()
    _write(index, ["c.md"])         # a re-index commits while a query is starting

    class Paths(list):
        """The old table's paths; while the first thread reads them, a second thread asks
        for the table and gets the new generation's."""

        fired = False

        def __len__(self) -> int:
            if not Paths.fired:
                Paths.fired = True
                _in_another_thread(retriever._table)
            return super().__len__()

    current = index.vector_table
    tables = iter([old._replace(paths=Paths(np.asarray(old.paths).tolist()))])
    monkeypatch.setattr(index, "vector_table", lambda: next(tables, None) or current())
    first = retriever._table()
    assert Paths.fired
    _file_numbers_match_the_table(first)
    _file_numbers_match_the_table(retriever._cache)
    _file_numbers_match_the_table(retriever._table())
    assert retriever._table().table is current()


def test_chunks_evicted_by_another_thread_mid_look_up_are_read_again(index, monkeypatch):
    import varaverk.retrieval.caches as caches
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    monkeypatch.setattr(caches, "CHUNK_CACHE", 2)
    retriever = Retriever(Settings(), index, options=RetrieverOptions(mode="lexical"))
    cache = retriever._table()
    ids = cache.ids.tolist()
    assert len(ids) == 4
    cache.read_chunks(ids[:2])     # the cache is full

    class Evicting(dict):
        """The kept chunks; right after the first look-up finds one, a second thread reads
        two others, which empties the full cache first."""

        fired = False

        def _found(self, found: bool) -> None:
            if found and not Evicting.fired:
                Evicting.fired = True
                _in_another_thread(lambda: cache.read_chunks(ids[2:]))

        def __contains__(self, key) -> bool:
            found = super().__contains__(key)
            self._found(found)
            return found

        def get(self, key, default=None):
            found = super().get(key, default)
            self._found(found is not default)
            return found

    cache.chunks = Evicting(cache.chunks)
    got = cache.read_chunks(ids[:2])
    assert Evicting.fired
    assert {cid: c.text for cid, c in got.items()} == {
        c.id: c.text for c in index.get_chunks(ids[:2])}
