"""The metric code on hand-made cases, so the figures it reports are themselves tested."""

from __future__ import annotations

import json

import pytest

from varaverk.evaluation import (Outcome, Question, context_hit, first_hit_rank, format_table,
                                 is_hit, load_questions, macro_average, run_setup, Setup,
                                 summarise, windows)

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
    assert m["overall"]["refused"] == pytest.approx(0.25)
    assert "| ours | overall | 4 | 0.250 | 0.750 | 0.750 | 0.438 | 0.500 | – | 0.250 | 0.500 of 2 |" in table


def test_answer_strings_match_with_white_space_collapsed():
    q = Question(id="W", question="How long?", shape="design", gold=[{"path": "a.md"}],
                 answer_contains=["day and a half"])
    assert is_hit("a.md", "It takes a day\n   and  a\thalf.", q)
    assert context_hit([("b.md", "a DAY and\na half")], q)
    assert not is_hit("a.md", "a day and half", q)


def test_macro_average_weighs_each_corpus_once():
    big = summarise([Outcome(str(i), "design", True, 1, True, True) for i in range(9)]
                    + [Outcome("u", "unanswerable", False, None, False, False)])
    small = summarise([Outcome("1", "design", True, None, False, False),
                       Outcome("u1", "unanswerable", False, None, False, True),
                       Outcome("u2", "unanswerable", False, None, False, False)])
    macro = macro_average([big, small])
    assert macro["overall"]["n"] == 2
    assert macro["overall"]["recall@5"] == pytest.approx(0.5)   # (1.0 + 0.0) / 2, not 9/10
    assert macro["overall"]["mrr"] == pytest.approx(0.5)
    assert macro["overall"]["refused"] == pytest.approx(0.5)    # (0 + 1) / 2
    assert macro["unanswerable"] == {"n": 3, "not_covered": pytest.approx(0.75)}
    lexical = macro_average([{"overall": {**big["overall"], "refused": None}}])
    assert lexical["overall"]["refused"] is None and "unanswerable" not in lexical


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
    assert [o.prompt_hit for o in out] == [None, None]  # no prompt context: no prompt hit
    assert summarise(out)["overall"]["prompt_hit"] is None


def test_prompt_hit_judges_the_context_a_setup_packs(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"id": i, "question": i, "shape": "design", "gold": [{"path": "a.md"}],
             "answer_contains": ["alpha", "beta"]} for i in ("A", "B")]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    packed = {"A": "[a.md] Alpha and\nBETA", "B": "[a.md] alpha only"}
    setup = Setup("packed", lambda query, k: ([("a.md", "alpha beta")], True, packed[query]))
    out = run_setup(setup, load_questions(path), {})
    # The results hold both strings; only A's packed context does.
    assert [o.context_hit for o in out] == [True, True]
    assert [o.prompt_hit for o in out] == [True, False]
    assert summarise(out)["overall"]["prompt_hit"] == pytest.approx(0.5)
    assert "prompt_hit" in format_table({"packed": summarise(out)})


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
    result = json.loads(capsys.readouterr().out)
    [report] = result["corpora"]
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
    # What the "not covered" rule saw, per question: a tiny index has no pool edge (no
    # margin), the unknown name decided the unanswerable one.
    answerable, unanswerable = (o["signals"] for o in report["per_question"]["ours"])
    assert answerable["margin"] is None and answerable["unknown"] == []
    assert answerable["best"] >= 0.37 and answerable["words"] == 1
    assert unanswerable["unknown"] == ["Kubernetes"]
    assert unanswerable["absent"] == ["Kubernetes", "manifest"] and unanswerable["words"] == 2
    # Absent words are missed by every result; the answerable one's name is in its top hit.
    assert unanswerable["missed"] == ["Kubernetes", "manifest"]
    assert unanswerable["missed_share"] == 1.0
    assert answerable["missed"] == [] and answerable["missed_share"] == 0.0
    assert all(o["signals"] is None for o in report["per_question"]["lexical"])
    assert result["macro"]["ours"]["overall"]["recall@1"] == 1.0
    assert result["macro"]["ours"]["pooled"] == {"refused": 0, "answerable": 1, "caught": 1,
                                                  "unanswerable": 1}


def test_ai_eval_runs_several_corpora_and_reuses_vectors(tmp_path, capsys):
    """QA=REPO pairs: a table per corpus, then the macro average; a second run embeds nothing."""
    from tests.support.repos import make_repo
    from varaverk_tools.ai_eval import main

    mover = make_repo(tmp_path / "mover", {"Tools/mover_stop.sh": MOVER_SH})
    docs = make_repo(tmp_path / "docs", {"docs/backup.md": (
        "# Backups\n\n## Schedule\n\nThe nightly backup starts at 02:00 and keeps\n"
        "fourteen daily snapshots.\n")})
    qa1, qa2 = tmp_path / "mover.jsonl", tmp_path / "docs.jsonl"
    qa1.write_text(json.dumps({"id": "A", "question": "What is MOVER_STOP_TIMEOUT?",
                               "shape": "configuration", "gold": [{"path": "Tools/mover_stop.sh"}],
                               "answer_contains": ["300"]}) + "\n")
    qa2.write_text(json.dumps({"id": "B", "question": "When does the nightly backup start?",
                               "shape": "definitional", "gold": [{"path": "docs/backup.md"}],
                               "answer_contains": ["starts at 02:00 and keeps fourteen"]}) + "\n")
    args = [f"{qa1}={mover}", f"{qa2}={docs}", "--data-dir", str(tmp_path / "eval"),
            "--setups", "dense,ours"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "### mover.jsonl on mover" in out and "### docs.jsonl on docs" in out
    assert "### macro average over 2 corpora" in out
    assert "| ours | overall | 2 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 0.000 |" in out
    assert len(list((tmp_path / "eval" / "mover" / "indexes").glob("*.sqlite"))) == 1
    assert len(list((tmp_path / "eval" / "docs" / "indexes").glob("*.sqlite"))) == 1
    assert (tmp_path / "eval" / "vectors.sqlite").is_file()
    assert main(args + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["setups"]["ours"]["overall"]["context_hit"] for r in result["corpora"]] == [1.0, 1.0]


def test_ai_eval_names_a_pair_whose_repository_is_missing(tmp_path, capsys):
    from varaverk_tools.ai_eval import main
    qa = tmp_path / "qa.jsonl"
    qa.write_text("")
    assert main([f"{qa}={tmp_path / 'nowhere'}", "--data-dir", str(tmp_path / "e")]) == 78
    assert "nowhere is not a git repository" in capsys.readouterr().err


def test_caching_embedder_embeds_each_text_once_across_runs(tmp_path, model_server):
    """Vectors come back from the cache file by content hash; the server sees each text once."""
    import numpy as np
    from varaverk.embedding import OllamaEmbedder
    from varaverk.vector_cache import CachingEmbedder

    cache = tmp_path / "vectors.sqlite"
    with CachingEmbedder(OllamaEmbedder([model_server.base_url], model="m"), cache) as emb:
        first = emb.embed(["alpha beta", "gamma delta"])
        assert (emb.hits, emb.misses) == (0, 2)
        assert emb.backend == "ollama" and emb.model == "m"
    sent = len(model_server.requests_to("/api/embed"))
    with CachingEmbedder(OllamaEmbedder([model_server.base_url], model="m"), cache) as emb:
        again = emb.embed(["gamma delta", "alpha beta", "new words"])
        assert (emb.hits, emb.misses) == (2, 1)
        np.testing.assert_array_equal(again.vectors[0], first.vectors[1])
        np.testing.assert_array_equal(again.vectors[1], first.vectors[0])
        failed = emb.embed(["!!!"])    # the zero vector fails and is not cached
        assert failed.vectors == [None] and 0 in failed.errors
    assert len(model_server.requests_to("/api/embed")) == sent + 2
    with CachingEmbedder(OllamaEmbedder([model_server.base_url], model="other"), cache) as emb:
        emb.embed(["alpha beta"])
        assert emb.misses == 1          # another model's vectors are never reused
