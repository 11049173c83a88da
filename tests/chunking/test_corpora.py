"""Whole corpora: every harborlab document and every Frigate page chunks cleanly, within the
budget, and every gold location of the dev question sets exists as a chunk holding the answer."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from varaverk.documents.chunks import KINDS
from varaverk.documents.chunking import chunk_document
from tests.support.repos import HARBORLAB_QUESTIONS, shared_corpus


def _check(chunks, text, count, max_tokens):
    last_line = text.count("\n") + 1
    for c in chunks:
        assert count(c.embed_text) <= max_tokens, (c.path, c.title)
        assert c.text.strip(), (c.path, c.title)
        assert "\ufeff" not in c.embed_text and "\r" not in c.embed_text
        assert 1 <= c.start_line <= c.end_line <= last_line, (c.path, c.title)
        assert c.kind in KINDS and c.context.startswith(c.path)


@pytest.fixture(scope="module")
def harborlab_chunks(harborlab_docs, real_count_tokens):
    out = {}
    for path, kind, text in harborlab_docs:
        chunks = chunk_document(path, kind, text, max_tokens=256, count_tokens=real_count_tokens)
        _check(chunks, text, real_count_tokens, 256)
        out[path] = chunks
    return out


def test_harborlab_every_document_kind_is_chunked(harborlab_chunks, harborlab_docs):
    kinds = Counter(kind for _, kind, _ in harborlab_docs)
    assert kinds == {"header": 36, "readme": 9, "manual": 6, "template": 3, "doc": 3}
    for path, kind, text in harborlab_docs:
        if text.strip():
            assert harborlab_chunks[path], path
        if kind == "header":
            sections = {c.section for c in harborlab_chunks[path]}
            assert sections == {"PURPOSE", "OPERATIONAL MODEL", "DESIGN PRINCIPLES",
                                "OPERATIONAL SAFEGUARDS", "CONFIGURATION", "RUNTIME MODES"}, path
    assert harborlab_chunks["Docs/README-Empty.md"] == []


def test_harborlab_legacy_manual_decoded_text_survives(harborlab_chunks):
    text = "\n".join(c.text for c in harborlab_chunks["Docs/Manual-Legacy.md"])
    assert "café" in text


def _gold_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _holds(chunk, answers):
    return any(a.lower() in chunk.text.lower() for a in answers)


def test_harborlab_gold_locations_exist_and_hold_the_answer(harborlab_chunks):
    # Every gold location is a chunk (header gold: section + title; Markdown gold: the
    # nearest heading as the title); with several gold entries any one holds the answer.
    missing, unanswered = [], []
    for row in _gold_rows(HARBORLAB_QUESTIONS):
        holds = False
        for gold in row["gold"]:
            chunks = harborlab_chunks[gold["path"]]
            if "heading" in gold:
                found = [c for c in chunks if c.title == gold["heading"]]
            elif "title" in gold:
                found = [c for c in chunks
                         if c.section == gold["section"] and c.title == gold["title"]]
            else:
                found = [c for c in chunks if c.section == gold["section"]]
            if not found:
                missing.append((row["id"], gold))
            holds = holds or any(_holds(c, row["answer_contains"]) for c in found)
        if row["gold"] and not holds:
            unanswered.append(row["id"])
    assert missing == [] and unanswered == []


def test_frigate_pages_chunk_within_budget(frigate_docs, real_count_tokens):
    headings = {}
    total = 0
    for path, kind, text in frigate_docs:
        chunks = chunk_document(path, kind, text, max_tokens=256, count_tokens=real_count_tokens)
        _check(chunks, text, real_count_tokens, 256)
        headings[path] = {c.title for c in chunks}
        total += len(chunks)
    assert len(frigate_docs) == 85 and total > 1000
    missing = [(row["id"], g) for row in _gold_rows(shared_corpus("eval/frigate-qa-dev.jsonl")) for g in row["gold"]
               if g["heading"] not in headings.get(g["path"], set())]
    assert missing == []


def test_frigate_with_the_character_counter(frigate_docs):
    # Without a tokenizer every chunk still fits a budget of one token per character.
    for path, kind, text in frigate_docs:
        _check(chunk_document(path, kind, text, max_tokens=512), text, len, 512)


@pytest.mark.parametrize("max_tokens", [48, 200])
@pytest.mark.parametrize("corpus", ["harborlab", "frigate"])
def test_splitting_loses_nothing_on_real_documents(request, corpus, max_tokens):
    # Chunked with a tight budget, the parts of each chunk hold exactly what the unsplit
    # chunk held (white space at part boundaries aside), in order.
    docs = request.getfixturevalue(f"{corpus}_docs")
    for path, kind, text in docs if corpus == "harborlab" else docs[::4]:
        whole = chunk_document(path, kind, text, max_tokens=10**9)
        parts = chunk_document(path, kind, text, max_tokens=max_tokens)
        assert all(len(c.embed_text) <= max_tokens for c in parts), path
        assert "".join("".join(c.text.split()) for c in parts) == \
            "".join("".join(c.text.split()) for c in whole), path
        assert [(c.section, c.title) for c in whole] == [
            (c.section, c.title) for c in parts if c.part <= 1], path
