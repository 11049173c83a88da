"""The input budget (B18): parts within budget, context repeated, nothing lost, split_chunk."""

from __future__ import annotations

import pytest

from varaverk.documents.budget import split_chunk
from varaverk.documents.chunks import SEP, Chunk
from varaverk.documents.chunking import chunk_document
from tests.chunking.support import squeeze

HEADER = ("#!/bin/sh\n# PURPOSE\n#   Intro line.\n# OPERATIONAL SAFEGUARDS\n#   Long Guard\n"
          + "".join(f"#     Sentence number {i} explains one more detail of the guard.\n"
                    for i in range(60))
          + "#\n#     " + "x" * 900 + "\n")


@pytest.mark.parametrize("max_tokens", [64, 128, 256])
def test_every_part_fits_and_holds_its_share(max_tokens, real_count_tokens):
    chunks = chunk_document("g.sh", "header", HEADER, max_tokens=max_tokens,
                            count_tokens=real_count_tokens)
    guard = [c for c in chunks if c.title == "Long Guard"]
    assert len(guard) > 1
    assert all(real_count_tokens(c.embed_text) <= max_tokens for c in chunks)
    assert all(c.context == f"g.sh{SEP}OPERATIONAL SAFEGUARDS{SEP}Long Guard" for c in guard)
    assert [c.part for c in guard] == list(range(1, len(guard) + 1))
    whole = chunk_document("g.sh", "header", HEADER, max_tokens=100_000)
    (unsplit,) = [c for c in whole if c.title == "Long Guard"]
    assert squeeze("".join(c.text for c in guard)) == squeeze(unsplit.text)
    # Line ranges narrow to each part and stay in order.
    assert guard[0].start_line == 5 and guard[-1].end_line == unsplit.end_line
    for a, b in zip(guard, guard[1:]):
        assert a.end_line <= b.start_line
        assert a.start_line <= a.end_line


def test_parts_are_balanced_not_full_plus_scrap():
    text = "#!/bin/sh\n# PURPOSE\n" + "".join(f"#   line {i:03d} of some prose here\n"
                                                for i in range(30))
    chunks = chunk_document("b.sh", "header", text, max_tokens=600)
    sizes = [len(c.embed_text) for c in chunks]
    assert len(sizes) == 2 and min(sizes) > max(sizes) / 2


def test_overlong_context_is_shortened_not_the_text():
    title = "A" * 90
    text = f"#!/bin/sh\n# PURPOSE\n#   {title}\n#     " + "word " * 40 + "\n"
    chunks = chunk_document("c.sh", "header", text, max_tokens=64)
    assert all(len(c.embed_text) <= 64 for c in chunks)
    assert all(c.context.endswith("\u2026") and len(c.context) <= 32 for c in chunks)
    assert all(c.title == title for c in chunks)
    assert squeeze("".join(c.text for c in chunks)) == squeeze(title + "word " * 40)


def test_budget_too_small_is_an_error():
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_document("d.sh", "header", HEADER, max_tokens=4)


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown document kind"):
        chunk_document("x", "binary", "text")


def _chunk(text: str, start: int, part: int = 0) -> Chunk:
    lines = text.count("\n") + 1
    return Chunk(path="m.md", kind="doc", section="Top", title="Sub", start_line=start - 1,
                 end_line=start + lines - 1, text=text, context=f"m.md{SEP}Top{SEP}Sub",
                 part=part, meta={"title": "M"})


def test_split_chunk_halves_at_a_paragraph_near_the_middle():
    text = "\n".join([f"alpha {i}" for i in range(5)] + [""] + [f"beta {i}" for i in range(5)])
    chunk = _chunk(text, start=11)  # heading on line 10, text on lines 11..21
    halves = split_chunk(chunk, None, 256)
    assert [h.text for h in halves] == [text.split("\n\n")[0], text.split("\n\n")[1]]
    assert [(h.start_line, h.end_line) for h in halves] == [(10, 15), (17, 21)]
    assert [h.part for h in halves] == [1, 2]
    assert all(h.context == chunk.context and h.meta == chunk.meta for h in halves)
    assert all((h.section, h.title, h.path, h.kind) == ("Top", "Sub", "m.md", "doc") for h in halves)


def test_split_chunk_of_a_part_and_of_a_single_line():
    chunk = _chunk("=" * 1000, start=5, part=3)
    halves = split_chunk(chunk, None, 10_000)
    assert [len(h.text) for h in halves] == [500, 500]
    assert [h.part for h in halves] == [301, 302]
    assert all(h.start_line <= 5 <= h.end_line for h in halves)
    assert split_chunk(_chunk("x", start=2), None, 256) == [_chunk("x", start=2)]


def test_split_chunk_also_meets_the_budget(real_count_tokens):
    text = "\n".join(f"line {i} " + "token " * 20 for i in range(40))
    pieces = split_chunk(_chunk(text, start=2), real_count_tokens, 128)
    assert len(pieces) > 2
    assert all(real_count_tokens(p.embed_text) <= 128 for p in pieces)
    assert squeeze("".join(p.text for p in pieces)) == squeeze(text)


def test_split_chunk_of_one_line_between_blank_lines():
    chunk = _chunk("\n" + "y" * 40 + "\n", start=3)
    halves = split_chunk(chunk, None, 256)
    assert [h.text for h in halves] == ["y" * 20, "y" * 20]
    assert [(h.start_line, h.end_line) for h in halves] == [(2, 4), (4, 4)]  # heading line 2


@pytest.mark.parametrize("max_tokens", [64, 256])
def test_a_counters_ceiling_changes_no_chunk(max_tokens, real_count_tokens, harborlab_docs):
    if getattr(real_count_tokens, "ceiling", None) is None:
        pytest.skip("the offline embedder's counter is not importable here")
    calls = []

    def counted(text):  # the same counts without a ceiling, every fit asked of the count
        calls.append(text)
        return real_count_tokens(text)

    docs = [("g.sh", "header", HEADER), *harborlab_docs]
    for path, kind, text in docs:
        with_ceiling = chunk_document(path, kind, text, max_tokens=max_tokens,
                                      count_tokens=real_count_tokens)
        assert with_ceiling == chunk_document(path, kind, text, max_tokens=max_tokens,
                                              count_tokens=counted), path
    assert calls
