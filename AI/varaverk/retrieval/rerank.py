"""Optional reranking of the leading candidates through a ``/v1/rerank`` server.

The protocol is the Jina/Cohere one that llama.cpp server (``--reranking``), vLLM, LocalAI and
Text Embeddings Inference accept::

    POST {AI_RERANK_URL}/rerank
    {"model": ..., "query": ..., "documents": [text, ...], "top_n": n}
    -> {"results": [{"index": i, "relevance_score": s}, ...]}

A bare list ``[{"index": i, "score": s}, ...]`` (TEI's native answer) is read as well. Scores
are only compared within one answer, so their scale does not matter. Off unless
``AI_RERANK_URL`` is set; any failure (unreachable, an error status, an answer that does not
parse) costs the reranking, never the query: ``scores`` returns None and the caller keeps the
fused order.

The answer is read within bounds (``varaverk.bounded_http``): the whole exchange within
AI_HTTP_TIMEOUT, at most MAX_ANSWER_BYTES decoded (a gzip bomb stops there), JSON nesting and
numbers checked, so a hostile or broken server costs one deadline and little memory.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

from varaverk.config import Settings

log = logging.getLogger(__name__)

DEFAULT_TOP_N = 20
# An answer is a few dozen bytes per document, or the documents again when a server echoes
# them: far below this, and the parsed JSON of a hostile answer stays tens of megabytes.
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class Reranker:
    """A ``/v1/rerank`` client.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8080/v1`` (``/rerank`` is appended).
        model: the reranking model's name as the server knows it ("" lets the server choose).
        api_key: sent as ``Authorization: Bearer`` when set.
        timeout: seconds the whole request may take (connect, send, answer).
        top_n: how many leading candidates are sent (``AI_RERANK_TOP_N``).
    """

    def __init__(self, base_url: str, model: str = "", api_key: str = "",
                 timeout: float = 30.0, top_n: int = DEFAULT_TOP_N) -> None:
        self.url = base_url.rstrip("/") + "/rerank"
        self.model = model
        self.top_n = max(1, int(top_n))
        self.timeout = timeout
        # httpx only once a reranker is configured: a search without one never loads it.
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
                                    headers=headers)

    def scores(self, query: str, documents: Sequence[str]) -> list[float] | None:
        """One relevance score per document (higher is more relevant), aligned with
        ``documents``; None when the server could not be used (logged as a warning)."""
        if not documents:
            return []
        import httpx

        from varaverk import bounded_http

        try:
            answer = bounded_http.fetch(
                self._client, "POST", self.url, deadline=self.timeout,
                max_bytes=MAX_ANSWER_BYTES, json={
                    "model": self.model, "query": query, "documents": list(documents),
                    "top_n": len(documents)})
            if answer.status_code != 200:
                raise ValueError(f"HTTP {answer.status_code}")
            return _parse(bounded_http.loads(answer.content), len(documents))
        except (httpx.HTTPError, bounded_http.BoundedReadError, ValueError) as exc:
            log.warning("reranking at %s failed (%s); keeping the fused order", self.url,
                        str(exc) or type(exc).__name__)
            return None

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


def _parse(payload, n: int) -> list[float]:
    """Scores aligned with the n documents from a rerank answer; documents the server left
    out score -inf. Raises ValueError for an answer of another shape (an index that is not
    an integer in range, a score that is not a finite number)."""
    items = payload.get("results") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise ValueError("rerank answer holds no results list")
    out = [-math.inf] * n
    for item in items:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score", item.get("score")) if index is not None else None
        if not _is_number(index, int) or not 0 <= index < n:
            raise ValueError(f"rerank result without a document index in range: {item!r:.80}")
        if not _is_number(score, (int, float)) or not math.isfinite(score):
            raise ValueError(f"rerank result without a finite score: {item!r:.80}")
        out[index] = float(score)
    return out


def _is_number(value, types) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def make_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None when ``AI_RERANK_URL`` is empty (the default)."""
    url = settings.ai_rerank_url.strip()
    if not url:
        return None
    return Reranker(url, settings.ai_rerank_model, settings.ai_rerank_api_key,
                    float(settings.ai_http_timeout), int(settings.ai_rerank_top_n))
