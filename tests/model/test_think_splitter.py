"""ThinkSplitter: <think> blocks never leak into the answer (B25), however the deltas are cut."""

from __future__ import annotations

import pytest

from varaverk.answering.generation.think_tags import ThinkSplitter


def run(deltas):
    splitter = ThinkSplitter()
    pieces = []
    for delta in deltas:
        pieces += splitter.feed(delta)
    pieces += splitter.finish()
    return splitter, pieces


def test_b25a_tags_split_across_deltas():
    splitter, pieces = run(["<th", "ink>\nUser asks about backups.\n</th", "ink>\n\nBackups run at 02:00."])
    assert splitter.answer == "Backups run at 02:00."
    assert splitter.thinking == "User asks about backups."
    assert not splitter.unclosed
    assert all("<" not in text for _, text in pieces)
    assert "".join(t for k, t in pieces if k == "content") == "Backups run at 02:00."


def test_b25b_missing_opening_tag():
    splitter, pieces = run(["User asks about backups.\n", "</think>\n\nBackups run at 02:00."])
    assert splitter.answer == "Backups run at 02:00."
    assert splitter.thinking == "User asks about backups."
    # streamed first as content, then reclassified once the lone </think> showed what it was
    assert pieces[0] == ("content", "User asks about backups.\n")
    assert pieces[1] == ("reclassified", "User asks about backups.\n")


def test_b25c_unclosed_block_stays_thinking():
    splitter, _ = run(["<think>\nStill reasoning"])
    assert splitter.answer == ""
    assert splitter.thinking == "Still reasoning"
    assert splitter.unclosed


TEXT = "<think>\nweigh: a < b, and </thin is not a tag\n</think>\n\nAnswer <b>bold</b> and a < sign."


@pytest.mark.parametrize("cut", range(1, len(TEXT)))
def test_every_two_way_cut_gives_the_same_split(cut):
    splitter, _ = run([TEXT[:cut], TEXT[cut:]])
    assert splitter.thinking == "weigh: a < b, and </thin is not a tag"
    assert splitter.answer == "Answer <b>bold</b> and a < sign."


def test_character_by_character():
    splitter, _ = run(list(TEXT))
    assert splitter.answer == "Answer <b>bold</b> and a < sign."


def test_no_tags_is_all_answer_and_a_trailing_partial_tag_is_text():
    splitter, pieces = run(["Plain answer ", "ending in <th"])
    assert splitter.answer == "Plain answer ending in <th"
    assert splitter.thinking == ""
    assert {k for k, _ in pieces} == {"content"}
