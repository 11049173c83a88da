"""The leave-one-corpus-out calibration of "not covered" (tests/benchmarks/loco_coverage.py):
folds, headroom to the fitted threshold and the side-by-side listing, on known rows and on
an ``ai-eval --json``-shaped result."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks import loco_coverage as loco
from tests.benchmarks.loco_coverage import Fit, Row


def _row(corpus, answerable, best, margin=0.2, missed=0.0, fixed=None, qid="q"):
    return Row(corpus, answerable, best, margin, missed, fixed, qid, f"question {qid}")


def test_headroom_is_the_nearest_test_and_negative_when_refused():
    both = Fit(0.30, 0.05, 0.10)
    assert loco.headroom(_row("a", True, 0.45, 0.20, 0.5), both) == pytest.approx(0.10)
    assert loco.headroom(_row("a", True, 0.32, 0.30, 0.0), both) == pytest.approx(0.02)
    assert loco.headroom(_row("a", True, 0.25, 0.30, 0.0), both) == pytest.approx(-0.05)
    assert loco.headroom(_row("a", True, 0.9, fixed=True), both) is None
    assert loco.headroom(_row("a", True, 0.9), Fit(None, None, 0.0)) is None
    # no margin (an index without a pool edge): only the cosine floor counts
    assert loco.headroom(_row("a", True, 0.5, None), both) == pytest.approx(0.20)


def test_near_counts_answerable_questions_in_each_band():
    f = Fit(0.30, None, 0.0)
    rows = [_row("a", True, b) for b in (0.29, 0.305, 0.33, 0.40)]
    rows.append(_row("a", False, 0.301))      # unanswerable: not counted
    assert loco.near(rows, f) == "headroom min -0.0100 <0.02: 2 <0.05: 3"
    assert loco.near([_row("a", True, 0.5, fixed=True)], f) == "headroom -"


def test_fold_lines_report_refusals_catches_and_headroom():
    rows = ([_row("a", True, b, qid=f"a{i}") for i, b in enumerate((0.40, 0.50, 0.60))]
            + [_row("a", False, 0.30, qid="au")]
            + [_row("b", True, b, qid=f"b{i}") for i, b in enumerate((0.35, 0.55))]
            + [_row("b", False, 0.38, qid="bu"), _row("b", False, 0.1, fixed=False, qid="bn")])
    lines = loco.loco(rows, use_margin=False)
    # held out a: fitted on b (floor 0.35) -> a's answerable all stay, its unanswerable caught
    assert lines[0].startswith("held out a ")
    assert "min_score 0.3500" in lines[0] and "refused 0/3 ok caught 1/1" in lines[0]
    assert "headroom min +0.0500" in lines[0]
    # held out b: fitted on a (floor 0.40) -> b's 0.35 is refused, 0.38 and the unknown name caught
    assert "min_score 0.4000" in lines[1] and "refused 1/2 OVER caught 2/2" in lines[1]
    assert "headroom min -0.0500 <0.02: 1 <0.05: 1" in lines[1]
    assert lines[2] == "held-out pooled: refused 1/5 caught 3/3"
    assert lines[3].startswith("fit on all: min_score 0.3500")
    assert lines[3].endswith("refused 0 caught 2 | headroom min +0.0000 <0.02: 1 <0.05: 1")


def test_closest_lists_what_is_let_through_beside_the_nearest_answerable():
    f = Fit(0.35, None, 0.0)
    rows = [_row("a", True, 0.36, qid="near"), _row("a", True, 0.70, qid="far"),
            _row("a", True, 0.50, qid="mid"), _row("a", False, 0.60, qid="through"),
            _row("a", False, 0.20, qid="caught"), _row("a", False, 0.9, fixed=False, qid="name")]
    lines = loco.closest(rows, f, 2)
    assert lines[0] == "unanswerable let through:"
    assert [ln.split()[1] for ln in lines[1:2]] == ["through"]
    assert lines[2] == "answerable nearest the threshold (2):"
    assert [ln.split()[1] for ln in lines[3:]] == ["near", "mid"]
    assert "headroom +0.0100" in lines[3] and "question near" in lines[3]


def test_main_reads_an_ai_eval_result(tmp_path, capsys):
    def q(qid, answerable, best, unknown=()):
        return {"id": qid, "answerable": answerable, "query": f"question {qid}",
                "signals": {"best": best, "margin": 0.2, "missed_share": 0.1,
                            "unknown": list(unknown), "exact": False, "alias": False}}
    result = {"corpora": [
        {"repo": "/x/alpha", "questions": "alpha-qa.jsonl",
         "per_question": {"ours": [q("A1", True, 0.5), q("A2", False, 0.3)]}},
        {"repo": "/x/empty", "questions": "/e/notes-qa-dev.jsonl",
         "per_question": {"ours": [q("N1", True, 0.55), q("N2", False, 0.6, ["Zork"])]}}]}
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(result))
    assert loco.main([str(path), "--no-margin", "--closest", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("held out alpha ") and "caught 1/1" in out[0]
    assert out[1].startswith("held out notes ") and "refused 0/1 ok caught 1/1" in out[1]
    assert out[-3:] == [
        "unanswerable let through:",
        "answerable nearest the threshold (1):",
        "  alpha      A1     headroom +0.0000 best 0.5 margin 0.2000 missed 0.100 | "
        "question A1"]
