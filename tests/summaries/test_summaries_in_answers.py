"""Summaries in answers: documents after the first few go to the model as their summaries,
labelled as summaries, with their citation; excerpts stay verbatim; --search shows none."""

from __future__ import annotations

import subprocess

from tests.index.conftest import cli_env
from tests.summaries.test_summary_pass import QUERY
from varaverk.answering.answer import TurnRequest, run_turn
from varaverk.answering.summary_context import SUMMARIES_HEADING
from varaverk.summaries.summary_pass import summarise

QUESTION = "backup pool offsite media library downloads mover parity fans disks"


def _prompt(settings, model_server) -> str:
    model_server.reset()
    events = list(run_turn(TurnRequest("varaverk", QUESTION, k=8), settings))
    assert events[-1].type == "done", events[-1].data
    chats = model_server.requests_to("/api/chat")
    assert len(chats) == 1
    return chats[0].json["messages"][-1]["content"]


def test_documents_after_the_first_go_as_labelled_summaries(indexed, model_server):
    summarise(indexed)
    # A small window (2,000 characters of context): the results' documents do not all fit.
    settings = indexed.replace(ai_summary_verbatim_docs=1, ai_gen_num_ctx=512)
    events = list(run_turn(TurnRequest("varaverk", QUESTION, k=8), settings))
    sources = next(e.data for e in events if e.type == "sources")
    ranked = list(dict.fromkeys(s["path"] for s in sources["sources"]))
    assert len(ranked) >= 3  # the results span several documents
    prompt = _prompt(settings, model_server)
    verbatim, _, summaries = prompt.partition(SUMMARIES_HEADING)
    assert verbatim.startswith("Documentation excerpts (verbatim):")
    assert f"[{ranked[0]}" in verbatim
    for path in ranked[1:]:
        assert f"[{path}]\n" in summaries  # each later document under its citation
        assert f"[{path} \u203a" not in verbatim  # and none of its excerpts verbatim
    if "Docs/README-Backup.md" in ranked[1:]:
        assert "Backup\nThe backup job copies the pool to the offsite disk" in summaries


def test_without_summaries_or_with_room_the_prompt_is_as_before(indexed, model_server):
    summarise(indexed)
    small = indexed.replace(ai_summary_verbatim_docs=1, ai_gen_num_ctx=512)
    off = _prompt(small.replace(ai_summaries="off"), model_server)
    assert SUMMARIES_HEADING not in off and off.startswith("Documentation excerpts:\n")
    few = _prompt(small.replace(ai_summary_verbatim_docs=50), model_server)
    assert SUMMARIES_HEADING not in few  # the first 50 documents go verbatim
    roomy = _prompt(indexed.replace(ai_summary_verbatim_docs=1, ai_gen_num_ctx=32768),
                    model_server)
    assert SUMMARIES_HEADING not in roomy  # every document fits verbatim: no summaries


def test_search_never_shows_a_summary(indexed):
    summarise(indexed)
    env = cli_env(indexed, AI_SUMMARIES="extractive", AI_SUMMARY_VERBATIM_DOCS="1")
    out = subprocess.run([*QUERY, "--search", "-k", "8", QUESTION], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Sections:" not in out.stdout and "Docs/README-Backup.md" in out.stdout
