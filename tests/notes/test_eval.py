"""The notes question set through ai-eval, with the offline embedder: ours against the
fixed-window baseline on the tests' own vault, org-roam folder and chat exports."""

from __future__ import annotations

from pathlib import Path

from tests.notes.corpus import make_eval_corpus
from varaverk.config import Settings

from varaverk_tools.ai_eval import parse_corpora, run


def test_notes_question_set_recall_and_baseline(tmp_path):
    spec = make_eval_corpus(tmp_path / "corpus")
    settings = Settings(ai_repo_root=tmp_path / "corpus" / "repo", ai_data_dir=tmp_path / "data",
                        ai_log_dir=tmp_path / "log", ai_embed_backend="local")
    corpora = parse_corpora([spec], Path(settings.ai_repo_root))
    assert [len(c[2]) for c in corpora] == [3]
    result = run(settings, corpora, tmp_path / "eval", ["baseline", "ours"], "fallback", False)
    [report] = result["corpora"]
    ours, baseline = report["setups"]["ours"]["overall"], report["setups"]["baseline"]["overall"]
    assert ours["recall@5"] >= 0.90
    assert ours["recall@5"] > baseline["recall@5"] or ours["mrr"] > baseline["mrr"]
    assert report["setups"]["ours"]["unanswerable"]["n"] == 1
