"""What a retriever keeps of one index generation: ``TableCache``.

The index hands out its vector table (``Index.vector_table``) as one object per generation,
cached until a re-index commits. Everything ranking derives from that table is worked out once
and kept beside it: the per-row arrays and lists ranking reads, the in-process BM25 over
FTS5's postings (``lexical.Bm25``), the label field (``lexical.LabelBm25``), the index's
vocabulary (the coverage rule), and bounded caches of what queries read from the index
(chunks by id, each file's chunks and ``windows.places``, lower-cased texts, row labels,
inflected word forms). A new generation gets a new ``TableCache``; the old one is dropped
whole, so no cache ever mixes two generations.

The dock shares one retriever between threads: a ``TableCache`` is published whole, its lazy
parts are built by one thread under its lock, and its bounded caches are read with one look-up
per key, so another thread emptying one meanwhile costs a recomputation, never a wrong answer.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Iterator, NamedTuple, Sequence

import numpy as np

from varaverk.retrieval import windows
from varaverk.index.store.labels import label_text
from varaverk.retrieval.lexical import Bm25, LabelBm25, StoredLabelBm25

log = logging.getLogger(__name__)

FILE_CACHE = 256            # files whose chunks a retriever keeps for small-to-big
CHUNK_CACHE = 4096          # chunks a retriever keeps by id (the leading results of queries)
WORD_FORMS_CACHE = 20000    # query words whose inflected forms in the index a retriever keeps
QUESTION_CACHE = 4096       # question texts whose analysis (words, names) a retriever keeps
# Rows up to which a preloading (long-lived) retriever builds the label BM25 in memory from
# the table's labels, at a cost of a fraction of a second once: its queries then read no label
# statistics from the index. Larger tables, and every one-shot retriever, read them per token.
LABELS_IN_MEMORY = 20000

_MISSING = object()


def _upper(sections: Sequence[str], numbers: np.ndarray | None) -> np.ndarray:
    """str (n,): ``sections`` in upper case, each distinct one upper-cased once (with
    ``numbers``, the table's ``section_numbers``, without comparing strings). str.upper,
    never np.char.upper: that one keeps the array's width and cuts a name whose upper case
    is longer ("Straße" -> "STRASS" when it is the longest)."""
    distinct = getattr(sections, "distinct", None)     # a NumberedColumn's
    if distinct is None or numbers is None or len(numbers) != len(sections):
        distinct, numbers = np.unique(np.asarray(sections), return_inverse=True)
    return np.array([s.upper() for s in distinct.tolist()] or [""],
                    dtype=str)[numbers.reshape(-1)]


class Column(Sequence[str]):
    """One str array of the vector table as a sequence of Python strs, each made when read:
    ranking reads a few rows per query, and a Python str per row would cost the first
    question time and every row memory."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, row):
        return str(self.values[row])


class IndexVocabulary:
    """The tokens of an index's FTS5 index as a container, each looked up on first use and
    kept (up to ``WORD_FORMS_CACHE``); false when the index holds no token. Raises what
    ``Index.fts_holds`` raises when made (an SQLite without fts5vocab)."""

    def __init__(self, index) -> None:
        self.index = index
        self._any = bool(index.fts_holds())
        self._held: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return self._any

    def __contains__(self, token: object) -> bool:
        if not isinstance(token, str) or not self._any:
            return False
        return kept(self._held, token, lambda: bool(self.index.fts_holds([token])),
                    WORD_FORMS_CACHE)


def kept(store: dict, key: Any, make: Callable[[], Any], limit: int) -> Any:
    """``store[key]``, made with ``make()`` and kept the first time: the bounded caches of one
    index generation (the store is emptied when it holds ``limit`` entries). One look-up, so
    another thread emptying the store meanwhile costs a recomputation, never a KeyError."""
    found = store.get(key, _MISSING)
    if found is _MISSING:
        if len(store) >= limit:
            store.clear()
        found = store[key] = make()
    return found


class RowLabel(NamedTuple):
    """What ranking needs of a chunk before its text is read (from the vector table)."""

    id: int
    kind: str
    title: str


@dataclass
class TableCache:
    """One index generation's vector table and what ranking derives from it (module docstring).

    ``index`` is the open ``varaverk.index.store.index.Index`` the table came from;
    ``preload``: read all of the generation's postings at once (``Bm25``'s ``preload``).
    """

    index: Any
    table: Any
    sections_upper: np.ndarray      # str (n,): ``sections`` as an array (whole-table masks)
    ids: np.ndarray                 # int64 (n,), ascending (the table is in id order)
    kinds: Column                   # per row, each a Python str when read (the ranking loop)
    sections: Column                # upper case
    titles: Sequence[str]           # the table's ``RowTitles`` (each read when first asked for)
    # int64 (n,) per row: its file's number (empty when the table has no paths)
    file_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    preload: bool = False
    files: dict[str, list] = field(default_factory=dict)   # path -> its chunks (small-to-big)
    # (boosted section, routing kinds) -> bool (n + 1,): the rows section routing boosts, and
    # False for row -1
    routed: dict[tuple, np.ndarray] = field(default_factory=dict)
    chunks: dict[int, Any] = field(default_factory=dict)   # id -> stored chunk, read before
    # path -> windows.places of its chunks (small-to-big of the result list)
    places: dict[str, dict] = field(default_factory=dict)
    # query word -> its forms in the vocabulary (``coverage.word_forms``)
    word_forms: dict[str, Any] = field(default_factory=dict)
    # vector-table row -> its RowLabel, made on first use (the same for every query)
    row_labels: dict[int, RowLabel] = field(default_factory=dict)
    # chunk id -> its text lower-cased (exact-name boosts), for chunks read before
    lowered: dict[int, str] = field(default_factory=dict)
    # question text -> its ``question.Words`` (the dock is asked the same words again and again)
    questions: dict[str, Any] = field(default_factory=dict)
    # Built lazily, once, by one thread (``_lock``): the first query after a re-index may come
    # from several at once.
    _bm25: Bm25 | None | bool = field(default=None, init=False, repr=False)
    _labels: LabelBm25 | None = field(default=None, init=False, repr=False)
    _vocabulary: Container[str] | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def of(cls, index, table, preload: bool = False) -> TableCache:
        """The per-table arrays of a vector table (``store.VectorTable``), computed in full."""
        ids = np.asarray(table.ids, dtype=np.int64)
        file_of = np.zeros(0, dtype=np.int64)
        paths = table.paths
        if paths is not None and len(paths) == len(ids):
            file_of = table.path_numbers
            if file_of is None or len(file_of) != len(ids):
                numbers: dict[str, int] = {}
                file_of = np.fromiter(
                    (numbers.setdefault(str(p), len(numbers)) for p in np.asarray(paths).tolist()),
                    dtype=np.int64, count=len(ids))
        sections_upper = _upper(table.sections, table.section_numbers)
        return cls(
            index=index,
            table=table,
            sections_upper=sections_upper,
            ids=ids,
            kinds=Column(np.asarray(table.kinds)),
            sections=Column(sections_upper),
            titles=table.titles if table.titles is not None else Column(np.zeros(0, dtype=str)),
            file_of=file_of,
            preload=preload,
        )

    def preload_chunks(self) -> None:
        """Read every chunk of the index at once, with each file's ``windows.places``, when
        all of them fit the caches (``CHUNK_CACHE`` chunks, ``FILE_CACHE`` files): a
        preloading retriever then reads no chunk row per query."""
        if not 0 < self.ids.size <= CHUNK_CACHE:
            return
        chunks = self.index.all_chunks()
        files: dict[str, list] = {}
        for c in chunks:
            files.setdefault(c.path, []).append(c)
        if len(chunks) > CHUNK_CACHE or len(files) > FILE_CACHE:
            return
        self.files.update(files)
        self.chunks.update((c.id, c) for c in chunks)
        self.places.update((path, windows.places(of_file)) for path, of_file in files.items())

    # -- lexical indexes of this generation ---------------------------------------------------

    def bm25(self) -> Bm25 | None:
        """The in-process BM25 of this generation (None if FTS5's tables cannot be read that
        way; then every lexical query goes to ``Index.fts_search``)."""
        if self._bm25 is None:
            with self._lock:
                if self._bm25 is None:
                    try:
                        self._bm25 = Bm25(self.index, preload=self.preload)
                    except Exception as exc:  # e.g. an SQLite without fts5vocab
                        log.warning("in-process BM25 unavailable (%s); using FTS5 queries", exc)
                        self._bm25 = False
        return self._bm25 or None

    def labels(self) -> LabelBm25 | None:
        """The label field (file name, section, title of every row) as BM25: from the
        statistics the index stored at write time (``StoredLabelBm25``), or built from the
        table's labels by a preloading retriever of a small table (``LABELS_IN_MEMORY``) and
        when the index cannot give them; None when the table has no paths or titles."""
        if self._labels is None and self.file_of.size and len(self.titles) == len(self.ids):
            with self._lock:
                if self._labels is None:
                    in_memory = self.preload and self.ids.size <= LABELS_IN_MEMORY
                    self._labels = (None if in_memory else self._stored_labels()) or LabelBm25([
                        label_text(p, sec, title) for p, sec, title in zip(
                            np.asarray(self.table.paths).tolist(),
                            np.asarray(self.table.sections).tolist(), self.titles)])
        return self._labels

    def _stored_labels(self) -> StoredLabelBm25 | None:
        """``StoredLabelBm25`` of this table; None (logged) when the index cannot give it."""
        try:
            return StoredLabelBm25(self.index, self.ids)
        except Exception as exc:  # e.g. a label missing: never rank without one
            log.warning("stored label statistics unavailable (%s); building them from the "
                        "vector table", exc)
            return None

    def vocabulary(self) -> Container[str]:
        """The tokens of this generation's FTS5 index, as a container (empty when FTS5 cannot
        list them: then the coverage rule looks up no words). A preloaded ``Bm25`` already
        holds them all; otherwise each token is looked up in the index when first asked
        about (``IndexVocabulary``): reading every token costs the first question more than
        its few look-ups."""
        if self._vocabulary is None:
            bm25 = self.bm25()
            preloaded = bm25.vocabulary if bm25 is not None else None
            with self._lock:
                if self._vocabulary is None:
                    try:
                        self._vocabulary = (IndexVocabulary(self.index) if preloaded is None
                                            else preloaded)
                    except Exception as exc:  # e.g. an SQLite without fts5vocab
                        log.warning("index vocabulary unavailable (%s); coverage uses the "
                                    "dense margin alone", exc)
                        self._vocabulary = frozenset()
        return self._vocabulary

    # -- chunks read from the index -----------------------------------------------------------

    def read_chunks(self, ids: list[int]) -> dict[int, Any]:
        """{id: stored chunk} of those ids that exist; chunks read once are kept (up to
        ``CHUNK_CACHE``) and not read again."""
        if not ids:
            return {}
        known = self.chunks
        # One look-up a chunk: another thread may empty the cache between two of them.
        found = {cid: c for cid in ids if (c := known.get(cid)) is not None}
        missing = [cid for cid in ids if cid not in found]
        if missing:
            if len(known) + len(missing) > CHUNK_CACHE:
                known.clear()
            for c in self.index.get_chunks(missing):
                found[c.id] = known[c.id] = c
        return found

    def file_chunks(self, path: str) -> list[Any]:
        """Every chunk of one file in document order, kept (up to ``FILE_CACHE`` files), since
        small-to-big reads the same long pages again and again."""
        return kept(self.files, path, lambda: self.index.chunks_for_path(path), FILE_CACHE)

    def places_of(self, path: str) -> dict[int, windows.Place]:
        """``windows.places`` of one file's chunks, kept (up to ``FILE_CACHE`` files): where
        each chunk sits among its siblings is the same for every query of a generation."""
        return kept(self.places, path, lambda: windows.places(self.file_chunks(path)),
                    FILE_CACHE)

    def lowered_text(self, chunk) -> str:
        """A read chunk's text lower-cased, kept (up to ``CHUNK_CACHE``): the exact-name
        boosts look for names in the same leading chunks query after query."""
        return kept(self.lowered, chunk.id, chunk.text.lower, CHUNK_CACHE)

    def read_in_turn(self, hits: list, first: int) -> Iterator:
        """``hits`` in order, each with its stored chunk in place of a ``RowLabel``: read
        ``first`` at a time, then as many again as were read before (merging that consumed
        hits asks for more), so a caller that stops early reads no more; a hit whose chunk
        vanished since the vector table was read is left out."""
        start, stop = 0, max(1, first)
        while start < len(hits):
            batch = hits[start:stop]
            missing = [h.chunk.id for h in batch if isinstance(h.chunk, RowLabel)]
            found = self.read_chunks(missing) if missing else {}
            for h in batch:
                if isinstance(h.chunk, RowLabel):
                    h.chunk = found.get(h.chunk.id, h.chunk)
                    if isinstance(h.chunk, RowLabel):
                        continue
                yield h
            start, stop = stop, stop * 2

