"""Small-to-big in the result list: a tiny chunk comes back with its parent section, and merged
results never repeat one another's lines (real index of constructed documents)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.query.conftest import query_settings
from tests.support.repos import make_repo
from varaverk.retrieval import windows
from varaverk.retrieval.search import Retriever
from varaverk.retrieval.windows import _around


def _script(keys: int) -> str:
    """A script whose CONFIGURATION section documents ``keys`` settings in tiny paragraphs."""
    lines = ["#!/usr/bin/env bash", "# demo :: Tools/pump.sh", "# Run the pump.", "#",
             "# PURPOSE", "#   Moves water from the cistern to the tank when the tank runs low.",
             "#", "# CONFIGURATION"]
    for i in range(keys):
        lines += [f"#   PUMP_SETTING_{i:02d}",
                  f"#     Setting number {i} of the pump, in litres per minute (default: {i})"]
    lines += ["#", "# RUNTIME MODES", "#   --dry-run", "#     Print what would run; run nothing.",
              "", "echo pump", ""]
    return "\n".join(lines)


@pytest.fixture
def pump(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {"Tools/pump.sh": _script(14)})
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m")
    from varaverk.index.refresh import refresh
    refresh(settings, progress=False)
    return Retriever(settings, reranker=False)


def test_a_tiny_chunk_comes_back_with_its_parent_section(pump):
    stored = {c.title: c for c in pump.index.chunks_for_path("Tools/pump.sh")}
    seed = stored["PUMP_SETTING_07"]
    assert len(seed.text) < windows.TINY_CHARS
    [hit] = pump.search("PUMP_SETTING_07", 1)
    assert hit.chunk.id == seed.id and hit.grown
    text = hit.chunk.text
    assert seed.text.strip() in text and len(text) <= windows.TINY_MERGE_CHARS
    # Its nearest siblings on both sides, never another section's paragraphs.
    assert stored["PUMP_SETTING_06"].text.strip() in text
    assert stored["PUMP_SETTING_08"].text.strip() in text
    assert "--dry-run" not in text and "cistern" not in text
    config = sorted((c for c in stored.values() if c.section == "CONFIGURATION"),
                    key=lambda c: c.start_line)
    assert sum(len(c.text) for c in config) > windows.TINY_MERGE_CHARS  # so it is a window
    inside = [c for c in config if c.text.strip() in text]
    assert hit.chunk.start_line == inside[0].start_line
    assert hit.chunk.end_line == inside[-1].end_line
    # The prompt's expansion adds the rest of the section, each paragraph once.
    [group] = pump.expand([hit], 100_000)
    from varaverk.retrieval.context import format_context
    context, _ = format_context([group], 100_000)
    for c in config:
        assert context.count(c.text.strip()) == 1
    assert "--dry-run" not in context


def test_a_merged_result_is_a_copy_and_the_cached_chunks_stay_as_stored(pump):
    from dataclasses import replace

    stored = {c.id: c for c in pump.index.chunks_for_path("Tools/pump.sh")}
    [first] = pump.search("PUMP_SETTING_07", 1)
    [again] = pump.search("PUMP_SETTING_07", 1)
    assert first.grown and again.chunk == first.chunk   # merged from the cache, not a merge
    seed = pump._table().file_chunks("Tools/pump.sh")[0]  # the retriever's cached chunks
    cached = {c.id: c for c in pump._table().file_chunks("Tools/pump.sh")}
    assert cached == stored and type(seed) is type(first.chunk)
    merged = first.chunk
    # Every field of the seed but the joined text and its line range.
    assert merged == replace(stored[merged.id], text=merged.text,
                             start_line=merged.start_line, end_line=merged.end_line)
    assert merged.text != stored[merged.id].text
    assert (first.score, first.dense, first.lexical, first.exact) == \
        (again.score, again.dense, again.lexical, again.exact)


def test_a_chunk_that_is_not_tiny_is_returned_as_stored(pump, monkeypatch):
    monkeypatch.setattr(windows, "TINY_CHARS", 0)
    [hit] = pump.search("PUMP_SETTING_07", 1)
    stored = {c.id: c for c in pump.index.chunks_for_path("Tools/pump.sh")}
    assert not hit.grown and hit.chunk.text == stored[hit.chunk.id].text


def _parts(*sizes: int) -> list:
    return [SimpleNamespace(n=i, text="x" * size) for i, size in enumerate(sizes)]


def _window(sibs: list, pos: int, **kw) -> list[int]:
    return [sibs[j].n for j in _around([len(s.text) for s in sibs], pos, **kw)]


def test_around_grows_after_then_before_within_the_cap():
    sibs = _parts(100, 100, 100, 100, 100)
    assert _window(sibs, 2, cap=300) == [1, 2, 3]
    assert _window(sibs, 2, cap=400) == [1, 2, 3, 4]
    assert _window(sibs, 0, cap=1000) == [0, 1, 2, 3, 4]


def test_around_never_jumps_a_sibling_it_cannot_hold():
    # The old window skipped the long part and took the one beyond it, so the merged line
    # range claimed lines whose text it did not hold.
    sibs = _parts(100, 900, 100, 100)
    assert _window(sibs, 0, cap=400) == [0]
    assert _window(sibs, 2, cap=400) == [2, 3]


def test_around_stops_at_walls():
    sibs = _parts(100, 100, 100, 100, 100)
    assert _window(sibs, 3, cap=1000, walls={1}) == [2, 3, 4]
    assert _window(sibs, 2, cap=1000, walls={1, 3}) == [2]


def _stored(cid: int, section: str, title: str, start: int, size: int, part: int = 0,
            block: int | None = None):
    from varaverk.index.store.stored_chunk import StoredChunk
    return StoredChunk(path="conf/app.yml", kind="template", section=section, title=title,
                       start_line=start, end_line=start + 1, text=f"{title} " + "x" * size + "\n",
                       context="", part=part, meta={"block": block} if block else {}, id=cid)


def _file() -> list:
    """One file's chunks in document order: a section split in three parts, a YAML block of
    three keys, a section of three tiny paragraphs and a chunk too long to be tiny."""
    return [_stored(1, "GUIDE", "Guide", 1, 1000, part=1),
            _stored(2, "GUIDE", "Guide", 3, 1000, part=2),
            _stored(3, "GUIDE", "Guide", 5, 1000, part=3),
            _stored(4, "services", "web", 10, 100, block=10),
            _stored(5, "services", "db", 12, 100, block=10),
            _stored(6, "services", "cache", 14, 100, block=10),
            _stored(7, "KEYS", "one", 20, 300),
            _stored(8, "KEYS", "two", 22, 300),
            _stored(9, "KEYS", "three", 24, 300),
            _stored(10, "NOTES", "long", 30, 800)]


def _merged(ranked: list[int], k: int = 10) -> list[tuple[int, int, int, bool]]:
    """(id, start_line, end_line, grown) of merge_parts' results for hits of these ids."""
    from varaverk.retrieval.hits import Hit
    chunks = {c.id: c for c in _file()}
    places = windows.places(_file())
    hits = [Hit(chunks[cid], 1.0 - i / 100) for i, cid in enumerate(ranked)]
    return [(h.chunk.id, h.chunk.start_line, h.chunk.end_line, h.grown)
            for h in windows.merge_parts(hits, k, lambda path: places)]


def test_merge_parts_grows_parts_block_keys_and_tiny_chunks_within_their_own_siblings():
    # Parts: the nearest after first, within MERGE_CHARS; a block: every key; tiny: the section.
    assert _merged([2]) == [(2, 3, 6, False)]
    assert _merged([5]) == [(5, 10, 15, False)]
    assert _merged([8]) == [(8, 20, 25, True)]
    # A chunk too long to be tiny, and one its file does not hold, come back as they are.
    assert _merged([10]) == [(10, 30, 31, False)]
    from varaverk.retrieval.hits import Hit
    stranger = _stored(99, "KEYS", "four", 40, 10)
    [hit] = windows.merge_parts([Hit(stranger, 1.0)], 5, lambda path: windows.places(_file()))
    assert hit.chunk is stranger and not hit.grown


def test_merge_parts_stops_at_lines_an_earlier_result_holds():
    # Part 1 takes part 2 (the nearest after it); part 3 then stands alone, and the tiny
    # paragraphs' window never reaches into the block above them.
    assert _merged([1, 3, 2]) == [(1, 1, 4, False), (3, 5, 6, False)]
    assert _merged([9, 7, 8]) == [(9, 20, 25, True)]
    assert _merged([4, 7, 10], k=2) == [(4, 10, 15, False), (7, 20, 25, True)]


def test_merge_parts_takes_no_hit_after_the_kth_result():
    # The retriever reads chunks as merging reaches their hits: a hit taken after the k-th
    # result would cost a read for nothing.
    from varaverk.retrieval.hits import Hit
    chunks = {c.id: c for c in _file()}
    hits = iter([Hit(chunks[cid], 1.0) for cid in (8, 7, 10, 1)])
    places = windows.places(_file())
    out = windows.merge_parts(hits, 2, lambda path: places)
    assert [h.chunk.id for h in out] == [8, 10]
    assert next(hits).chunk.id == 1


LONG = ("# Guide\n\n## Tracking\n\n"
        + "\n\n".join(f"Paragraph {i}: " + " ".join(f"w{i}x{j}" for j in range(30))
                      for i in range(40)) + "\n")


def test_parts_of_one_section_never_repeat_each_others_lines(tmp_path, model_server,
                                                              monkeypatch):
    repo = make_repo(tmp_path / "repo", {"docs/guide.md": LONG})
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m")
    from varaverk.index.refresh import refresh
    refresh(settings, progress=False)
    retriever = Retriever(settings, reranker=False)
    parts = sorted((c for c in retriever.index.chunks_for_path("docs/guide.md") if c.part > 0),
                   key=lambda c: c.part)
    assert len(parts) >= 4
    # A window of about two parts, so every part that ranks grows into a neighbour.
    monkeypatch.setattr(windows, "MERGE_CHARS", max(len(c.text) for c in parts) * 2 + 10)
    hits = retriever.search("w0x1 w39x2 paragraph", 10)
    assert len(hits) >= 3
    assert any(len([p for p in parts if p.text.strip() in h.chunk.text]) > 1 for h in hits)
    for p in parts:
        held = [h for h in hits if p.text.strip() in h.chunk.text]
        assert len(held) == 1, f"part {p.part} is in {len(held)} results"
    spans = sorted((h.chunk.start_line, h.chunk.end_line) for h in hits)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def _guide(tmp_path, model_server, files):
    repo = make_repo(tmp_path / "repo", files)
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m")
    from varaverk.index.refresh import refresh
    refresh(settings, progress=False)
    return Retriever(settings, reranker=False)


def test_a_long_first_result_does_not_crowd_out_the_next_match(tmp_path, model_server,
                                                                monkeypatch):
    from varaverk.retrieval.context import format_context
    retriever = _guide(tmp_path, model_server, {
        "docs/guide.md": LONG,
        "docs/short.md": "# Pump\n\n## Valve\n\nThe valve w0x1 opens at 3 bar.\n"})
    parts = [c for c in retriever.index.chunks_for_path("docs/guide.md") if c.part > 0]
    monkeypatch.setattr(windows, "MERGE_CHARS", max(len(c.text) for c in parts) * 2 + 10)
    hits = retriever.search("w0x1 w0x2 w0x3 paragraph", 10)
    first, valve = hits[0], next(h for h in hits if h.chunk.path == "docs/short.md")
    assert first.chunk.path == "docs/guide.md" and first.chunk.id in {c.id for c in parts}
    assert len(first.chunk.text) > max(len(c.text) for c in parts)  # a merged window
    # The window whole fills the budget: handing it first used to leave the valve out.
    budget = len(first.chunk.text) - 50
    groups = retriever.expand(hits, budget)
    given = {c.id for g in groups for c in g}
    assert valve.chunk.id in given
    seed = next(c for c in retriever.index.chunks_for_path("docs/guide.md")
                if c.id == first.chunk.id)
    assert seed.id in given
    # What expand gives fits the prompt's layout, labels included: nothing is cut.
    text, used = format_context(groups, budget)
    assert "[…]" not in text and {c.id for c in used} == given
    assert "3 bar" in text


def _sentences(topic: str) -> str:
    return " ".join(f"The {topic} note number {i} says something plain about {topic}."
                    for i in range(6))


def test_a_short_subsection_comes_back_with_its_sibling_subsections(tmp_path, model_server):
    # A subsection of a few sentences is small, though not a bare line: the answer to its
    # question often sits in the sibling subsection beside it.
    page = ("# Cameras\n\n## Camera state\n\n### Turning a camera off\n\n" + _sentences("toggle")
            + "\n\n### Toggle persistence\n\n" + _sentences("restart") + "\n\n"
            "## Unrelated\n\n" + _sentences("zebra") + "\n")
    retriever = _guide(tmp_path, model_server, {"docs/live.md": page})
    stored = {c.title: c for c in retriever.index.chunks_for_path("docs/live.md")}
    off = stored["Turning a camera off"]
    assert 200 < len(off.text) < windows.TINY_CHARS
    hit = next(h for h in retriever.search("Turning a camera off toggle", 3)
               if h.chunk.id == off.id)
    assert hit.grown
    assert stored["Toggle persistence"].text in hit.chunk.text
    assert "zebra" not in hit.chunk.text


def test_a_window_too_long_for_the_prompt_leaves_room_for_the_next_hit(pump, monkeypatch):
    from varaverk.retrieval.context import format_context
    hits = pump.search("PUMP_SETTING_07 cistern", 2)
    assert hits[0].grown and "cistern" in hits[1].chunk.text
    purpose = hits[1].chunk
    budget = len(hits[0].chunk.text)  # the window whole, with its labels, does not fit
    default = windows.WINDOW_SHARE
    assert 0 < default < 1

    def given(share: float) -> list[list]:
        monkeypatch.setattr(windows, "WINDOW_SHARE", share)
        return pump.expand(hits, budget)

    greedy = given(1.0)  # the window's nearest part spends everything: the next hit is lost
    assert greedy[1] == [] and len(greedy[0]) > 1
    shared = given(default)
    assert [c.id for c in shared[1]] == [purpose.id]
    # The seed and the paragraphs nearest it: a contiguous run around PUMP_SETTING_07.
    numbers = sorted(int(c.title[-2:]) for c in shared[0])
    assert 7 in numbers and len(numbers) > 1
    assert numbers == list(range(numbers[0], numbers[-1] + 1))
    text, _ = format_context(shared, budget)
    assert "[…]" not in text and "cistern" in text


def test_expand_counts_a_group_exactly_as_the_prompt_lays_it_out(pump):
    """What ``expand`` counted is what ``format_context`` emits (plus the blank line it counts
    before every group): nothing it hands over is cut, and no budget is left unspent on a
    miscount of labels or line breaks."""
    from varaverk.retrieval.context import format_context
    hits = pump.search("PUMP_SETTING_07 cistern", 3)
    for budget in (300, 700, 1500, 100_000):
        groups = pump.expand(hits, budget)
        text, used = format_context(groups, budget)
        given = [g for g in groups if g]
        assert used == [c for g in given for c in g] and "[…]" not in text
        assert sum(windows._cost_of(g) for g in given) == len(text) + 2 <= budget + 2


def test_every_label_a_prompt_carries_names_the_file_section_and_lines_handed_over(pump):
    """Citations stay checkable: read back as the model sees it, each chunk of the context sits
    under a label whose parts begin its own citation (the subtitle line completes it), in a
    file the repository tracks, at lines that hold the chunk's text."""
    from varaverk.retrieval.context import SUBTITLE, format_context
    repo = pump.settings.ai_repo_root
    hits = pump.search("PUMP_SETTING_07 cistern", 3)
    groups = pump.expand(hits, 4000)
    text, used = format_context(groups, 4000)
    assert any(len({c.title for c in g}) > 1 for g in groups)  # a group labelled once
    lines, at, label, rest = text.split("\n"), 0, None, ""
    for c in used:
        while lines[at] == "" or lines[at].startswith(("[", SUBTITLE)):
            if lines[at].startswith("["):
                label, rest = lines[at][1:-1], ""
            elif lines[at]:
                rest = lines[at][len(SUBTITLE):]
            at += 1
        body = c.text.rstrip().split("\n")
        assert lines[at:at + len(body)] == body
        at += len(body)
        assert c.citation == " › ".join(p for p in (label, rest) if p)
        path = label.split(" › ")[0]
        assert path == c.path and (repo / path).is_file()
        held = (repo / path).read_text().split("\n")[c.start_line - 1:c.end_line]
        for line in body:
            assert line.strip() in "\n".join(held)
    assert at == len(lines)


# -- near-copies among the results ----------------------------------------------------------

def _hit(n: int, text: str, exact: bool = False) -> SimpleNamespace:
    return SimpleNamespace(n=n, chunk=SimpleNamespace(text=text), exact=exact)


def _order(hits, **kw) -> list[int]:
    return [h.n for h in windows.demote_repeats(hits, **kw)]


CONFIG = "\n".join(f"  setting_{i}: value number {i}" for i in range(10))


def test_a_near_copy_of_an_earlier_result_is_listed_after_the_others():
    hits = [_hit(0, "intro\n" + CONFIG), _hit(1, "other intro\n" + CONFIG),
            _hit(2, "a different answer\nwith lines of its own"), _hit(3, CONFIG)]
    assert _order(hits) == [0, 2, 1, 3]
    # Nothing is removed or rewritten: the moved hits are the same objects.
    moved = windows.demote_repeats(hits)
    assert {id(h) for h in moved} == {id(h) for h in hits}


def test_a_result_moves_only_when_the_repeated_share_of_its_characters_reaches_the_share():
    own = "x" * 300                      # one line of its own
    hits = [_hit(0, CONFIG), _hit(1, own + "\n" + CONFIG), _hit(2, "z")]
    repeated = sum(len(line) for line in CONFIG.splitlines())
    share = repeated / len(hits[1].chunk.text)
    assert _order(hits, share=share) == [0, 2, 1]
    assert _order(hits, share=share + 0.01) == [0, 1, 2]
    # Lines are compared as written: the same words indented otherwise are not a repeat.
    shifted = "\n".join("    " + line for line in CONFIG.splitlines())
    assert _order([_hit(0, CONFIG), _hit(1, shifted), _hit(2, "z")]) == [0, 1, 2]


def test_the_first_result_an_exact_name_and_an_empty_text_never_move():
    hits = [_hit(0, CONFIG), _hit(1, CONFIG, exact=True), _hit(2, ""), _hit(3, "z")]
    assert _order(hits) == [0, 1, 2, 3]
    assert _order([]) == []


def _example(board: str) -> str:
    return (f"## {board} with a USB stick\n\nA full example for the {board}.\n\n```yaml\n"
            + "\n".join(f"detectors_{i}:\n  stick_{i}: usb pump setting {i}" for i in range(16))
            + "\n```\n")


def test_search_lists_a_near_copy_of_a_result_after_a_different_match(tmp_path, model_server,
                                                                       monkeypatch):
    # Two example configurations that differ in their heading line ranked first and second,
    # so the second spent the context's characters on lines the first had just shown.
    retriever = _guide(tmp_path, model_server, {
        "docs/examples.md": "# Examples\n\n" + _example("Pi") + "\n" + _example("Mini PC"),
        "docs/two.md": "# Detectors\n\n## Two sticks\n\nRun two usb sticks as usb:0 and usb:1 "
                       "under detectors, one stick each.\n"})
    query = "example configuration for a usb stick"
    monkeypatch.setattr(windows, "demote_repeats", lambda hits, share=0.5: hits)
    before = [h.chunk.path for h in retriever.search(query, 3)]
    monkeypatch.undo()
    after = retriever.search(query, 3)
    assert before == ["docs/examples.md", "docs/examples.md", "docs/two.md"]
    assert all(len(c.text) > windows.TINY_CHARS      # each example is its own result
               for c in retriever.index.chunks_for_path("docs/examples.md"))
    assert [h.chunk.path for h in after] == ["docs/examples.md", "docs/two.md",
                                             "docs/examples.md"]
    assert after[0].score > after[2].score > after[1].score   # scores are left as fused


def test_merging_reads_the_leading_hits_chunks_in_turn_and_skips_a_vanished_one(tmp_path):
    # Six whole chunks, one a file: k hits' chunks are read first, then as many again; a
    # chunk deleted since the vector table was read is left out, and no more is read once
    # merging has its k results.
    import numpy as np

    from varaverk.documents.chunks import Chunk
    from varaverk.config import Settings
    from varaverk.retrieval.caches import RowLabel
    from varaverk.retrieval.hits import Hit
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.index.store.index import Index
    from varaverk.index.store.records import FileRow, IndexChanges

    paths = [f"docs/{i}.md" for i in range(6)]
    chunks = [(Chunk(path=p, kind="doc", section="NOTES", title=p, start_line=1, end_line=9,
                     text=f"{p} " + "x" * windows.TINY_CHARS, context=p),
               np.eye(6, dtype=np.float32)[i]) for i, p in enumerate(paths)]
    with Index.open(tmp_path / "index.sqlite") as index:
        index.write(IndexChanges(new_chunks=chunks, embedder=("test", "m", 6),
                                 file_rows=[FileRow(p, "doc", 1, 1, "x", "indexed", "", 1)
                                            for p in paths]))
        retriever = Retriever(Settings(), index, options=RetrieverOptions(mode="lexical"))
        cache = retriever._table()
        ids = cache.ids.tolist()
        index.write(IndexChanges(delete_paths=[paths[1]]))
        asked: list[list[int]] = []
        read = index.get_chunks
        index.get_chunks = lambda wanted: asked.append(list(wanted)) or read(wanted)
        hits = [Hit(RowLabel(cid, "doc", p), 1.0 - i / 10)
                for i, (cid, p) in enumerate(zip(ids, paths))]
        out = retriever._merge_read(hits, 2, cache)
        assert [h.chunk.id for h in out] == [ids[0], ids[2]]
        assert [h.chunk.text for h in out] == [chunks[0][0].text, chunks[2][0].text]
        assert asked == [ids[:2], ids[2:4]]
