""""Not covered" relative to the index (varaverk.retrieval.coverage): the maths on known values, the
index's vocabulary on real SQLite, and the decision on constructed documentation indexed with
the real offline embedder beside the harborlab fixture."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from tests.query.conftest import query_settings
from tests.support.repos import git
from varaverk.documents.chunks import Chunk
from varaverk.retrieval.coverage import (LEADING, MIN_MARGIN, MISSED_COST, REF_RANK, Coverage,
                                         measure, pool_margin, word_forms, word_weight)
from varaverk.index.store.index import Index
from varaverk.index.store.records import FileRow, IndexChanges
from varaverk.retrieval import relevance
from varaverk.text import inflections

# A photo service's manual, added to the harborlab repository: the index then holds ~1,100
# chunks, enough for a pool edge, and questions about the photo service have one right page.
PHOTOS_MANUAL = """# Photo library

## Storage
Originals are kept under /srv/photos/originals on the data pool. Set PHOTOS_ROOT to move
the whole library to another disk; the service must be stopped while the folder is moved.

## Thumbnails
Thumbnails and previews are rendered at import time into /srv/photos/cache. Deleting the
cache is safe: it is rebuilt on the next import run, which takes about an hour per 50,000
pictures.

## Faces
Face detection groups people after each import. A person's name given once is applied to
every matching face; wrong matches are split off from the People page.

## Sharing links
An album can be shared with a link that expires after PHOTOS_LINK_DAYS days (default 14).
Links never show the location data of a picture.
"""


def _labelled(idx_path, texts: list[tuple[str, str]]) -> Index:
    """A real index of ``(title, text)`` chunks with random unit vectors (lexical tests)."""
    rng = np.random.default_rng(0)
    changes = IndexChanges(embedder=("test", "m", 4))
    for i, (title, text) in enumerate(texts):
        v = rng.standard_normal(4).astype(np.float32)
        changes.new_chunks.append((Chunk(path="Docs/Manual-X.md", kind="manual", section="S",
                                         title=title, start_line=i + 1, end_line=i + 1,
                                         text=text, context=f"Docs/Manual-X.md › {title}"),
                                   v / np.linalg.norm(v)))
    changes.file_rows.append(FileRow(path="Docs/Manual-X.md", kind="manual", size=1,
                                     mtime_ns=1, sha256="0", status="indexed"))
    with Index.open(idx_path) as w:
        w.write(changes)
    return Index.open(idx_path, readonly=True)


# -- the maths -----------------------------------------------------------------------------

def test_pool_margin_is_best_over_the_reference_rank():
    ranked = [0.8] + [0.5] * (REF_RANK - 2) + [0.3, 0.1]
    assert pool_margin(ranked) == pytest.approx(0.5)
    assert pool_margin(ranked[:REF_RANK - 1]) is None  # no pool edge: no margin
    assert pool_margin([0.9, 0.7, 0.2], rank=2) == pytest.approx(0.2)


def test_rule_charges_missed_words_and_abstains_without_a_margin():
    full = Coverage(margin=MIN_MARGIN + 0.05, words=4)
    assert full.covered()
    # Half the question's weight missed costs MISSED_COST / 2 of margin.
    half = Coverage(margin=MIN_MARGIN + 0.05, words=4, missed=("a", "b"), missed_share=0.5)
    assert half.effective_margin() == pytest.approx(MIN_MARGIN + 0.05 - MISSED_COST / 2)
    assert half.covered() is (0.05 >= MISSED_COST / 2)
    assert not Coverage(margin=MIN_MARGIN - 0.01, words=4).covered()
    assert Coverage(margin=None, words=4, missed=("a",), missed_share=1.0).covered()
    # Absent words are reported; only the missed share costs margin.
    assert Coverage(margin=MIN_MARGIN, words=4, absent=("a",)).covered()


def test_word_weight_is_bm25_idf_floored_at_zero():
    assert word_weight(0, 1000) == pytest.approx(math.log(1000.5 / 0.5))
    assert word_weight(9, 1000) == pytest.approx(math.log(991.5 / 9.5))
    # In half the chunks or more a word says nothing: the product's own name, "camera".
    assert word_weight(500, 1000) == 0.0
    assert word_weight(900, 1000) == 0.0
    assert word_weight(1, 1000) > word_weight(10, 1000) > word_weight(100, 1000) > 0


def test_inflections_cover_regular_forms_both_ways():
    assert {"switch", "switches", "switched"} <= inflections("switched")
    assert "pixelated" in inflections("pixelate")
    assert "reply" in inflections("replies")
    assert "stop" in inflections("stopped")
    assert "upload" in inflections("uploads")


# -- absent and missed words on a real index ------------------------------------------------

@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    index = _labelled(tmp_path_factory.mktemp("coverage") / "index.sqlite", [
        ("Faces", "Faces can be pixelated in exports; two people share one factor of trust."),
        ("Sync", "The mover switches off while rsync runs."),
    ])
    yield index
    index.close()


@pytest.fixture(scope="module")
def wide_index(tmp_path_factory):
    """The two chunks of ``small_index`` and 38 filler chunks that all say "homelab"."""
    index = _labelled(tmp_path_factory.mktemp("coverage-wide") / "index.sqlite", [
        ("Faces", "Faces can be pixelated in exports; two people share one factor of trust."),
        ("Sync", "The mover switches off while rsync runs."),
    ] + [(f"Filler {i}", f"The homelab keeps note number {i} here.") for i in range(38)])
    yield index
    index.close()


def test_vocabulary_lists_every_token(small_index):
    vocab = small_index.fts_vocabulary()
    assert {"pixelated", "mover", "switches", "rsync", "faces", "sync"} <= vocab
    assert "minecraft" not in vocab


def test_word_forms_are_the_inflections_the_index_holds(small_index):
    vocab = small_index.fts_vocabulary()
    assert word_forms("pixelate", vocab) == [["pixelated"]]
    assert word_forms("switched", vocab) == [["switches"]]
    assert word_forms("two-factor", vocab) == [["two", "factor"]]  # a phrase, whole
    assert word_forms("Minecraft", vocab) == []
    assert word_forms("café", vocab) is None  # non-ASCII: only FTS5 may tokenize it


def _measured(index, words, leading_titles):
    """``measure`` over a real index, the leading results given by title."""
    from varaverk.retrieval.lexical import Bm25
    bm25 = Bm25(index)
    by_title = {c.title: c.id for c in index.chunks_for_path("Docs/Manual-X.md")}
    vocab = index.fts_vocabulary()
    return measure(0.3, words, lambda w: word_forms(w, vocab),
                   lambda toks: bm25.phrase_rows(toks)[0],
                   [by_title[t] for t in leading_titles], bm25.rows)


def test_missed_words_are_those_the_leading_results_lack_weighted_by_rarity(wide_index):
    # "pixelate" and "switched" are found in other forms; "two-factor" occurs only as two
    # separate words, so it is absent; "rsync" is in the index but not in the leading result.
    cov = _measured(wide_index, ["pixelate", "switched", "two-factor", "rsync", "café"],
                    ["Faces"])
    assert cov.words == 4  # "café" is not looked up
    assert cov.absent == ("two-factor",)
    assert cov.missed == ("switched", "two-factor", "rsync")
    n = 40
    weights = {"pixelate": word_weight(1, n), "switched": word_weight(1, n),
               "two-factor": word_weight(0, n), "rsync": word_weight(1, n)}
    assert cov.missed_share == pytest.approx(
        (weights["switched"] + weights["two-factor"] + weights["rsync"]) / sum(weights.values()))
    assert cov.margin == 0.3
    # With the sync chunk leading too, only the absent phrase is missed.
    both = _measured(wide_index, ["pixelate", "switched", "two-factor", "rsync"],
                     ["Faces", "Sync"])
    assert both.missed == ("two-factor",)
    assert both.missed_share == pytest.approx(weights["two-factor"] / sum(weights.values()))


def test_words_every_chunk_holds_weigh_nothing(wide_index):
    # "homelab" is in every filler chunk: missing it costs nothing, and a question of such
    # words alone has no weight to miss.
    cov = _measured(wide_index, ["homelab", "pixelate"], ["Sync"])
    assert cov.missed == ("homelab", "pixelate")
    assert cov.missed_share == 1.0
    cov = _measured(wide_index, ["homelab", "rsync"], ["Faces"])
    assert cov.missed == ("homelab", "rsync")
    assert cov.missed_share == 1.0
    cov = _measured(wide_index, ["homelab", "rsync"], ["Sync"])
    assert cov.missed == ("homelab",) and cov.missed_share == 0.0
    assert _measured(wide_index, ["homelab"], ["Sync"]).missed_share == 0.0


def test_only_the_leading_results_count(wide_index):
    titles = [f"Filler {i}" for i in range(LEADING)]
    assert _measured(wide_index, ["rsync"], titles + ["Sync"]).missed == ("rsync",)
    assert _measured(wide_index, ["rsync"], titles[:-1] + ["Sync"]).missed == ()


# -- the decision on constructed documentation ------------------------------------------------

@pytest.fixture(scope="module")
def photos_retriever(harborlab_pristine, harborlab_index, tmp_path_factory):
    """harborlab plus the photo manual, indexed incrementally from the session's index."""
    from varaverk.index.refresh import refresh
    from varaverk.retrieval.search import Retriever
    root = tmp_path_factory.mktemp("photos")
    repo, data = root / "harborlab", root / "data"
    shutil.copytree(harborlab_pristine, repo, symlinks=True)
    shutil.copytree(harborlab_index, data)
    (repo / "Docs").mkdir(exist_ok=True)
    (repo / "Docs" / "Manual-Photos.md").write_text(PHOTOS_MANUAL)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "photo manual")
    settings = query_settings(repo, data)
    refresh(settings, progress=False)
    return Retriever(settings)


def _decided_by_coverage(retriever, hits) -> Coverage:
    """The hits' coverage, after checking that no earlier rule decided (no title match, no
    unknown name, best cosine above the absolute floor)."""
    assert hits and not any(h.exact or h.unknown or h.alias for h in hits)
    assert hits[0].best_dense >= retriever.options.min_score
    assert hits[0].coverage is not None and hits[0].coverage.margin is not None
    return hits[0].coverage


@pytest.mark.parametrize("question,title", [
    # neither "pictures" nor "drive" (for originals) is a word of the heading or of PHOTOS_ROOT
    ("If I put the pictures on a different drive, what do I have to change?", "Storage"),
    # "throw" occurs nowhere in the index: one absent word costs little
    ("Is it safe to throw away the preview cache?", "Thumbnails"),
])
def test_paraphrased_question_about_the_manual_is_answered(photos_retriever, question, title):
    hits = photos_retriever.search(question, 5)
    assert (hits[0].chunk.path, hits[0].chunk.title) == ("Docs/Manual-Photos.md", title)
    measured = _decided_by_coverage(photos_retriever, hits)
    assert photos_retriever.confident(hits)
    assert measured.effective_margin() >= MIN_MARGIN + 0.04


def test_coverage_does_not_depend_on_how_many_results_are_asked_for(photos_retriever):
    # The rule reads the leading results; asking for fewer must not make more words missed.
    question = "If I put the pictures on a different drive, what do I have to change?"
    five = photos_retriever.search(question, LEADING)
    for k in (1, 3):
        fewer = photos_retriever.search(question, k)
        assert [h.chunk.id for h in fewer] == [h.chunk.id for h in five[:k]]
        assert fewer[0].coverage == five[0].coverage
        assert photos_retriever.confident(fewer) == photos_retriever.confident(five)


def test_margin_rule_refuses_a_flat_field_only_when_asked_to(photos_retriever):
    # Backups are documented at length, tapes nowhere: many backup chunks are a little alike,
    # none stands out, and the tape words are absent. Answerable questions look the same on
    # other corpora (leave-one-corpus-out), so by default the model judges; AI_MIN_MARGIN
    # turns the margin rule on.
    from dataclasses import replace
    question = "Can the backups be written to tape cartridges in a robotic changer?"
    hits = photos_retriever.search(question, 5)
    assert hits  # the nearest sources are still listed
    measured = _decided_by_coverage(photos_retriever, hits)
    assert photos_retriever.options.min_margin is None
    assert photos_retriever.confident(hits)
    assert measured.effective_margin() < MIN_MARGIN - 0.04
    assert {"tape", "cartridges"} <= set(measured.absent)
    strict = replace(photos_retriever.options, min_margin=MIN_MARGIN)
    assert relevance.confident(hits, strict.min_score, strict.min_margin) is False


class _Fixed:
    """An embedder that gives every query the same unit vector."""
    backend, model, dimension = "test", "m", 4

    def embed_query(self, text):
        return np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)


def test_search_counts_missed_words_over_the_chunks_that_ranked(wide_index):
    from varaverk.config import Settings
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever
    retriever = Retriever(Settings(), wide_index, _Fixed(),
                          options=RetrieverOptions(min_score=-1.0), reranker=False)
    [hit] = retriever.search("pixelated faces while rsync runs", 1)
    # The result is one tiny chunk grown with its neighbours for context; only the chunk that
    # ranked counts, so the two words of the other one are missed although the result shows
    # them.
    [own] = wide_index.get_chunks([hit.chunk.id])
    assert own.title in ("Faces", "Sync")
    assert "rsync" in hit.chunk.text and "faces" in hit.chunk.text.lower()
    expected = ("rsync", "runs") if own.title == "Faces" else ("pixelated", "faces")
    cov = hit.coverage
    assert cov.missed == expected and cov.words == 4 and cov.absent == ()
    assert cov.missed_share == pytest.approx(0.5)  # four words, each in one chunk of 40


def test_small_index_has_no_pool_edge_and_keeps_the_absolute_floor(small_index):
    from varaverk.config import Settings
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    retriever = Retriever(Settings(), small_index, _Fixed(),
                          options=RetrieverOptions(min_score=-1.0), reranker=False)
    hits = retriever.search("does the mover switch off during rsync", 2)
    assert hits[0].coverage.margin is None
    assert retriever.confident(hits)
    assert Retriever(Settings(), small_index, _Fixed(), options=RetrieverOptions(min_score=1.0),
                     reranker=False).confident(hits) is False


def test_min_margin_comes_from_settings(small_index):
    from varaverk.config import Settings
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    def lexical(settings):
        return Retriever(settings, small_index,
                         options=RetrieverOptions.from_settings(settings, mode="lexical"))
    assert lexical(Settings()).options.min_margin is None  # off: the model judges
    assert lexical(Settings(ai_min_margin=0.2)).options.min_margin == 0.2


# -- measured when first read ---------------------------------------------------------------

def test_a_search_measures_its_words_only_when_its_coverage_is_read(wide_index, monkeypatch):
    from varaverk.config import Settings
    from varaverk.retrieval import coverage
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    calls = []
    real = relevance.measure

    def counted(*args):
        calls.append(args[1])
        return real(*args)
    monkeypatch.setattr(relevance, "measure", counted)
    dense = Retriever(Settings(), wide_index, EmbedFixed(), options=RetrieverOptions(
        mode="hybrid"), reranker=False)
    question = "Can the mover teleport pixelated faces with rsync?"
    hits = dense.search(question, 5)
    assert hits and calls == []                        # nobody asked: nothing measured
    first = hits[0].coverage
    assert calls == [("mover", "teleport", "pixelated", "faces", "rsync")]
    assert all(h.coverage is first for h in hits) and len(calls) == 1   # once per search
    table = dense._table()
    now = relevance.measure_coverage(("mover", "teleport", "pixelated", "faces", "rsync"),
                                     dense._dense(dense._question(question, 5, table),
                                                  relevance_filters(table), table),
                                     None, hits, table)
    assert isinstance(now, coverage.Coverage) and now == first and hits[0].measured == now
    assert first.absent == ("teleport",) and "teleport" in first.missed


class EmbedFixed:
    """A query embedder of the ``_labelled`` index's dimension (4)."""

    backend, model, dimension = "test", "m", 4

    def embed_query(self, text: str) -> np.ndarray:
        return np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)


def relevance_filters(table):
    from varaverk.retrieval.question import Filters
    return Filters.of(table, None, None, None)
