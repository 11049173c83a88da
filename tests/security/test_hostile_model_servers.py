"""Hostile or broken model servers against the other readers of their answers (issue 21):
generation streams, the embedding clients and the Ollama health probe. Each shape costs about
one AI_HTTP_TIMEOUT at most and a bounded amount of memory, and ends in the error the caller
already handles (GenerationError, a failed embedding item, a host passed over), never a
traceback or an unbounded wait. Time and memory are measured in a subprocess of their own."""

from __future__ import annotations

import time

import pytest

from tests.support import hostile_server as hs
from tests.support.measured import run_measured
from tests.support.model_server import ModelServer
from varaverk.answering.generation.ollama import OllamaChatClient
from varaverk.answering.generation.openai_compatible import OpenAIChatClient
from varaverk.modelservers import HEALTH_TIMEOUT, pick_ollama_host

TIMEOUT = 2.0
SLACK = 8.0       # generous: the unbounded reads took minutes, or never ended
PEAK_MIB = 160    # the interpreter, httpx and numpy take about a third of this

DELTA = b'{"model":"m","message":{"role":"assistant","content":"ok"},"done":false}\n'
DONE = (b'{"model":"m","message":{"role":"assistant","content":""},"done":true,'
        b'"done_reason":"stop"}\n')
SSE_DELTA = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'


def _chat(url: str, backend: str, extra: str = "") -> dict:
    client = (f"OllamaChatClient([{url!r}], 'm', timeout={TIMEOUT})" if backend == "ollama" else
              f"OpenAIChatClient({url + '/v1'!r}, 'm', timeout={TIMEOUT})")
    return run_measured(
        "from varaverk.answering.generation.events import GenerationError\n"
        "from varaverk.answering.generation.ollama import OllamaChatClient\n"
        "from varaverk.answering.generation.openai_compatible import OpenAIChatClient\n"
        f"client = {client}\n{extra}\n"
        "result['events'] = 0\n"
        "try:\n"
        "    for event in client.stream([{'role': 'user', 'content': 'q'}]):\n"
        "        result['events'] += 1\n"
        "    result['outcome'] = 'done'\n"
        "except GenerationError as exc:\n"
        "    result['outcome'] = type(exc).__name__\n"
        "    result['message'] = str(exc)[:300]\n")


CHAT_PATH = {"ollama": "/api/chat", "openai": "/v1/chat/completions"}
LINE_START = {"ollama": b"", "openai": b"data: "}

CHAT_SHAPES = {
    # name: (shape for the backend, what the message says)
    "a 300 MB line": (lambda b: hs.ndjson_lines([LINE_START[b]], hs.body_endless(
        b"a", 300 << 20)), "longer than"),
    "a trickled line": (lambda b: hs.ndjson_lines(
        [DELTA if b == "ollama" else SSE_DELTA],
        hs.body_trickle(LINE_START[b] + b'{"message": {"content": "' + b"a" * 1000, 0.3)),
        f"within {TIMEOUT:g} s"),
    "a gzip bomb": (lambda b: hs.gzip_bomb(256 << 20, start=LINE_START[b] + b"{}"),
                    "longer than"),
    "100k nested brackets": (lambda b: hs.answer(
        LINE_START[b] + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"), "malformed JSON"),
    "HTTP 500 with a 300 MB body": (lambda b: hs.endless(
        b'{"error": "', b"a", 300 << 20, suffix=b'"}', status=500), "HTTP 500"),
}


@pytest.mark.parametrize("backend", ["ollama", "openai"])
@pytest.mark.parametrize("shape", list(CHAT_SHAPES))
def test_generation_ends_with_a_generation_error_in_bounded_time_and_memory(shape, backend):
    make, expected = CHAT_SHAPES[shape]
    with hs.HostileServer({CHAT_PATH[backend]: make(backend)}) as server:
        result = _chat(server.base_url, backend)
    print(f"{backend}, {shape}: {result}")
    assert result["outcome"] == "GenerationError", result
    assert expected in result["message"]
    assert result["seconds"] < TIMEOUT + SLACK
    assert result["peak_mib"] < PEAK_MIB


def test_an_sse_event_of_unbounded_size_is_cut():
    """Data lines that never meet the blank line ending their event."""
    shape = hs.ndjson_lines([b": keep-alive\n"], hs.body_endless(b"data: x\n", 100 << 20))
    with hs.HostileServer({"/v1/chat/completions": shape}) as server:
        result = _chat(server.base_url, "openai")
    print(f"openai, an endless event: {result}")
    assert result["outcome"] == "GenerationError" and "longer than" in result["message"]
    assert result["seconds"] < TIMEOUT + SLACK and result["peak_mib"] < PEAK_MIB


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_an_endless_stream_of_deltas_stops_at_the_stream_limit(backend):
    delta = DELTA if backend == "ollama" else SSE_DELTA
    shape = hs.ndjson_lines([delta], hs.body_endless(delta, 300 << 20))
    with hs.HostileServer({CHAT_PATH[backend]: shape}) as server:
        result = _chat(server.base_url, backend, "client.max_stream_bytes = 1 << 20")
    print(f"{backend}, endless deltas: {result}")
    assert result["outcome"] == "GenerationError" and "larger than" in result["message"]
    assert result["events"] > 1000  # they were streamed as they came
    assert result["seconds"] < TIMEOUT + SLACK and result["peak_mib"] < PEAK_MIB


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_a_slow_stream_longer_than_the_timeout_still_streams_whole(backend):
    """The deadline is per line, not per answer: a model writing a delta every 0.4 s for
    longer than AI_HTTP_TIMEOUT is a slow model, not a hostile one."""
    words = [f" w{i}" for i in range(8)]
    with ModelServer(delta_delay=0.4) as server:
        server.script(content=words)
        client = (OllamaChatClient([server.base_url], "m", timeout=1.5) if backend == "ollama"
                  else OpenAIChatClient(server.openai_base_url, "m", timeout=1.5))
        started = time.monotonic()
        events = list(client.stream([{"role": "user", "content": "q"}]))
    assert time.monotonic() - started > 3.0
    assert [e.text for e in events if e.type == "content"] == [words[0].lstrip(), *words[1:]]
    assert events[-1].completion.answer == "".join(words).strip()


# -- embeddings ----------------------------------------------------------------------------------

EMBED_PATH = {"ollama": "/api/embed", "openai": "/v1/embeddings"}
EMBED_ANSWER = {"ollama": b'{"embeddings": [[0.6, 0.8]]',
                "openai": b'{"data": [{"index": 0, "embedding": [0.6, 0.8]}]'}


def _embed(url: str, backend: str) -> dict:
    embedder = (f"OllamaEmbedder([{url!r}], 'm', batch_size=1, timeout={TIMEOUT})"
                if backend == "ollama" else
                f"OpenAIEmbedder({url + '/v1'!r}, 'm', batch_size=1, timeout={TIMEOUT})")
    return run_measured(
        "from varaverk.embedding import OllamaEmbedder, OpenAIEmbedder\n"
        f"embedder = {embedder}\n"
        "outcome = embedder.embed(['hello world'])\n"
        "result['vector'] = outcome.vectors[0] is not None\n"
        "result['error'] = outcome.errors[0].message if 0 in outcome.errors else None\n")


EMBED_SHAPES = {
    "100k nested brackets": lambda b: hs.deep_json(100_000),
    "HTTP 500 nested 100k deep": lambda b: hs.answer(b"[" * 100_000 + b"]" * 100_000, 500),
    "a trickled answer": lambda b: hs.trickle(EMBED_ANSWER[b] + b"}", every=0.3),
    "trickled headers": lambda b: hs.trickle(EMBED_ANSWER[b] + b"}", every=0.2,
                                             headers_too=True),
    "a 300 MB answer": lambda b: hs.padded(300 << 20, start=EMBED_ANSWER[b]),
    "a gzip bomb": lambda b: hs.gzip_bomb(256 << 20, start=EMBED_ANSWER[b]),
}


@pytest.mark.parametrize("backend", ["ollama", "openai"])
@pytest.mark.parametrize("shape", list(EMBED_SHAPES))
def test_embedding_item_fails_in_bounded_time_and_memory(shape, backend):
    with hs.HostileServer({EMBED_PATH[backend]: EMBED_SHAPES[shape](backend)}) as server:
        result = _embed(server.base_url, backend)
    print(f"{backend} embedder, {shape}: {result}")
    assert "raised" not in result, result
    assert result["vector"] is False and result["error"]
    assert result["seconds"] < TIMEOUT + SLACK
    assert result["peak_mib"] < PEAK_MIB


# -- the Ollama health probe ---------------------------------------------------------------------

def test_a_host_trickling_its_health_answer_is_passed_over_in_time(model_server):
    slow = hs.trickle(b'{"models": []}', every=0.2, headers_too=True)
    with hs.HostileServer({"/api/tags": slow}) as server:
        started = time.monotonic()
        chosen = pick_ollama_host([server.base_url, model_server.base_url], ttl=0)
        elapsed = time.monotonic() - started
    print(f"trickling /api/tags passed over after {elapsed:.1f} s")
    assert chosen == model_server.base_url
    assert elapsed < HEALTH_TIMEOUT + SLACK


def test_the_health_probe_never_reads_an_endless_body():
    shape = hs.endless(b'{"models": [', b'{"name": "m"}, ', 300 << 20)
    with hs.HostileServer({"/api/tags": shape}) as server:
        result = run_measured(
            "from varaverk.modelservers import pick_ollama_host\n"
            f"result['chosen'] = pick_ollama_host([{server.base_url!r}], ttl=0)\n")
        assert result.get("chosen") == server.base_url, result
    print(f"endless /api/tags: {result}")
    assert result["seconds"] < 2 + SLACK and result["peak_mib"] < PEAK_MIB
