"""Retrieval on the real harborlab index with the real offline embedder."""

from __future__ import annotations

import pytest

from varaverk.retrieval.options import SECTION_BOOST, RetrieverOptions
from varaverk.retrieval.search import Retriever


def places(hits):
    return [(h.chunk.path, h.chunk.section, h.chunk.title) for h in hits]


def test_mover_question_finds_mover_coordination(retriever):
    hits = retriever.search("what stops rsync and the mover running at once", 5)
    assert ("Backup/rsync_mirror.sh", "OPERATIONAL SAFEGUARDS", "Mover Coordination") \
        in places(hits)[:3]
    assert retriever.confident(hits)


@pytest.mark.parametrize("query,title", [
    ("MOVER_STOP_TIMEOUT", "MOVER_STOP_TIMEOUT"),
    ("what happens when MOVER_STOP_TIMEOUT runs out?", "MOVER_STOP_TIMEOUT"),
    ("Can --force-delete get around it?", "--force-delete"),
    ("what does --dry-run do for the mirror", "--dry-run"),
])
def test_exact_names_rank_their_own_chunk_first(retriever, query, title):
    top = retriever.search(query, 5)[0]
    assert top.chunk.title == title
    assert top.exact


def test_exact_flag_ranks_the_right_jobs_flag_first(retriever):
    top = retriever.search("Can --force-delete get around it?", 5)[0]
    assert top.chunk.citation == "Backup/rsync_mirror.sh › RUNTIME MODES › --force-delete"


def test_filters_compose(retriever):
    hits = retriever.search("how long does the mover get", 10, kind="header",
                            section="configuration")
    assert hits
    assert all(h.chunk.kind == "header" and h.chunk.section == "CONFIGURATION" for h in hits)
    readme = retriever.search("merge mode", 10, kind="readme")
    assert readme and all(h.chunk.kind == "readme" for h in readme)
    assert retriever.search("merge mode", 10, kind="readme", section="CONFIGURATION") == []
    # a stored section in mixed case (a README heading) matches in any case
    heading = next(h.chunk.section for h in readme if h.chunk.section != h.chunk.section.upper())
    same = retriever.search("merge mode", 10, kind="readme", section=heading.swapcase())
    assert same and all(h.chunk.section == heading for h in same)


def test_section_filter_matches_a_section_whose_upper_case_is_longer(tmp_path):
    # "Straße" upper-cases to "STRASSE", one character longer: the filter compares it as
    # str.upper() does, also when it is the table's longest section name.
    import numpy as np

    from varaverk.documents.chunks import Chunk
    from varaverk.config import Settings
    from varaverk.index.store.index import Index
    from varaverk.index.store.records import FileRow, IndexChanges

    items = [(Chunk(path=f"{section}.md", kind="doc", section=section, title="Parken",
                    start_line=1, end_line=2, text="rsync mover parking", context=section),
              np.eye(2, dtype=np.float32)[i]) for i, section in enumerate(["Straße", "Weg"])]
    with Index.open(tmp_path / "index.sqlite") as index:
        index.write(IndexChanges(new_chunks=items, embedder=("test", "m", 2), file_rows=[
            FileRow(c.path, "doc", 1, 1, "x", "indexed", "", 1) for c, _ in items]))
        lexical = Retriever(Settings(), index, options=RetrieverOptions(mode="lexical"))
        for asked in ("straße", "STRASSE", " Straße "):
            assert [h.chunk.section for h in lexical.search("rsync", 5, section=asked)] == [
                "Straße"]
        assert [h.chunk.section for h in lexical.search("rsync", 5, section="weg")] == ["Weg"]

def test_section_boost_never_excludes(retriever):
    # A configuration-shaped question: CONFIGURATION chunks are boosted, others still rank.
    hits = retriever.search("What is the default snapshot retention?", 30)
    sections = {h.chunk.section for h in hits}
    assert "CONFIGURATION" in sections
    assert sections - {"CONFIGURATION"}
    assert all(h.section_boosted == (h.chunk.section == "CONFIGURATION") for h in hits)
    # The definitional question routes to PURPOSE, yet its README answer stays in the top 5.
    top5 = retriever.search("What is the mirror's merge mode for?", 5)
    assert any(h.chunk.path == "Backup/README-Backup.md" and "harbor02" in h.chunk.text
               for h in top5)


def test_boost_is_smaller_than_an_exact_name(retriever):
    from varaverk.retrieval.ranking import NAME_TITLE_BOOST
    assert SECTION_BOOST < NAME_TITLE_BOOST


@pytest.mark.parametrize("question", [
    "How do I set up a Minecraft server container on harbor01?",
    "Where is the Kubernetes manifest for harborlab?",
])
def test_unanswerable_questions_are_not_covered(retriever, question):
    hits = retriever.search(question, 5)
    assert hits  # the nearest sources are still listed
    assert not retriever.confident(hits)


def test_a_near_miss_without_an_unknown_name_goes_to_the_model(retriever):
    # Every word but "two-factor" and "login" is in the index, and its cosines look like
    # those of paraphrased answerable questions: only the model, told to answer from the
    # context alone, can tell; no refusal without it.
    hits = retriever.search(
        "How do I turn on two-factor authentication for the server's web login?", 5)
    assert not hits[0].unknown and "two-factor" in hits[0].coverage.absent
    assert retriever.confident(hits)


def test_unknown_names(retriever):
    assert retriever.unknown_names("Where is the Kubernetes manifest?") == ["Kubernetes"]
    assert retriever.unknown_names("Kubernetes manifest") == []  # sentence start: prose
    assert retriever.unknown_names("Can I rehearse the UPS shutdown?") == []
    assert retriever.unknown_names("Does harbor01 use Zfs2Cloud or MOVER_STOP_TIMEOUT?") == [
        "Zfs2Cloud"]
    # Quantities and two-letter abbreviations are not names the documentation must contain.
    assert retriever.unknown_names("Can my old PC on 4G with 2GB back up to Zfs2Cloud?") == [
        "Zfs2Cloud"]


def test_a_compound_name_is_known_by_its_named_part(retriever):
    # "UPS" is in the index, "UPS-style" as a phrase is not: the lower-case tail is prose.
    assert retriever.unknown_names("Does the mirror have a UPS-style delay?") == []
    assert retriever.unknown_names("Can it write to a Zfs2Cloud-style target?") == [
        "Zfs2Cloud-style"]


def test_a_name_the_question_says_is_not_there_is_not_asked_about(retriever):
    # The index never says "GUI"; a question that has none need not find it documented.
    assert retriever.unknown_names("How do I pause the mover from the GUI?") == ["GUI"]
    assert retriever.unknown_names("How do I pause the mover with no GUI?") == []
    assert retriever.unknown_names("How do I pause the mover without a GUI or SSH?") == []


def test_confident_on_empty_is_false(retriever):
    assert retriever.confident([]) is False


def test_small_to_big_adds_parent_section_within_budget(retriever):
    hits = retriever.search("MOVER_STOP_TIMEOUT", 1)
    chunk = hits[0].chunk
    [stored] = retriever.index.get_chunks([chunk.id])
    assert len(stored.text) < 200  # a tiny named paragraph, returned with its section
    assert hits[0].grown and len(chunk.text) > len(stored.text)
    groups = retriever.expand(hits, 100_000)
    assert groups[0][0].section == chunk.section
    assert all(c.path == chunk.path and c.section == chunk.section for c in groups[0])
    assert chunk.id in [c.id for c in groups[0]]
    lines = [c.start_line for c in groups[0]]
    assert lines == sorted(lines)
    only = retriever.expand(hits, 1)  # the first hit's own chunk is always given
    assert [c.id for c in only[0]] == [chunk.id] and only[0][0].text == stored.text


def test_mismatched_index_is_refused(harborlab_pristine, harborlab_index, model_server):
    from tests.query.conftest import query_settings
    from varaverk.index.store.errors import IndexMismatch
    settings = query_settings(harborlab_pristine, harborlab_index, model_server,
                              ai_embed_backend="ollama", ai_embed_model="other")
    with pytest.raises(IndexMismatch):
        Retriever(settings)


def test_single_retriever_modes(harborlab_pristine, harborlab_index, retriever):
    from tests.query.conftest import query_settings
    settings = query_settings(harborlab_pristine, harborlab_index)
    lexical = Retriever(settings, retriever.index,
                        options=RetrieverOptions.from_settings(settings, mode="lexical"))
    hits = lexical.search("MIRROR_MAX_DELETE_PCT", 3)
    assert hits and all(h.dense is None and h.lexical is not None for h in hits)
    dense = Retriever(settings, retriever.index, retriever.embedder,
                      options=RetrieverOptions.from_settings(settings, mode="dense"))
    dhits = dense.search("mover coordination", 3)
    assert [h.score for h in dhits] == sorted((h.score for h in dhits), reverse=True)
    assert all(h.lexical is None for h in dhits)


def test_split_section_comes_back_whole_and_is_not_repeated(retriever):
    from varaverk.retrieval.context import format_context
    idx = retriever.index
    # Find a section stored as several parts and query with the text of its second part.
    table = idx.vector_table()
    parts = [c for c in idx.get_chunks(table.ids.tolist()) if c.part == 2]
    assert parts, "harborlab has no split section to test with"
    second = parts[0]
    siblings = [c for c in idx.chunks_for_path(second.path)
                if c.part > 0 and c.section == second.section and c.title == second.title]
    hits = retriever.search(second.text[:300], 10)
    merged = [h for h in hits if h.chunk.path == second.path and h.chunk.title == second.title]
    assert len(merged) == 1  # the parts are one result
    whole = merged[0].chunk
    assert whole.start_line <= min(s.start_line for s in siblings)
    assert whole.end_line >= max(s.end_line for s in siblings)
    groups = retriever.expand(hits, 100_000)
    text, _ = format_context(groups, 100_000)
    assert text.count(siblings[-1].text.strip()[:80]) == 1


def test_a_candidate_without_a_vector_row_gets_no_routing_boost(retriever):
    # _leading reads each candidate's routing verdict from the table's routed rows; a
    # candidate without a vector row (row -1) must read False, not the last row's verdict.
    import numpy as np
    from varaverk.retrieval.fusion import UNIT, Fused
    from varaverk.retrieval.ranking import Boosts, leading

    cache = retriever._table()
    last = cache.ids.size - 1
    section = cache.sections[last]
    boosts = Boosts(section=section, names=(), section_bonus=SECTION_BOOST * UNIT,
                    routing_kinds=retriever.options.routing_kinds)
    absent = int(cache.ids[last]) + 1000
    fused = Fused(ids=np.array([cache.ids[last], absent], dtype=np.int64),
                  rows=np.array([last, -1], dtype=np.int64),
                  scores=np.zeros(2, dtype=np.float64))
    lead = leading(fused, [], boosts, cache, 5)
    routed = dict(zip(lead.ids.tolist(), lead.routed.tolist()))
    assert routed == {int(cache.ids[last]): True, absent: False}
    assert lead.ids.tolist()[0] == int(cache.ids[last])    # the boosted one leads


def test_a_preloading_retriever_ranks_exactly_as_one_reading_word_by_word(
        retriever, hl_settings):
    import json
    from pathlib import Path

    qa = Path(__file__).resolve().parents[1] / "fixtures" / "harborlab-qa-dev.jsonl"
    questions = [json.loads(line)["question"] for line in qa.read_text().splitlines() if line]
    preload = RetrieverOptions.from_settings(hl_settings, preload=True)
    preloading = Retriever(hl_settings, embedder=retriever.embedder, options=preload)
    for question in questions:
        got = preloading.search(question, 5)
        want = retriever.search(question, 5)
        assert [(h.chunk.id, h.chunk.text, h.score, h.coverage, h.unknown) for h in got] == \
            [(h.chunk.id, h.chunk.text, h.score, h.coverage, h.unknown) for h in want]
        assert preloading.expand(got, 4000) == retriever.expand(want, 4000)
    bm25 = preloading._table().bm25()
    assert bm25.vocabulary == preloading._table().vocabulary()
    assert bm25.vocabulary == retriever.index.fts_vocabulary()


def test_a_preloading_retriever_holds_every_chunk_only_when_all_fit_its_caches(
        retriever, hl_settings, monkeypatch):
    import varaverk.retrieval.caches as caches

    preload = RetrieverOptions.from_settings(hl_settings, preload=True)
    cache = Retriever(hl_settings, embedder=retriever.embedder, options=preload)._table()
    stored = retriever.index.all_chunks()
    assert sorted(cache.chunks) == sorted(c.id for c in stored)
    path = stored[0].path
    assert cache.files[path] == retriever.index.chunks_for_path(path)
    assert set(cache.places) == set(cache.files) == {c.path for c in stored}
    monkeypatch.setattr(caches, "FILE_CACHE", len(cache.files) - 1)
    smaller = Retriever(hl_settings, embedder=retriever.embedder, options=preload)._table()
    assert not smaller.chunks and not smaller.files and not smaller.places



@pytest.mark.parametrize("question", [
    "how does the mover decide when to run?",
    "What happens to snapshots when the offsite copy fails?",
    "power failure shutdown order",
])
def test_asking_for_more_results_never_reorders_the_first_ones(retriever, question):
    # The candidate pool grew with k (three per result asked for), so `-k 40` could rank the
    # first ten differently from `-k 10`: more candidates changed the fusion's ranks.
    first = places(retriever.search(question, 10))
    assert places(retriever.search(question, 40))[:10] == first
