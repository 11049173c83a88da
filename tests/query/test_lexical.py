"""In-process BM25 (varaverk.retrieval.lexical) gives exactly FTS5's bm25() on a real SQLite index."""

from __future__ import annotations

import numpy as np
import pytest

from varaverk.documents.chunks import Chunk
from varaverk.retrieval.lexical import Bm25
from varaverk.text import fts_terms, fts_tokens
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges

TEXTS = [
    ("Backup/rsync_mirror.sh", "MOVER_STOP_TIMEOUT", "How long to wait for the mover to stop "
     "before rsync starts. Default 300 seconds. The mover and rsync never run at once."),
    ("Backup/rsync_mirror.sh", "--force-delete", "Pass --force-delete to remove files on the "
     "mirror that vanished from the source; force and delete are both needed."),
    ("Docs/Manual-Auth.md", "Sessions", "auth.session_length sets how long a session lasts; "
     "the session cookie is renewed on use. Session session session."),
    ("Docs/Manual-Long.md", "Reference", " ".join(f"word{i % 37} rsync" for i in range(200))),
    ("Docs/Manual-Cafe.md", "Café", "The café box runs the mover delete job nightly."),
]

QUERIES = ["MOVER_STOP_TIMEOUT", "what stops rsync and the mover", "--force-delete",
           "force delete", "auth.session_length", "session", "word3 word36 rsync",
           "delete mover nightly", "nothing-here-at-all", "rsync rsync RSYNC"]


@pytest.fixture(scope="module")
def idx(tmp_path_factory):
    path = tmp_path_factory.mktemp("lexical") / "index.sqlite"
    rng = np.random.default_rng(0)
    changes = IndexChanges(embedder=("test", "m", 4))
    for i, (p, title, text) in enumerate(TEXTS):
        v = rng.standard_normal(4).astype(np.float32)
        changes.new_chunks.append((Chunk(path=p, kind="manual", section="S", title=title,
                                         start_line=i + 1, end_line=i + 1, text=text,
                                         context=f"{p} › {title}"), v / np.linalg.norm(v)))
    for p in sorted({t[0] for t in TEXTS}):
        changes.file_rows.append(FileRow(path=p, kind="manual", size=1, mtime_ns=1, sha256="0",
                                         status="indexed"))
    with Index.open(path) as w:
        w.write(changes)
    index = Index.open(path, readonly=True)
    yield index
    index.close()


def test_tokens_split_like_unicode61():
    assert fts_tokens("--force-delete") == ["force", "delete"]
    assert fts_tokens("MOVER_STOP_TIMEOUT") == ["mover_stop_timeout"]
    assert fts_tokens("auth.session_length") == ["auth", "session_length"]
    assert fts_tokens("café") is None  # only FTS5 folds non-ASCII


def test_doc_lengths_decode_multibyte_varints(idx):
    ids, lengths = idx.fts_doc_lengths()
    assert len(ids) == len(TEXTS)
    # The long chunk: 400 tokens of text plus its context trail (docs manual long md
    # reference: 5 tokens), over 127 so its varint takes two bytes.
    assert lengths[3] == 400 + 5


@pytest.mark.parametrize("preload", [False, True])
@pytest.mark.parametrize("query", QUERIES)
def test_scores_equal_fts5_bm25(idx, query, preload):
    bm25 = Bm25(idx, preload=preload)
    expected = idx.fts_search(query, 100)
    rows, scores = bm25.score(fts_terms(query))
    order = np.lexsort((rows, -scores))
    got = [(int(rows[i]), float(scores[i])) for i in order]
    assert got == expected


def test_contains_and_non_ascii_fallback(idx):
    bm25 = Bm25(idx)
    assert bm25.contains("rsync") is True
    assert bm25.contains("auth.session_length") is True
    assert bm25.contains("session_length.auth") is False  # a phrase, in order
    assert bm25.contains("Kubernetes") is False
    assert bm25.contains("café") is None
    assert bm25.score(["café", "box"]) is None


def test_retriever_lexical_same_with_and_without_fts5_match(idx):
    from varaverk.config import Settings
    from varaverk.retrieval.candidates import _lexical_fts, lexical_scored
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.question import Filters
    from varaverk.retrieval.search import Retriever

    r = Retriever(Settings(), idx, options=RetrieverOptions(mode="lexical"))
    cache = r._table()
    assert Filters.of(cache, None, None, None).mask is None   # no filter: every row may rank
    mask = np.ones(cache.ids.size, dtype=bool)

    def lexical(query, limit, mask=mask):  # [(chunk id, BM25)] best first, as _lexical_fts
        ids, scores = lexical_scored(query, limit, cache, mask)
        return list(zip(ids.tolist(), scores.tolist()))

    for query in QUERIES + ["the café box"]:
        assert lexical(query, 3) == _lexical_fts(query, 3, cache, mask)
        assert lexical(query, 3, None) == _lexical_fts(query, 3, cache, None) == \
            lexical(query, 3)
    mask[0] = False  # a filtered-out row never comes back
    assert all(cid != int(cache.ids[0]) for cid, _ in lexical("MOVER_STOP_TIMEOUT rsync", 5))


@pytest.mark.parametrize("select_from", [1, 10**6])
def test_the_lexical_pool_is_the_same_whether_or_not_it_is_selected_first(
        idx, monkeypatch, select_from):
    # the selection among the scores at or above the limit-th best (ties kept) only saves
    # sorting every score: the pool, its order and ties are those of a full sort either way
    from varaverk.config import Settings
    from varaverk.retrieval import candidates
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    monkeypatch.setattr(candidates, "SELECT_FROM", select_from)
    cache = Retriever(Settings(), idx, options=RetrieverOptions(mode="lexical"))._table()
    for query in QUERIES:
        for limit in (1, 2, 3):
            ids, scores = candidates.lexical_scored(query, limit, cache, None)
            assert list(zip(ids.tolist(), scores.tolist())) == candidates._lexical_fts(
                query, limit, cache, None)


def test_scores_stay_equal_when_the_cache_restarts(idx, monkeypatch):
    import varaverk.retrieval.lexical as lexical
    monkeypatch.setattr(lexical, "MAX_CACHED_VALUES", 5)  # restarts on almost every read
    bm25 = Bm25(idx)
    for query in QUERIES:
        rows, scores = bm25.score(fts_terms(query))
        order = np.lexsort((rows, -scores))
        assert [(int(rows[i]), float(scores[i])) for i in order] == idx.fts_search(query, 100)


def test_preloaded_postings_are_read_once_and_phrases_still_find_their_positions(
        idx, monkeypatch):
    bm25 = Bm25(idx, preload=True)
    assert bm25.vocabulary == idx.fts_vocabulary()
    reads = []
    real = idx.fts_postings
    monkeypatch.setattr(idx, "fts_postings", lambda token, positions=False: (
        reads.append((token, positions)) or real(token, positions)))
    for query in QUERIES:
        rows, scores = bm25.score(fts_terms(query))
        order = np.lexsort((rows, -scores))
        assert [(int(rows[i]), float(scores[i])) for i in order] == idx.fts_search(query, 100)
    # only phrases ("--force-delete", "auth.session_length", "nothing-here-at-all": its
    # first token is in no row, so no other is read) read postings, for their positions
    assert sorted(reads) == [("auth", True), ("delete", True), ("force", True),
                             ("nothing", True), ("session_length", True)]


def test_an_index_over_the_token_budget_is_read_word_by_word(idx, monkeypatch):
    import varaverk.retrieval.lexical as lexical
    monkeypatch.setattr(lexical, "MAX_PRELOADED_TOKENS", 10)
    bm25 = Bm25(idx, preload=True)
    assert bm25.vocabulary is None
    assert bm25.contains("rsync") is True and not bm25.contains("Kubernetes")


def test_all_postings_at_once_equal_the_postings_token_by_token(idx):
    toks, sizes, ids = idx.fts_all_postings()
    assert len(toks) == len(sizes) == len(idx.fts_vocabulary()) and ids.dtype == np.int64
    starts = np.concatenate(([0], np.cumsum(sizes)))
    for token, lo, hi in zip(toks, starts[:-1], starts[1:]):
        assert ids[lo:hi].tolist() == idx.fts_postings(token)[0].tolist()
    # "a session", "the session", "Session session session"; "Sessions" is another token
    assert int(sizes[toks.index("session")]) == 5 and "sessions" in toks


@pytest.mark.parametrize("docs", [[7], [3, 3, 5, 9, 9, 9], [9, 3, 9, 5, 3, 9]])
def test_posting_runs_count_each_row_as_unique_does(docs):
    from varaverk.retrieval.lexical import _runs

    rows, freq = _runs(np.array(docs, dtype=np.int64))
    want_rows, want_counts = np.unique(docs, return_counts=True)
    assert rows.tolist() == want_rows.tolist() and freq.dtype == np.float64
    assert freq.tolist() == want_counts.tolist()


def test_doc_lengths_sum_varints_of_any_width_row_by_row():
    from varaverk.index.store.fts import varint_row_sums

    # Rows of 2, 3 and 1 varints: 5 + 300; 0 + 127 + 128; 2**21 + 7 (a 4-byte varint).
    blobs = [bytes([5, 0x82, 0x2C]), bytes([0, 0x7F, 0x81, 0x00]), bytes([0x81, 0x80, 0x80, 0x07])]
    sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    assert varint_row_sums(b"".join(blobs), sizes).tolist() == [305, 255, 2**21 + 7]
    with pytest.raises(ValueError):
        varint_row_sums(bytes([5, 0x82]), np.array([2]))    # the last varint never ends


@pytest.mark.parametrize("n", [40, 100_000])
def test_rows_summed_term_by_term_as_fts5_adds_them_on_both_paths(n):
    """A pass over every row (small tables, dense postings) and the postings alone (few
    postings in a large table) give the same bits: each row's weights added in term order,
    from 0.0, so that 1e16 + 1 + 1 stays 1e16 where 1e16 + (1 + 1) would not."""
    from varaverk.retrieval import lexical

    assert (n >= lexical.SPARSE_FROM) == (n == 100_000)
    rows = [np.array([3, 7, 30], dtype=np.int64), np.array([7, 30, 39], dtype=np.int64),
            np.array([0, 7, 30], dtype=np.int64)]
    weights = [np.array([0.5, 1e16, 0.1]), np.array([1.0, 0.2, 2.0]), np.array([4.0, 1.0, 0.3])]
    expected: dict[int, float] = {}
    for r, w in zip(rows, weights):
        for row, weight in zip(r.tolist(), w.tolist()):
            expected[row] = expected.get(row, 0.0) + weight
    held, total = lexical.summed_by_row(rows, weights, n)
    assert held.tolist() == sorted(expected)
    assert total.tolist() == [expected[r] for r in sorted(expected)]
    assert total[held.tolist().index(7)] == 1e16 and total.dtype == np.float64


@pytest.mark.parametrize("query", QUERIES)
def test_scores_equal_fts5_bm25_when_only_postings_are_added(idx, query, monkeypatch):
    from varaverk.retrieval import lexical

    monkeypatch.setattr(lexical, "SPARSE_FROM", 0)
    monkeypatch.setattr(lexical, "SPARSE_SHARE", 0)
    rows, scores = Bm25(idx).score(fts_terms(query))
    order = np.lexsort((rows, -scores))
    assert [(int(rows[i]), float(scores[i])) for i in order] == idx.fts_search(query, 100)


@pytest.mark.parametrize("size", [30, 2_000, 20_000])
def test_the_k_best_scores_keep_every_tie_on_both_selection_paths(size):
    """The lexical pool's selection: every score at least the k-th best, ties included,
    whether selected among all scores or above a sampled threshold (large arrays)."""
    from varaverk.retrieval.scoring import SAMPLE_KTH_FROM, at_least_kth

    assert (size >= SAMPLE_KTH_FROM) == (size > 30)
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 400, size).astype(np.float64) / 7   # many ties
    for k in (1, 7, 20, 29):
        kth = np.sort(scores)[::-1][k - 1]
        got = at_least_kth(scores, k)
        assert got.tolist() == np.flatnonzero(scores >= kth).tolist()
        assert got.size >= k


@pytest.mark.parametrize("data, values", [
    (bytes([5, 0, 127, 1]), [5, 0, 127, 1]),              # one byte each
    (bytes([5, 0x82, 0x2C, 127]), [5, 300, 127]),          # one of two bytes among them
])
def test_varints_of_one_byte_each_decode_as_any_width_does(data, values):
    from varaverk.index.store.fts import varint_values

    got = varint_values(data)
    assert got.tolist() == values and got.dtype == np.int64
    with pytest.raises(ValueError):
        varint_values(data + bytes([0x81]))                 # truncated
