"""The metric code on hand-made cases, so the figures it reports are themselves tested."""

from __future__ import annotations

import json

import pytest

from varaverk.evaluation import (Outcome, Question, context_hit, first_hit_rank, format_table,
                                 is_hit, load_questions, run_setup, Setup, summarise, windows)

Q = Question(id="Q1", question="How long?", shape="configuration",
             gold=[{"path": "a.sh", "section": "CONFIGURATION", "title": "X"}],
             answer_contains=["300", "Seconds"])


def test_hit_rule_needs_gold_path_and_an_answer_string():
    assert is_hit("a.sh", "wait 300 s", Q)
    assert is_hit("a.sh", "SECONDS to wait", Q)  # case-insensitive
    assert not is_hit("b.sh", "wait 300 s", Q)   # wrong path
    assert not is_hit("a.sh", "wait a while", Q)


def test_first_hit_rank_and_context_hit():
    results = [("b.sh", "300 seconds"), ("a.sh", "nothing"), ("a.sh", "300")]
    assert first_hit_rank(results, Q) == 3
    assert context_hit(results, Q)  # every answer string is in the top text (any path)
    assert not context_hit([("a.sh", "300")], Q)  # "seconds" missing
    long = [("b.sh", "x" * 3990), ("a.sh", "300 seconds")]
    assert not context_hit(long, Q)  # cut at 4,000 characters
    assert context_hit(long, Q, budget=5000)


def test_summarise_values():
    outcomes = [
        Outcome("1", "configuration", True, 1, True, True),
        Outcome("2", "configuration", True, 4, False, True),
        Outcome("3", "design", True, None, False, False),
        Outcome("4", "design", True, 2, True, True),
        Outcome("5", "unanswerable", False, None, False, False),
        Outcome("6", "unanswerable", False, None, False, True),
    ]
    m = summarise(outcomes)
    assert m["overall"]["n"] == 4
    assert m["overall"]["recall@1"] == pytest.approx(0.25)
    assert m["overall"]["recall@5"] == pytest.approx(0.75)
    assert m["overall"]["mrr"] == pytest.approx((1 + 0.25 + 0 + 0.5) / 4)
    assert m["overall"]["context_hit"] == pytest.approx(0.5)
    assert m["overall"]["answered"] == pytest.approx(0.75)
    assert m["configuration"]["mrr"] == pytest.approx(0.625)
    assert m["design"]["recall@1"] == 0.0
    assert m["unanswerable"] == {"n": 2, "not_covered": 0.5}
    table = format_table({"ours": m})
    assert "| ours | overall | 4 | 0.250 | 0.750 | 0.750 | 0.438 | 0.500 | 0.750 | 0.500 of 2 |" in table


def test_run_setup_on_a_fixed_ranking(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [
        {"id": "A", "question": "q a", "shape": "design", "gold": [{"path": "a.md", "heading": "H"}],
         "answer_contains": ["alpha"]},
        {"id": "B", "question": "q b", "shape": "unanswerable", "gold": [], "answer_contains": []},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    qs = load_questions(path)
    setup = Setup("fixed", lambda query, k: ([("x.md", "alpha"), ("a.md", "Alpha!")][:k],
                                              query != "q b"))
    out = run_setup(setup, qs, {})
    assert [o.rank for o in out] == [2, None]
    assert [o.answered for o in out] == [True, False]
    assert summarise(out)["unanswerable"]["not_covered"] == 1.0


def test_bad_question_file_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "A", "question": "q"}\n{"nope": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_questions(path)


def test_windows_overlap():
    text = "".join(str(i % 10) for i in range(2500))
    w = windows(text)
    assert [len(x) for x in w] == [1000, 1000, 700]
    assert w[1][:100] == w[0][-100:]


MOVER_SH = """#!/usr/bin/env bash
# PURPOSE
#   Stops the array mover while another job needs the disks quiet.
#
# OPERATIONAL MODEL
#   It asks the mover to pause and waits for it to finish its current file.
#
# DESIGN PRINCIPLES
#   Waiting Beats Killing
#     A killed mover can leave a half-moved file behind.
#
# OPERATIONAL SAFEGUARDS
#   Kill Only After Timeout
#     The mover is killed only after the timeout has run out.
#
# CONFIGURATION
#   MOVER_STOP_TIMEOUT
#     Seconds to wait for the mover to finish before killing it (default: 300)
#
# RUNTIME MODES
#   --force
#     Kill at once without waiting.
echo body
"""


def test_ai_eval_smoke_on_a_tiny_repository(tmp_path, capsys):
    """ai-eval end to end: a real repository, real index, the offline embedder, four setups."""
    from tests.support.repos import make_repo
    from varaverk_tools.ai_eval import main

    repo = make_repo(tmp_path / "repo", {
        "Tools/mover_stop.sh": MOVER_SH,
        "README.md": "# Homelab\n\nNotes about the homelab.\n",
    })
    qa = tmp_path / "qa.jsonl"
    qa.write_text("\n".join(json.dumps(r) for r in [
        {"id": "A", "question": "What is MOVER_STOP_TIMEOUT?", "shape": "configuration",
         "gold": [{"path": "Tools/mover_stop.sh", "section": "CONFIGURATION",
                   "title": "MOVER_STOP_TIMEOUT"}], "answer_contains": ["300"]},
        {"id": "B", "question": "Where is the Kubernetes manifest?", "shape": "unanswerable",
         "gold": [], "answer_contains": []},
    ]) + "\n")
    code = main([str(qa), "--repo", str(repo), "--data-dir", str(tmp_path / "data"), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["setups"]) == {"baseline", "dense", "lexical", "ours"}
    ours = report["setups"]["ours"]
    assert ours["overall"]["n"] == 1
    assert ours["overall"]["recall@1"] == 1.0 and ours["overall"]["mrr"] == 1.0
    assert ours["overall"]["context_hit"] == 1.0
    assert ours["unanswerable"] == {"n": 1, "not_covered": 1.0}
    assert report["setups"]["lexical"]["unanswerable"]["not_covered"] is None
    # The baseline windows the whole script, so "300" is in its single window of that file.
    assert report["setups"]["baseline"]["overall"]["recall@5"] == 1.0
    assert [o["rank"] for o in report["per_question"]["ours"]] == [1, None]
