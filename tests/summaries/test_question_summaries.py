"""AI_SUMMARIES=query: documents after the first few go to the model as summaries made for the
question (a request per document carrying the question and its matched passages), labelled
as such in the prompt; a failing or slow summariser falls back to the stored or extractive
summary and never fails the answer; --search is unaffected."""

from __future__ import annotations

import subprocess

from tests.index.conftest import cli_env
from tests.support.model_server import WORD
from tests.summaries.test_summaries_in_answers import QUESTION
from tests.summaries.test_summary_pass import QUERY
from varaverk.answering.answer import TurnRequest, run_turn
from varaverk.answering.query_focused_summary import SYSTEM, summarise_for_question
from varaverk.ledger.storage import read_rows
from varaverk.answering.summary_context import (QUESTION_SUMMARIES_HEADING, SUMMARIES_HEADING,
                                                question_section)
from varaverk.summaries.summary_pass import summarise

REPLY = ["Summary ", "made ", "for ", "the ", "question."]


def _query_settings(indexed, **changes):
    # A small window (2,000 characters of context): the results' documents do not all fit.
    base = dict(ai_summaries="query", ai_summary_verbatim_docs=1, ai_gen_num_ctx=512,
                ai_query_summary_docs=1)
    base.update(changes)
    return indexed.replace(**base)


def _turn(settings):
    events = list(run_turn(TurnRequest("varaverk", QUESTION, k=8), settings))
    assert events[-1].type == "done", events[-1].data
    sources = next(e.data for e in events if e.type == "sources")
    ranked = list(dict.fromkeys(s["path"] for s in sources["sources"]))
    return events[-1].data, ranked


def _summary_requests(model_server) -> list[str]:
    return [r.json["messages"][1]["content"] for r in model_server.requests_to("/api/chat")
            if r.json["messages"][0]["content"] == SYSTEM]


def _answer_prompt(model_server) -> str:
    answers = [r for r in model_server.requests_to("/api/chat")
               if r.json["messages"][0]["content"] != SYSTEM]
    assert len(answers) == 1
    return answers[0].json["messages"][-1]["content"]


def test_later_documents_go_as_summaries_made_for_the_question(indexed, model_server):
    settings = _query_settings(indexed, ai_query_summary_docs=1)
    model_server.script(content=REPLY)
    done, ranked = _turn(settings)
    assert len(ranked) >= 3  # one verbatim, one summarised for the question, one stored
    asked = _summary_requests(model_server)
    assert len(asked) == 1  # at most AI_QUERY_SUMMARY_DOCS per answer
    assert asked[0].startswith(f"Question: {QUESTION}\n")
    assert f"Passages of the document {ranked[1]} that matched this question" in asked[0]
    prompt = _answer_prompt(model_server)
    verbatim, _, summaries = prompt.partition(QUESTION_SUMMARIES_HEADING)
    assert verbatim.startswith("Documentation excerpts (verbatim):")
    made, _, stored = summaries.partition(SUMMARIES_HEADING)
    assert f"[{ranked[1]}]\nSummary made for the question." in made
    for path in ranked[2:]:  # no stored summaries: the extractive one, made on the spot
        assert f"[{path}]\n" in stored and f"[{path}]\nSummary made" not in stored
    assert done["timings"]["question_summaries_s"] >= 0
    # Not cached: the same question asks again.
    model_server.reset()
    model_server.script(content=REPLY)
    _turn(settings)
    assert len(_summary_requests(model_server)) == 1


def _prompt_tokens_sent(model_server) -> int:
    """The prompt tokens the test server reported over all its chat requests."""
    total = 0
    for r in model_server.requests_to("/api/chat"):
        words = sum(len(WORD.findall(m["content"])) for m in r.json["messages"])
        total += min(words, r.json["options"]["num_ctx"])
    return total


def test_the_answer_s_ledger_row_counts_the_summaries_made_for_it(indexed, model_server,
                                                                   tmp_path):
    # They used to be left out: with AI_SUMMARIES=query an ask can cost several times its
    # answer's own turn.
    settings = _query_settings(indexed, ai_query_summary_docs=2)
    model_server.script(content=REPLY)
    ledger = tmp_path / "tokens.db"
    events = list(run_turn(TurnRequest("varaverk", QUESTION, k=8), settings,
                           ledger_path=ledger, host="h1"))
    assert events[-1].type == "done"
    turns = len(model_server.requests_to("/api/chat"))
    assert turns == 1 + len(_summary_requests(model_server)) == 3
    [row], problems = read_rows(ledger)
    assert problems == [] and (row.host, row.profile, row.source) == ("h1", "varaverk", "cli")
    assert row.completion_tokens == turns * len(REPLY)
    assert row.prompt_tokens == _prompt_tokens_sent(model_server)
    assert row.tok_s == 20.0  # the answer's own speed


def test_an_unreported_count_leaves_the_ask_s_total_unknown(indexed, model_server, tmp_path):
    model_server.script(content=REPLY)
    model_server.omit_prompt_eval_count = True
    ledger = tmp_path / "tokens.db"
    list(run_turn(TurnRequest("varaverk", QUESTION, k=8), _query_settings(indexed),
                  ledger_path=ledger, host="h1"))
    [row], _ = read_rows(ledger)
    assert row.prompt_tokens is None and row.completion_tokens == 2 * len(REPLY)


def test_a_failing_summariser_falls_back_to_the_stored_summary(indexed, model_server):
    assert summarise(indexed.replace(ai_summaries="query")).model == "extractive"
    settings = _query_settings(indexed, ai_query_summary_docs=2)
    model_server.fail_next("/api/chat", 500, times=2)  # both summaries; not the answer
    done, ranked = _turn(settings)
    assert len(_summary_requests(model_server)) == 2
    prompt = _answer_prompt(model_server)
    assert QUESTION_SUMMARIES_HEADING not in prompt
    _, _, stored = prompt.partition(SUMMARIES_HEADING)
    if "Docs/README-Backup.md" in ranked[1:]:
        assert "[Docs/README-Backup.md]\nBackup\nThe backup job copies the pool" in stored
    for path in ranked[1:]:
        assert f"[{path}]\n" in stored
    assert done["answer"]


def test_a_slow_summariser_is_cut_at_the_time_budget(indexed, model_server):
    settings = _query_settings(indexed, ai_query_summary_docs=3, ai_query_summary_seconds=1)
    model_server.script(content=["slow ", "summary ", "words"])
    model_server.delta_delay = 0.6  # every reply takes about 2.4 s: past the budget
    done, ranked = _turn(settings)
    assert len(_summary_requests(model_server)) == 1  # the budget was spent on the first
    assert 1.0 <= done["timings"]["question_summaries_s"] < 2.3  # a reply takes 2.4 s
    prompt = _answer_prompt(model_server)
    assert QUESTION_SUMMARIES_HEADING not in prompt
    assert all(f"[{p}]\n" in prompt.partition(SUMMARIES_HEADING)[2] for p in ranked[1:])


def test_no_server_means_one_attempt_and_every_document_falls_back(indexed):
    from tests.support.model_server import ModelServer
    from varaverk.answering.generation.ollama import OllamaChatClient

    dead = ModelServer().start()
    url = dead.base_url
    dead.stop()  # nothing listens there any more
    clients = []

    def client_for(seconds):
        clients.append(seconds)
        return OllamaChatClient([url], "m", 2048, seconds)

    made = summarise_for_question("q", [("a.md", []), ("b.md", []), ("c.md", [])], client_for,
                                  max_docs=2, seconds=10)
    assert made.texts == {} and len(clients) == 1  # unreachable once: not asked again
    assert [p for p, _ in made.fell_back] == ["a.md", "b.md"]


def test_ai_query_answers_with_summaries_made_for_the_question(indexed, model_server):
    env = cli_env(indexed, AI_SUMMARIES="query", AI_SUMMARY_VERBATIM_DOCS="1",
                  AI_GEN_NUM_CTX="512", AI_GEN_BACKEND="ollama", AI_GEN_MODEL="m",
                  AI_QUERY_SUMMARY_DOCS="1")
    model_server.script(content=REPLY)
    out = subprocess.run([*QUERY, "-k", "8", QUESTION], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "Summary made for the question." in out.stdout
    assert len(_summary_requests(model_server)) == 1
    assert QUESTION_SUMMARIES_HEADING in _answer_prompt(model_server)


def test_search_asks_no_model_and_shows_no_summary(indexed, model_server):
    env = cli_env(indexed, AI_SUMMARIES="query", AI_SUMMARY_VERBATIM_DOCS="1",
                  AI_GEN_NUM_CTX="512")
    out = subprocess.run([*QUERY, "--search", "-k", "8", QUESTION], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Docs/README-Backup.md" in out.stdout and "Sections:" not in out.stdout
    assert not model_server.requests_to("/api/chat")


def test_the_section_puts_question_summaries_first_within_the_budget():
    paths = ["a.md", "b.md", "c.md"]
    made = {"b.md": "made for the question"}
    stored = {"a.md": "stored a", "b.md": "stored b", "c.md": "x" * 500}
    section, included = question_section(paths, made, stored, 700)
    assert included == ["b.md", "a.md"]  # c.md's summary does not fit what is left
    assert section == "\n\n".join([QUESTION_SUMMARIES_HEADING, "[b.md]\nmade for the question",
                                   SUMMARIES_HEADING, "[a.md]\nstored a"])
    assert question_section(paths, {}, {}, 1000) == ("", [])
