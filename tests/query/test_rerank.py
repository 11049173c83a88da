"""The optional /v1/rerank reranker: protocol against a real local HTTP server, failure kept
harmless, and the retriever's order when it is on."""

from __future__ import annotations

import math

import pytest

from tests.query.conftest import query_settings
from tests.support.repos import make_repo
from varaverk.retrieval.rerank import Reranker, _parse, make_reranker
from varaverk.config import Settings


def test_rerank_protocol_scores_align_with_the_documents(model_server):
    rr = Reranker(model_server.openai_base_url, model="bge-reranker", api_key="k1")
    docs = ["a mover stops an array", "nightly backup at 02:00 keeps fourteen snapshots",
            "backup snapshots nightly"]
    scores = rr.scores("when does the nightly backup run", docs)
    [req] = model_server.requests_to("/v1/rerank")
    assert req.json == {"model": "bge-reranker", "query": "when does the nightly backup run",
                        "documents": docs, "top_n": 3}
    assert req.headers["authorization"] == "Bearer k1"
    assert len(scores) == 3 and scores[0] < scores[2] and scores[0] < scores[1]
    assert all(math.isfinite(s) for s in scores)
    assert rr.scores("anything", []) == []
    rr.close()


def test_rerank_failures_cost_only_the_reranking(model_server, caplog):
    rr = Reranker(model_server.openai_base_url)
    model_server.fail_next("/v1/rerank", 500, {"error": "model not loaded"})
    assert rr.scores("q", ["a"]) is None
    assert "reranking at" in caplog.text and "keeping the fused order" in caplog.text
    model_server.fail_next("/v1/rerank", 200, {"unexpected": True})
    assert rr.scores("q", ["a"]) is None
    assert Reranker("http://127.0.0.1:9/v1", timeout=2).scores("q", ["a"]) is None


def test_rerank_answer_shapes():
    assert _parse({"results": [{"index": 1, "relevance_score": 0.9},
                               {"index": 0, "relevance_score": -2.5}]}, 2) == [-2.5, 0.9]
    assert _parse([{"index": 0, "score": 0.25}], 2) == [0.25, -math.inf]   # TEI's bare list
    with pytest.raises(ValueError):
        _parse({"results": [{"index": 5, "relevance_score": 1.0}]}, 2)


def test_reranker_is_off_unless_configured(model_server):
    assert make_reranker(Settings()) is None
    rr = make_reranker(Settings(ai_rerank_url=model_server.openai_base_url, ai_rerank_top_n=7))
    assert rr.top_n == 7 and rr.url == model_server.openai_base_url + "/rerank"


DOCS = {
    "docs/backup.md": ("# Backups\n\n## Schedule\n\nThe nightly backup job starts at 02:00.\n\n"
                       "## Retention\n\nSnapshots are kept for fourteen days, then pruned.\n\n"
                       "## Restore\n\nRestore a file from the newest snapshot with restic.\n"),
}


def test_retriever_takes_the_rerankers_order(tmp_path, model_server):
    from varaverk.index.refresh import refresh
    from varaverk.retrieval.search import Retriever
    repo = make_repo(tmp_path / "repo", DOCS)
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m")
    refresh(settings, progress=False)
    query = "restore snapshot restic newest file"
    plain = Retriever(settings, reranker=False).search(query, 3)
    reranked_settings = settings.replace(ai_rerank_url=model_server.openai_base_url)
    ranked = Retriever(reranked_settings).search(query, 3)
    assert [h.chunk.title for h in ranked][0] == "Restore"
    [req] = model_server.requests_to("/v1/rerank")
    assert req.json["query"] == query and len(req.json["documents"]) == len(plain)
    # the server's scores decide the order: descending relevance
    docs = req.json["documents"]
    assert [h.chunk.text for h in ranked] == sorted(
        docs, key=lambda d: -Reranker(model_server.openai_base_url).scores(query, [d])[0])
    model_server.fail_next("/v1/rerank", 503, "busy")
    fallback = Retriever(reranked_settings).search(query, 3)
    assert [h.chunk.id for h in fallback] == [h.chunk.id for h in plain]
