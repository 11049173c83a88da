"""Citations say where the text is: a merged result holds one contiguous passage of its file,
its line range is that passage's; link lists and title-only sections rank below content (real
index of constructed documents)."""

from __future__ import annotations

import pytest

from tests.query.conftest import query_settings
from tests.support.repos import make_repo
from varaverk.index.refresh import refresh
from varaverk.retrieval import windows
from varaverk.retrieval.search import Retriever

# Two top-level sections of one page around a heading whose own text is one image line
# (tiny) and whose content sits in a subsection: the tiny chunk's siblings in its section
# ("Guide") are not next to it in the file.
GUIDE = """# Guide

## Intro

The intro explains what the garden irrigation controller waters and when it runs.

## Valve CRDs

![valve crds](valves.png)

### ValveSchedule

A ValveSchedule names the valve, the start time and the minutes it stays open each day.
The controller reads every schedule at midnight and plans the next day from them.

## Later

The later section tells how the rain sensor skips a watering after a wet night.
"""

VALUES = """\
# -- Storage of the metrics database
storageSpec:
  size: 10Gi
# -- How long samples are kept
retention: 7d
# -- Rule selector
ruleSelectorNilUsesHelmValues: false
"""


@pytest.fixture
def garden(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {"docs/guide.md": GUIDE,
                                         "charts/values.yaml": VALUES})
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m", ai_globs_template=("charts/*.yaml",), ai_globs_doc=("docs/*.md",))
    refresh(settings, progress=False)
    return Retriever(settings, reranker=False)


def _lines(path: str, start: int, end: int) -> list[str]:
    return [line for line in path.splitlines()[start - 1:end] if line.strip()]


def _stored(retriever, path):
    return retriever.index.chunks_for_path(path)


def test_a_tiny_chunk_never_merges_over_another_sections_lines(garden):
    stored = {c.title: c for c in _stored(garden, "docs/guide.md")}
    tiny = stored["Valve CRDs"]
    assert len(tiny.text) < windows.TINY_CHARS
    [hit] = windows.merge_parts([_hit(tiny)], 1, garden._table().places_of)
    c = hit.chunk
    # Every chunk of the file inside the result's line range is in its text: the range is
    # the result's own, never a span that skips a subsection.
    for other in stored.values():
        if c.start_line <= other.start_line and other.end_line <= c.end_line:
            assert other.text.strip() in c.text, other.title
    assert "rain sensor" not in c.text     # the section after the subsection stays out


def test_an_unmerged_result_keeps_its_own_title(garden):
    stored = {c.title: c for c in _stored(garden, "docs/guide.md")}
    seed = stored["ValveSchedule"]
    [hit] = windows.merge_parts([_hit(seed)], 1, garden._table().places_of)
    assert hit.chunk.title == "ValveSchedule"


def _hit(chunk):
    from varaverk.retrieval.hits import Hit
    return Hit(chunk, 1.0)


LINKS = """# Valves

## Documentation

- [Valve reference](https://example.org/valves/reference)
- [Valve schedule API](https://example.org/valves/schedule-api)
- [Valve wiring guide](https://example.org/valves/wiring)
""" + "".join(f"- [Valve documentation page {i}](https://example.org/valves/documentation/{i})\n"
              for i in range(8)) + """

## Valve schedule

Each valve schedule opens the valve at its start time and closes it after the minutes set
for that day; the controller reads the valve schedules at midnight.
""" + "A valve schedule documentation note: every line of it is about the valves.\n" * 8


def test_link_lists_and_title_only_sections_rank_below_sections_with_content():
    from varaverk.retrieval.ranking import thin
    assert thin("- [Valve reference](https://example.org/valves/reference)\n"
                "- <https://example.org/x>")
    assert thin("![valve crds](valves.png)")
    assert thin("### Valve schedule\n")
    assert not thin("Each valve opens at its start time; see [the API](https://example.org).")


def test_a_link_list_that_outranks_the_answer_comes_after_it(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {"docs/valves.md": LINKS})
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m", ai_globs_doc=("docs/*.md",))
    refresh(settings, progress=False)
    retriever = Retriever(settings, reranker=False)
    from varaverk.retrieval.hits import Hit
    from varaverk.retrieval.ranking import demote_thin
    stored = {c.title: c for c in _stored(retriever, "docs/valves.md")}
    links, answer = stored["Documentation"], stored["Valve schedule"]
    assert min(len(links.text), len(answer.text)) >= windows.TINY_CHARS   # neither merges
    ranked = demote_thin([Hit(links, 2.0), Hit(answer, 1.0)])
    assert [h.chunk.title for h in ranked] == ["Valve schedule", "Documentation"]
    # A name written in the query keeps its chunk first, links or not.
    ranked = demote_thin([Hit(links, 2.0, exact=True), Hit(answer, 1.0)])
    assert [h.chunk.title for h in ranked] == ["Documentation", "Valve schedule"]
    # Through a whole search too: the link list never comes before the section that answers.
    titles = [h.chunk.title for h in retriever.search("valve schedule documentation", 5)]
    assert titles.index("Valve schedule") < titles.index("Documentation")


def test_a_yaml_key_grows_within_a_tiny_chunks_bound(tmp_path, model_server):
    keys = "".join(f"  # How the controller treats valve number {i}: its flow in litres per "
                   f"minute, checked against the meter every night\n  valve{i:02d}: {i}\n"
                   for i in range(16))
    repo = make_repo(tmp_path / "repo", {"charts/values.yaml": "valves:\n" + keys})
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m", ai_globs_template=("charts/*.yaml",))
    refresh(settings, progress=False)
    retriever = Retriever(settings, reranker=False)
    stored = sorted(_stored(retriever, "charts/values.yaml"), key=lambda c: c.start_line)
    keyed = [c for c in stored if (c.meta or {}).get("block")]
    assert sum(len(c.text) for c in keyed) > windows.TINY_MERGE_CHARS   # so it is bounded
    [hit] = windows.merge_parts([_hit(keyed[8])], 1, retriever._table().places_of)
    assert keyed[8].text.strip() in hit.chunk.text
    assert keyed[7].text.strip() in hit.chunk.text and keyed[9].text.strip() in hit.chunk.text
    assert len(hit.chunk.text) <= windows.TINY_MERGE_CHARS
