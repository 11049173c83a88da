"""A real, deterministic model server on 127.0.0.1 speaking Ollama and OpenAI-compatible HTTP.

Tests talk to it over real sockets (httpx, urllib, anything), so protocol handling, streaming,
malformed answers and failures are exercised for real. Start it as a context manager or use the
``model_server`` pytest fixture (tests/conftest.py)::

    with ModelServer() as server:
        httpx.post(server.base_url + "/api/embed", json={"model": "m", "input": ["a b"]})
        assert server.requests[-1].path == "/api/embed"

Endpoints
---------
Ollama (base ``server.base_url``, e.g. ``http://127.0.0.1:PORT``):
  ``GET /api/tags``          ``{"models": [{"name": ...}, ...]}`` (503 when ``healthy`` is False)
  ``POST /api/embed``        ``{"model", "input": str | [str]}`` → ``{"model", "embeddings": [[...]],
                             "prompt_eval_count"}``; vectors L2-normalised (as real Ollama does)
  ``POST /api/embeddings``   legacy ``{"model", "prompt"}`` → ``{"embedding": [...]}``, NOT normalised
                             (the bag-of-words counts times 3)
  ``POST /api/chat``         NDJSON stream (or one object with ``"stream": false``): lines
                             ``{"model","created_at","message":{"role":"assistant","content"[,"thinking"]},
                             "done":false}`` then a final line with ``done: true``, ``done_reason``,
                             ``total_duration``, ``load_duration``, ``prompt_eval_count``,
                             ``prompt_eval_duration``, ``eval_count`` (one per delta) and
                             ``eval_duration`` (50 ms per delta in ns, so tok/s is 20.0).
                             ``prompt_eval_count`` counts the prompt's words, but at most
                             ``options.num_ctx`` (Ollama cuts a longer prompt to its window).
OpenAI-compatible (base ``server.openai_base_url`` = ``base_url + "/v1"``):
  ``GET /v1/models``         ``{"object":"list","data":[{"id":...}]}``
  ``POST /v1/embeddings``    ``{"model","input": str | [str]}`` → ``{"object":"list","data":[{"object":
                             "embedding","index":i,"embedding":[...]}], "usage"}``; items are sent in
                             REVERSED order (clients must place them by ``index``) and NOT normalised
                             while ``openai_shuffle`` / ``openai_unnormalised`` are True (default).
  ``POST /v1/rerank``        ``{"model","query","documents":[str],"top_n"}`` → ``{"results":[{"index",
                             "relevance_score"}]}`` best first (Jina/Cohere protocol of llama.cpp
                             server, vLLM and LocalAI); score = cosine of the bag-of-words vectors
  ``POST /v1/chat/completions`` SSE ``data: {chunk}\\n\\n`` lines with ``choices[0].delta.content`` (and
                             ``delta.reasoning_content`` for thinking deltas), a last choice chunk with
                             ``finish_reason``, a usage chunk (``choices: []``) ONLY when the request had
                             ``stream_options.include_usage``, then ``data: [DONE]``. Non-streaming
                             requests get one ``chat.completion`` object with usage.
Streams use HTTP/1.1 chunked transfer encoding, so a dropped connection is visible to clients.

Deterministic behaviour
-----------------------
Embeddings: a hashed bag of words. Lower-cased ``\\w+`` tokens are hashed (md5) into ``dim`` buckets
and counted, so texts sharing words have a high cosine similarity and unrelated texts a low one.
``dim`` is ``dims[model]`` when the model is listed there, else ``default_dim`` (64). A text with no
word characters embeds to the zero vector (clients must reject it, B19). ``embed_vector(text, dim)``
is the same function for tests to compute expected values.

Chat: unless scripted, the reply quotes the first ``[...]`` label found in the messages (system
first, then in order), e.g. ``According to [Backup/rsync_mirror.sh › PURPOSE], this is covered.``,
streamed word by word; without any label it answers ``The context does not cover this.``.
``reply_for(messages)`` returns that text for assertions.

Knobs (plain attributes; set them before the request, they are read per request)
--------------------------------------------------------------------------------
  ``dims: dict[str, int]``          embedding dimension per model name (default {} → default_dim)
  ``default_dim: int``              64
  ``models: list[str]``             names listed by /api/tags and /v1/models
  ``known_models: set[str] | None`` when set, other model names get Ollama's 404
                                    ``model "x" not found, try pulling it first`` (OpenAI: 404 error object)
  ``healthy: bool``                 False → /api/tags and /v1/models answer 503
  ``tags_delay: float``             seconds /api/tags waits before answering (a busy host), default 0
  ``disabled_paths: set[str]``      paths answering 404 ``404 page not found`` (e.g. {"/api/embed"}
                                    for an old Ollama that only has /api/embeddings)
  ``api_key: str | None``           when set, /v1/* requires ``Authorization: Bearer <api_key>`` (else 401)
  ``nan_marker: str | None``        "NaN!" by default: an embed input containing it makes Ollama's
                                    /api/embed and /api/embeddings answer HTTP 500
                                    ``{"error":"failed to encode response: json: unsupported value: NaN"}``
                                    for the whole request (B19a); /v1/embeddings writes a literal ``NaN``
                                    as the first component of that item's vector (B19b)
  ``max_input_chars: int | None``   an embed input longer than this is answered with HTTP 400
                                    ``{"error":"the input length exceeds the context length"}`` (Ollama) or
                                    ``{"error":{"message": same, ...}}`` (OpenAI) for the whole request (B18)
  ``openai_shuffle: bool``          True: /v1/embeddings data in reversed order
  ``openai_unnormalised: bool``     True: /v1/embeddings vectors scaled by 3 (not unit length)
  ``openai_base64: bool``           True: /v1/embeddings answers every vector as base64 of its
                                    little-endian float32 bytes, whatever ``encoding_format`` asked
                                    (as servers defaulting to base64 do); default False
  ``fail_next(path, status, body, times=1)``  the next ``times`` requests to ``path`` answer ``status``
                                    with ``body`` (dict → JSON, str → text) before anything else
  ``script(content=[...], thinking=[...], done_reason="stop")``  scripted chat deltas: thinking deltas
                                    first, then content deltas (raw strings, sent as given)
  ``deltas: list[tuple[str, str]] | None``  full control: ("content"|"thinking", text) in order
  ``done_reason: str``              "stop" (scripted "length" marks truncation, B25c)
  ``delta_delay: float``            seconds to sleep before each delta (streaming tests), default 0
  ``stream_error: str | None``      after ``stream_error_after`` deltas, send an error line/event
                                    (Ollama ``{"error": msg}``; OpenAI ``data: {"error":{"message": msg}}``)
                                    and end the stream without a done line
  ``stream_error_after: int``       default 1
  ``drop_after: int | None``        after this many deltas, close the socket mid-body (no final chunk)
  ``omit_prompt_eval_count: bool``  leave prompt_eval_count and prompt_eval_duration out of the final
                                    Ollama line (B27)
  ``final_overrides: dict``         merged into the final Ollama line; a value of None removes the key
                                    (e.g. {"eval_duration": None})
  ``created_at: str | None``        Ollama ``created_at`` of every line (default: now, RFC 3339 UTC)
  ``raw_chat_chunks: list[bytes] | None``  answer /api/chat and /v1/chat/completions with exactly these
                                    byte strings, each written and flushed as its own chunk with
                                    ``raw_chunk_delay`` (0.05 s) between them (B23 split reads)

Recording: every request is appended to ``server.requests`` as ``Recorded(method, path, json,
headers)`` (``json`` is the parsed body or None; header names lower-cased). ``requests_to(path)``
filters them. ``reset()`` clears recorded requests and restores every knob to its default.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NAN_ERROR = "failed to encode response: json: unsupported value: NaN"
TOO_LONG_ERROR = "the input length exceeds the context length"
WORD = re.compile(r"\w+")
LABEL = re.compile(r"\[([^\[\]\n]{1,300})\]")
EVAL_NS_PER_TOKEN = 50_000_000  # 20 tokens per second


def embed_vector(text: str, dim: int = 64) -> list[float]:
    """The server's raw (unnormalised) bag-of-words vector of ``text``: ``dim`` floats (counts)."""
    vec = [0.0] * dim
    for token in WORD.findall(text.lower()):
        bucket = int.from_bytes(hashlib.md5(token.encode("utf-8")).digest()[:8], "big") % dim
        vec[bucket] += 1.0
    return vec


def _normalised(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


def reply_for(messages: list[dict[str, Any]]) -> str:
    """The default deterministic chat answer for ``messages`` (see the module docstring)."""
    for message in messages:
        match = LABEL.search(str(message.get("content") or ""))
        if match:
            return f"According to [{match.group(1)}], this is covered."
    return "The context does not cover this."


def _words(text: str) -> list[str]:
    """Split into deltas that concatenate back to ``text`` exactly ("a b" → "a", " b")."""
    return re.findall(r"\s*\S+", text) or [text]


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    json: Any
    headers: dict[str, str] = field(default_factory=dict)


_DEFAULTS: dict[str, Any] = {
    "dims": dict,
    "default_dim": 64,
    "models": lambda: ["nomic-embed-text", "all-minilm", "qwen2.5:3b", "m"],
    "known_models": None,
    "healthy": True,
    "tags_delay": 0.0,
    "disabled_paths": set,
    "api_key": None,
    "nan_marker": "NaN!",
    "max_input_chars": None,
    "openai_shuffle": True,
    "openai_unnormalised": True,
    "openai_base64": False,
    "deltas": None,
    "done_reason": "stop",
    "delta_delay": 0.0,
    "stream_error": None,
    "stream_error_after": 1,
    "drop_after": None,
    "omit_prompt_eval_count": False,
    "final_overrides": dict,
    "created_at": None,
    "raw_chat_chunks": None,
    "raw_chunk_delay": 0.05,
}


class _Server(ThreadingHTTPServer):
    """Serves each connection on a daemon thread; a client that hangs up mid-answer (a
    stopped stream, a deadline) is expected and printed nowhere. A traceback printed in a
    handler's thread runs ``ast.parse`` there on Python 3.11 (the caret under the failing
    expression), and beside another thread's parse CPython gh-106905 failed that one with
    "AST constructor recursion depth mismatch"."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError,
                                              ConnectionAbortedError)):
            super().handle_error(request, client_address)


class ModelServer:
    """The server; see the module docstring for endpoints and knobs.

    Attributes:
        base_url: ``http://127.0.0.1:PORT`` (Ollama API root), set once started.
        openai_base_url: ``base_url + "/v1"``.
        requests: every request received, in order.
    """

    def __init__(self, **knobs: Any) -> None:
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._failures: dict[str, list[tuple[int, Any]]] = {}
        self._httpd: _Server | None = None
        self._connections: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        self.reset()
        for key, value in knobs.items():
            if key not in _DEFAULTS:
                raise TypeError(f"unknown ModelServer knob: {key}")
            setattr(self, key, value)

    # -- control -------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget recorded requests and pending failures; restore every knob to its default."""
        for key, default in _DEFAULTS.items():
            setattr(self, key, default() if callable(default) else default)
        with self._lock:
            self.requests.clear()
            self._failures.clear()

    def fail_next(self, path: str, status: int = 500, body: Any = None, times: int = 1) -> None:
        """Answer the next ``times`` requests to ``path`` with ``status`` and ``body``.

        ``body`` as dict/list is sent as JSON, as str as text/plain; None sends
        ``{"error": "injected failure"}``.
        """
        payload = {"error": "injected failure"} if body is None else body
        with self._lock:
            self._failures.setdefault(path, []).extend([(status, payload)] * times)

    def script(self, content: list[str] | None = None, thinking: list[str] | None = None,
               done_reason: str = "stop") -> None:
        """Script the next chat replies: thinking deltas, then content deltas, then done."""
        self.deltas = [("thinking", t) for t in thinking or []] + \
                      [("content", c) for c in content or []]
        self.done_reason = done_reason

    def requests_to(self, path: str) -> list[Recorded]:
        """The recorded requests whose path is ``path``."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def dim_for(self, model: str) -> int:
        """The embedding dimension the server uses for ``model``."""
        return self.dims.get(model, self.default_dim)

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ModelServer is not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def start(self) -> "ModelServer":
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        handler = type("Handler", (_Handler,), {"model_server": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the listening socket and every open connection (like a dead host)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            with self._lock:
                open_connections = list(self._connections)
            for conn in open_connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- internals used by the handler ---------------------------------------------------------
    def _record(self, rec: Recorded) -> tuple[int, Any] | None:
        with self._lock:
            self.requests.append(rec)
            pending = self._failures.get(rec.path)
            return pending.pop(0) if pending else None

    def _now(self) -> str:
        if self.created_at:
            return self.created_at
        return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")

    def _chat_deltas(self, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
        if self.deltas is not None:
            return list(self.deltas)
        return [("content", w) for w in _words(reply_for(messages))]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections end on their own
    model_server: ModelServer

    def setup(self) -> None:
        super().setup()
        with self.model_server._lock:
            self.model_server._connections.add(self.connection)

    def finish(self) -> None:
        with self.model_server._lock:
            self.model_server._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
        pass

    # -- plumbing ------------------------------------------------------------------------------
    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _send(self, status: int, payload: Any, content_type: str | None = None) -> None:
        if isinstance(payload, (bytes, bytearray)):
            data = bytes(payload)
        elif isinstance(payload, str):
            data = payload.encode("utf-8")
            content_type = content_type or "text/plain; charset=utf-8"
        else:
            data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type or "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        if data:  # an empty chunk would end the body
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection mid-body: the client sees an incomplete chunked message."""
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def _dispatch(self, method: str) -> None:
        srv = self.model_server
        path = self.path.split("?", 1)[0]
        body = self._body() if method == "POST" else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        failure = srv._record(Recorded(method, path, body, headers))
        if failure is not None:
            self._send(*failure)
            return
        if path in srv.disabled_paths:
            self._send(404, "404 page not found")
            return
        if path.startswith("/v1/") and srv.api_key is not None:
            if headers.get("authorization") != f"Bearer {srv.api_key}":
                self._send(401, {"error": {"message": "Invalid API key provided",
                                           "type": "invalid_request_error"}})
                return
        route = _ROUTES.get((method, path))
        if route is None:
            self._send(404, "404 page not found")
            return
        if method == "POST" and not isinstance(body, dict):
            self._send(400, {"error": "invalid JSON body"})
            return
        route(self, body or {})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _unknown_model(self, model: str, openai: bool) -> bool:
        known = self.model_server.known_models
        if known is None or model in known:
            return False
        msg = f'model "{model}" not found, try pulling it first'
        self._send(404, {"error": {"message": msg, "type": "not_found"}} if openai else {"error": msg})
        return True

    # -- Ollama --------------------------------------------------------------------------------
    def api_tags(self, _body) -> None:
        srv = self.model_server
        if srv.tags_delay:
            time.sleep(srv.tags_delay)
        if not srv.healthy:
            self._send(503, {"error": "server busy"})
            return
        self._send(200, {"models": [{"name": m, "model": m} for m in srv.models]})

    def _embed_check(self, inputs: list[str], openai: bool) -> bool:
        """Whole-request failures shared by the embed endpoints; True when an answer was sent."""
        srv = self.model_server
        if srv.max_input_chars is not None and any(len(t) > srv.max_input_chars for t in inputs):
            self._send(400, {"error": {"message": TOO_LONG_ERROR, "type": "invalid_request_error"}}
                       if openai else {"error": TOO_LONG_ERROR})
            return True
        if not openai and srv.nan_marker and any(srv.nan_marker in t for t in inputs):
            self._send(500, {"error": NAN_ERROR})
            return True
        return False

    def _embed_request(self, body, openai: bool) -> tuple[str, list[str]] | None:
        """``(model, inputs)`` of a batch embedding request (``input``: a string or a list);
        None when it was answered already with an error."""
        model = str(body.get("model", ""))
        raw = body.get("input", [])
        inputs = [raw] if isinstance(raw, str) else [str(t) for t in raw]
        if self._unknown_model(model, openai=openai) or self._embed_check(inputs, openai=openai):
            return None
        return model, inputs

    def api_embed(self, body) -> None:
        srv = self.model_server
        request = self._embed_request(body, openai=False)
        if request is None:
            return
        model, inputs = request
        dim = srv.dim_for(model)
        vectors = [_normalised(embed_vector(t, dim)) for t in inputs]
        tokens = sum(len(WORD.findall(t)) for t in inputs)
        self._send(200, {"model": model, "embeddings": vectors, "total_duration": 1000000,
                         "load_duration": 1000, "prompt_eval_count": tokens})

    def api_embeddings(self, body) -> None:
        srv = self.model_server
        model = str(body.get("model", ""))
        prompt = str(body.get("prompt", ""))
        if self._unknown_model(model, openai=False) or self._embed_check([prompt], openai=False):
            return
        self._send(200, {"embedding": [3.0 * x for x in embed_vector(prompt, srv.dim_for(model))]})

    def _chat_turn(self, body, openai: bool) -> tuple[str, list[tuple[str, str]], int] | None:
        """``(model, deltas, prompt_tokens)`` of a chat request; None when it was answered
        already (an unknown model, or a scripted raw stream)."""
        srv = self.model_server
        model = str(body.get("model", ""))
        if self._unknown_model(model, openai=openai):
            return None
        messages = body.get("messages") or []
        if srv.raw_chat_chunks is not None:
            self._raw_stream("text/event-stream" if openai else "application/x-ndjson")
            return None
        prompt_tokens = sum(len(WORD.findall(str(m.get("content") or ""))) for m in messages)
        num_ctx = (body.get("options") or {}).get("num_ctx")
        if not openai and isinstance(num_ctx, int) and prompt_tokens > num_ctx:
            prompt_tokens = num_ctx  # as Ollama does: the prompt is cut to the window
        return model, srv._chat_deltas(messages), prompt_tokens

    @staticmethod
    def _joined(deltas: list[tuple[str, str]]) -> tuple[str, str]:
        """The whole ``(content, thinking)`` of a reply that is not streamed."""
        return ("".join(t for kind, t in deltas if kind == "content"),
                "".join(t for kind, t in deltas if kind == "thinking"))

    def api_chat(self, body) -> None:
        srv = self.model_server
        turn = self._chat_turn(body, openai=False)
        if turn is None:
            return
        model, deltas, prompt_tokens = turn
        final: dict[str, Any] = {
            "model": model, "created_at": srv._now(),
            "message": {"role": "assistant", "content": ""}, "done": True,
            "done_reason": srv.done_reason,
            "total_duration": 5_000_000 + EVAL_NS_PER_TOKEN * len(deltas),
            "load_duration": 1_000_000,
            "prompt_eval_count": prompt_tokens, "prompt_eval_duration": 2_000_000,
            "eval_count": len(deltas), "eval_duration": EVAL_NS_PER_TOKEN * len(deltas),
        }
        if srv.omit_prompt_eval_count:
            final.pop("prompt_eval_count")
            final.pop("prompt_eval_duration")
        for key, value in srv.final_overrides.items():
            if value is None:
                final.pop(key, None)
            else:
                final[key] = value
        if body.get("stream") is False:
            content, thinking = self._joined(deltas)
            final["message"] = {"role": "assistant", "content": content}
            if thinking:
                final["message"]["thinking"] = thinking
            self._send(200, final)
            return
        self._start_stream("application/x-ndjson")
        for i, (kind, text) in enumerate(deltas):
            if self._interrupt(i, lambda msg: json.dumps({"error": msg}).encode() + b"\n"):
                return
            message = {"role": "assistant", "content": text if kind == "content" else ""}
            if kind == "thinking":
                message["thinking"] = text
            line = {"model": model, "created_at": srv._now(), "message": message, "done": False}
            self._chunk(json.dumps(line).encode("utf-8") + b"\n")
        if self._interrupt(len(deltas), lambda msg: json.dumps({"error": msg}).encode() + b"\n"):
            return
        self._chunk(json.dumps(final).encode("utf-8") + b"\n")
        self._end_stream()

    def _interrupt(self, i: int, error_line) -> bool:
        """Before delta ``i``: sleep, then inject a stream error or a dropped connection."""
        srv = self.model_server
        if srv.delta_delay:
            time.sleep(srv.delta_delay)
        if srv.stream_error is not None and i == srv.stream_error_after:
            self._chunk(error_line(srv.stream_error))
            self._end_stream()
            return True
        if srv.drop_after is not None and i == srv.drop_after:
            self._drop()
            return True
        return False

    def _raw_stream(self, content_type: str) -> None:
        srv = self.model_server
        self._start_stream(content_type)
        for i, piece in enumerate(srv.raw_chat_chunks):
            if i:
                time.sleep(srv.raw_chunk_delay)
            self._chunk(piece)
        self._end_stream()

    # -- OpenAI-compatible ---------------------------------------------------------------------
    def v1_models(self, _body) -> None:
        srv = self.model_server
        if not srv.healthy:
            self._send(503, {"error": {"message": "server busy", "type": "server_error"}})
            return
        self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"}
                                                    for m in srv.models]})

    def v1_embeddings(self, body) -> None:
        srv = self.model_server
        request = self._embed_request(body, openai=True)
        if request is None:
            return
        model, inputs = request
        dim = srv.dim_for(model)
        items = []
        for i, text in enumerate(inputs):
            vec = embed_vector(text, dim)
            vec = [3.0 * x for x in vec] if srv.openai_unnormalised else _normalised(vec)
            if srv.nan_marker and srv.nan_marker in text:
                vec[0] = math.nan  # json.dumps writes a bare NaN, as non-Go servers do (B19b)
            if srv.openai_base64:
                vec = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
            items.append({"object": "embedding", "index": i, "embedding": vec})
        if srv.openai_shuffle:
            items.reverse()
        parts = [json.dumps(item) for item in items]
        tokens = sum(len(WORD.findall(t)) for t in inputs)
        payload = ('{"object": "list", "model": %s, "data": [%s], "usage": '
                   '{"prompt_tokens": %d, "total_tokens": %d}}'
                   % (json.dumps(model), ", ".join(parts), tokens, tokens))
        self._send(200, payload.encode("utf-8"), "application/json")

    def v1_rerank(self, body) -> None:
        """Jina/Cohere-style rerank (llama.cpp server, vLLM, LocalAI; TEI answers a bare list):
        ``{"model", "query", "documents": [str], "top_n"}`` -> ``{"results": [{"index",
        "relevance_score"}]}`` best first; the score is the cosine of the bag-of-words vectors
        (``embed_vector``), so documents sharing the query's words rank first."""
        model = str(body.get("model", ""))
        if self._unknown_model(model, openai=True):
            return
        query = _normalised(embed_vector(str(body.get("query", "")), 256))
        docs = [str(d) for d in body.get("documents", [])]
        scores = [sum(a * b for a, b in zip(query, _normalised(embed_vector(d, 256))))
                  for d in docs]
        order = sorted(range(len(docs)), key=lambda i: (-scores[i], i))
        top_n = int(body.get("top_n") or len(docs))
        results = [{"index": i, "relevance_score": round(scores[i], 6)} for i in order[:top_n]]
        self._send(200, {"model": model, "results": results,
                         "usage": {"total_tokens": sum(len(WORD.findall(d)) for d in docs)}})

    def v1_chat(self, body) -> None:
        srv = self.model_server
        turn = self._chat_turn(body, openai=True)
        if turn is None:
            return
        model, deltas, prompt_tokens = turn
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(deltas),
                 "total_tokens": prompt_tokens + len(deltas)}
        finish = srv.done_reason
        created = int(time.time())
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": created,
                "model": model}
        if not body.get("stream"):
            content, thinking = self._joined(deltas)
            message = {"role": "assistant", "content": content}
            if thinking:
                message["reasoning_content"] = thinking
            self._send(200, {**base, "object": "chat.completion",
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                             "usage": usage})
            return

        def event(obj: Any) -> bytes:
            return b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n"

        def error_event(msg: str) -> bytes:
            return event({"error": {"message": msg, "type": "server_error"}})

        self._start_stream("text/event-stream")
        for i, (kind, text) in enumerate(deltas):
            if self._interrupt(i, error_event):
                return
            delta = {"content": text} if kind == "content" else {"reasoning_content": text}
            if i == 0:
                delta = {"role": "assistant", **delta}
            self._chunk(event({**base, "choices": [{"index": 0, "delta": delta,
                                                    "finish_reason": None}]}))
        if self._interrupt(len(deltas), error_event):
            return
        self._chunk(event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._chunk(event({**base, "choices": [], "usage": usage}))
        self._chunk(b"data: [DONE]\n\n")
        self._end_stream()


_ROUTES = {
    ("GET", "/api/tags"): _Handler.api_tags,
    ("POST", "/api/embed"): _Handler.api_embed,
    ("POST", "/api/embeddings"): _Handler.api_embeddings,
    ("POST", "/api/chat"): _Handler.api_chat,
    ("GET", "/v1/models"): _Handler.v1_models,
    ("POST", "/v1/rerank"): _Handler.v1_rerank,
    ("POST", "/v1/embeddings"): _Handler.v1_embeddings,
    ("POST", "/v1/chat/completions"): _Handler.v1_chat,
}
