"""Streaming generation against the real test server (B23, B25, B26, B27, failures, failover)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import httpx
import pytest

from tests.support.model_server import WORD, ModelServer
from varaverk.config import Settings
from varaverk.answering.generation.chat_client import make_chat_client
from varaverk.answering.generation.events import GenerationError, GenerationUnavailable
from varaverk.answering.generation.ollama import OllamaChatClient
from varaverk.answering.generation.openai_compatible import OpenAIChatClient
from varaverk.answering.generation.streaming import LineBuffer

QUESTION = [{"role": "system", "content": "Answer only from the context."},
            {"role": "user", "content": "Context:\n[Backup/rsync_mirror.sh › PURPOSE]\nMirrors.\n\n"
                                        "Question: what does it do?"}]

B23_READS = [
    b'{"model":"m","message":{"role":"assistant","content":"caf\xc3',
    b'\xa9"},"done":false}\n{"model":"m","message":{"role":"assistant","content":" ok"},"done":false}\n{"model":"m","message":{"role":"assi',
    b'stant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":10,"eval_count":2,"eval_duration":100000000}\n',
]


def ollama(server, **kw):
    return OllamaChatClient([server.base_url], "m", num_ctx=kw.pop("num_ctx", 4096), **kw)


def collect(client, messages=QUESTION):
    events = list(client.stream(messages))
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done"
    return events, events[-1].completion


# -- B23 -----------------------------------------------------------------------------------------

def test_b23_line_buffer_exact_reads():
    buffer = LineBuffer()
    lines = []
    for read in B23_READS:
        lines += buffer.feed(read)
    lines += buffer.close()
    assert len(lines) == 3
    assert '"content":"café"' in lines[0]


class _Reads(httpx.SyncByteStream):
    def __init__(self, reads):
        self.reads = reads

    def __iter__(self):
        yield from self.reads


@pytest.mark.parametrize("strip_last_newline", [False, True])
def test_b23_parser_fed_the_exact_three_reads(strip_last_newline):
    reads = list(B23_READS)
    if strip_last_newline:  # a final line without a newline is still parsed at EOF
        reads[-1] = reads[-1].rstrip(b"\n")
    client = OllamaChatClient(["http://unused"], "m")
    response = httpx.Response(200, stream=_Reads(reads))
    events = list(client._read(response, "http://unused", 0.0))
    completion = events[-1].completion
    assert completion.answer == "café ok"
    assert "\ufffd" not in "".join(e.text for e in events)
    assert completion.completion_tokens == 2 and completion.prompt_tokens == 10
    assert completion.tok_s == 20.0


def test_b23_through_the_server_as_three_writes(model_server):
    model_server.raw_chat_chunks = B23_READS
    events, completion = collect(ollama(model_server))
    assert completion.answer == "café ok"
    assert [e.text for e in events if e.type == "content"] == ["café", " ok"]
    assert completion.completion_tokens == 2 and completion.tok_s == 20.0


def test_b23_sse_split_mid_character(model_server):
    model_server.raw_chat_chunks = [
        b'data: {"choices":[{"index":0,"delta":{"content":"caf\xc3',
        b'\xa9"}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":" ok"},"finish_reason":"stop"}]}\n\nda',
        b'ta: [DONE]',
    ]
    _, completion = collect(OpenAIChatClient(model_server.openai_base_url, "m"))
    assert completion.answer == "café ok" and completion.done_reason == "stop"


# -- default answer, request shape ----------------------------------------------------------------

def test_ollama_streams_a_cited_answer(model_server):
    events, completion = collect(ollama(model_server, num_ctx=8192))
    assert completion.answer == "According to [Backup/rsync_mirror.sh › PURPOSE], this is covered."
    assert "".join(e.text for e in events if e.type == "content") == completion.answer
    assert sum(e.type == "content" for e in events) > 3  # really streamed, delta by delta
    body = model_server.requests_to("/api/chat")[0].json
    assert body["stream"] is True and body["options"] == {"num_ctx": 2048}  # sized to the prompt
    assert body["messages"] == QUESTION
    assert completion.backend == "ollama" and completion.host == model_server.base_url
    assert completion.first_token_s is not None and completion.elapsed_s >= completion.first_token_s
    assert completion.truncated is False and completion.done_reason == "stop"


@pytest.mark.parametrize("chars, ceiling, num_ctx", [
    (100, 8192, 2048), (9_000, 8192, 4096), (30_000, 8192, 8192), (100, 1024, 1024)])
def test_ollama_num_ctx_is_sized_to_the_prompt(model_server, chars, ceiling, num_ctx):
    # Estimated tokens plus room for the reply, a power of two, at most AI_GEN_NUM_CTX.
    messages = [{"role": "user", "content": ("word " * chars)[:chars]}]
    collect(OllamaChatClient([model_server.base_url], "m", num_ctx=ceiling), messages)
    assert model_server.requests_to("/api/chat")[0].json["options"] == {"num_ctx": num_ctx}


def test_a_prompt_the_server_cut_to_its_window_is_flagged_and_logged(model_server, caplog):
    long_prompt = [{"role": "system", "content": "Answer from the context."},
                   {"role": "user", "content": "The mirror keeps nightly copies. " * 600}]
    with caplog.at_level("WARNING", logger="varaverk"):
        _, cut = collect(OllamaChatClient([model_server.base_url], "m", num_ctx=1024),
                         long_prompt)
    assert cut.prompt_tokens == 1024 and cut.prompt_cut is True
    [warning] = [r.getMessage() for r in caplog.records if "cut the prompt" in r.getMessage()]
    assert "only 1024 prompt tokens" in warning and "AI_GEN_NUM_CTX" in warning
    _, whole = collect(OllamaChatClient([model_server.base_url], "m", num_ctx=8192),
                       long_prompt)
    assert whole.prompt_tokens == 3004 and whole.prompt_cut is False


def test_openai_streams_with_usage(model_server):
    events, completion = collect(OpenAIChatClient(model_server.openai_base_url, "m"))
    assert completion.answer == "According to [Backup/rsync_mirror.sh › PURPOSE], this is covered."
    body = model_server.requests_to("/v1/chat/completions")[0].json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    words = sum(len(WORD.findall(m["content"])) for m in QUESTION)  # the server's count
    assert completion.prompt_tokens == words == 16 and completion.completion_tokens == 8
    assert completion.backend == "openai" and completion.done_reason == "stop"
    assert isinstance(completion.created_at, datetime)


# -- B25 / B26 -----------------------------------------------------------------------------------

B25 = {
    "a": (["<th", "ink>\nUser asks about backups.\n</th", "ink>\n\nBackups run at 02:00."], "stop",
          "Backups run at 02:00.", "User asks about backups.", False),
    "b": (["User asks about backups.\n", "</think>\n\nBackups run at 02:00."], "stop",
          "Backups run at 02:00.", "User asks about backups.", False),
    "c": (["<think>\nStill reasoning"], "length", "", "Still reasoning", True),
}


@pytest.mark.parametrize("case", sorted(B25))
@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_b25_think_blocks(model_server, case, backend):
    deltas, reason, answer, thinking, truncated = B25[case]
    model_server.script(content=deltas, done_reason=reason)
    client = ollama(model_server) if backend == "ollama" else \
        OpenAIChatClient(model_server.openai_base_url, "m")
    events, completion = collect(client)
    assert completion.answer == answer
    assert completion.thinking == thinking
    assert completion.truncated is truncated
    assert completion.done_reason == reason
    live = "".join(e.text for e in events if e.type == "content" and not e.reclassified)
    assert "<think>" not in live and "</think>" not in live


def test_b26_every_thinking_delta_kept(model_server):
    model_server.script(thinking=["Check", " the", " schedule."], content=["Nightly at 02:00."])
    model_server.final_overrides = {"prompt_eval_count": 40, "eval_count": 9,
                                    "eval_duration": 450000000}
    events, completion = collect(ollama(model_server))
    assert [e.text for e in events if e.type == "thinking"] == ["Check", " the", " schedule."]
    assert completion.thinking == "Check the schedule."
    assert completion.answer == "Nightly at 02:00."
    assert (completion.prompt_tokens, completion.completion_tokens, completion.tok_s) == (40, 9, 20.0)


def test_b26_exact_lines(model_server):
    model_server.raw_chat_chunks = [
        b'{"model":"m","message":{"role":"assistant","content":"","thinking":"Check"},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":"","thinking":" the"},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":"","thinking":" schedule."},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":"Nightly at 02:00."},"done":false}\n',
        b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop",'
        b'"prompt_eval_count":40,"eval_count":9,"eval_duration":450000000}\n',
    ]
    model_server.raw_chunk_delay = 0.0
    _, completion = collect(ollama(model_server))
    assert completion.thinking == "Check the schedule."
    assert completion.answer == "Nightly at 02:00."
    assert (completion.prompt_tokens, completion.completion_tokens, completion.tok_s) == (40, 9, 20.0)


def test_openai_reasoning_content_is_thinking(model_server):
    model_server.script(thinking=["Look", " it up."], content=["Done."])
    events, completion = collect(OpenAIChatClient(model_server.openai_base_url, "m"))
    assert completion.thinking == "Look it up." and completion.answer == "Done."
    assert [e.type for e in events[:2]] == ["thinking", "thinking"]


def test_thinking_only_gives_empty_answer(model_server):
    model_server.script(thinking=["Only", " thoughts."])
    _, completion = collect(ollama(model_server))
    assert completion.answer == "" and completion.thinking == "Only thoughts."


# -- B27 -----------------------------------------------------------------------------------------

B27_FINAL = (b'{"model":"m","created_at":"2025-01-02T10:15:00Z","message":{"role":"assistant",'
             b'"content":""},"done":true,"done_reason":"stop","total_duration":812000000,'
             b'"load_duration":21000000,"eval_count":12,"eval_duration":600000000}')


def test_b27_missing_prompt_eval_count_stays_unknown(model_server):
    model_server.raw_chat_chunks = [
        b'{"model":"m","created_at":"2025-01-02T10:14:59Z","message":{"role":"assistant",'
        b'"content":"Nightly."},"done":false}\n', B27_FINAL + b"\n"]
    _, completion = collect(ollama(model_server))
    assert completion.prompt_tokens is None
    assert completion.completion_tokens == 12
    assert completion.tok_s == 20.0
    assert completion.created_at == datetime(2025, 1, 2, 10, 15, 0, tzinfo=timezone.utc)
    assert completion.answer == "Nightly."


@pytest.mark.parametrize("duration", [0, None])
def test_b27_zero_or_missing_eval_duration(model_server, duration):
    model_server.final_overrides = {"eval_duration": duration}
    model_server.omit_prompt_eval_count = True
    _, completion = collect(ollama(model_server))
    assert completion.tok_s is None and completion.prompt_tokens is None
    assert completion.completion_tokens == 8


def test_b27_openai_without_usage(model_server):
    model_server.raw_chat_chunks = [
        b'data: {"created":1735812900,"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n',
        b'data: {"created":1735812900,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b'data: [DONE]\n\n']
    _, completion = collect(OpenAIChatClient(model_server.openai_base_url, "m"))
    assert completion.answer == "Hi"
    assert completion.prompt_tokens is None and completion.completion_tokens is None
    assert completion.tok_s is None
    assert completion.created_at == datetime(2025, 1, 2, 10, 15, 0, tzinfo=timezone.utc)


def test_nanosecond_created_at(model_server):
    model_server.created_at = "2024-07-22T20:33:28.123456789Z"
    _, completion = collect(ollama(model_server))
    assert completion.created_at == datetime(2024, 7, 22, 20, 33, 28, 123456, tzinfo=timezone.utc)


# -- failures ------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_error_mid_stream(model_server, backend):
    model_server.stream_error = "model runner crashed"
    model_server.stream_error_after = 2
    client = ollama(model_server) if backend == "ollama" else \
        OpenAIChatClient(model_server.openai_base_url, "m")
    seen = []
    with pytest.raises(GenerationError, match="model runner crashed") as info:
        for event in client.stream(QUESTION):
            seen.append(event)
    assert not isinstance(info.value, GenerationUnavailable)
    assert [e.text for e in seen] == ["According", " to"]


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_dropped_connection_mid_stream(model_server, backend):
    model_server.drop_after = 3
    client = ollama(model_server) if backend == "ollama" else \
        OpenAIChatClient(model_server.openai_base_url, "m")
    with pytest.raises(GenerationError, match="broke off|ended before") as info:
        list(client.stream(QUESTION))
    assert not isinstance(info.value, GenerationUnavailable)


def test_http_error_is_generation_error(model_server):
    model_server.fail_next("/api/chat", 500, {"error": "out of memory"})
    with pytest.raises(GenerationError, match="HTTP 500.*out of memory") as info:
        list(ollama(model_server).stream(QUESTION))
    assert not isinstance(info.value, GenerationUnavailable)


def test_unknown_model_is_generation_error(model_server):
    model_server.known_models = {"qwen2.5:3b"}
    with pytest.raises(GenerationError, match="not found, try pulling"):
        list(ollama(model_server).stream(QUESTION))


def test_stream_without_final_line_is_an_error(model_server):
    model_server.raw_chat_chunks = [b'{"model":"m","message":{"content":"half"},"done":false}\n']
    with pytest.raises(GenerationError, match="ended before the final message"):
        list(ollama(model_server).stream(QUESTION))


def test_ollama_unavailable_before_anything(dead_url):
    stream = OllamaChatClient([dead_url], "m").stream(QUESTION)
    with pytest.raises(GenerationUnavailable, match=dead_url):
        next(stream)


def test_openai_unavailable_before_anything(dead_url):
    with pytest.raises(GenerationUnavailable):
        next(OpenAIChatClient(dead_url + "/v1", "m").stream(QUESTION))


def test_ollama_failover(model_server, dead_url):
    client = OllamaChatClient([dead_url, model_server.base_url], "m")
    _, completion = collect(client)
    assert completion.host == model_server.base_url


def test_ollama_failover_when_chosen_host_dies(model_server):
    first = ModelServer().start()
    client = OllamaChatClient([first.base_url, model_server.base_url], "m")
    assert collect(client)[1].host == first.base_url
    first.stop()
    assert collect(client)[1].host == model_server.base_url


def test_openai_stream_options_rejected_then_retried(model_server):
    model_server.fail_next("/v1/chat/completions", 400,
                           {"error": {"message": "Unrecognized request argument: stream_options"}})
    _, completion = collect(OpenAIChatClient(model_server.openai_base_url, "m"))
    bodies = [r.json for r in model_server.requests_to("/v1/chat/completions")]
    assert "stream_options" in bodies[0] and "stream_options" not in bodies[1]
    assert completion.answer.startswith("According to")
    assert completion.prompt_tokens is None  # usage was not asked for the second time


def test_openai_key_sent_as_bearer_never_shown(model_server, caplog):
    secret = "sk-gen-secret-42"
    model_server.api_key = secret
    caplog.set_level(logging.DEBUG)
    settings = Settings(ai_gen_backend="openai", ai_gen_model="m",
                        ai_openai_base_url=model_server.openai_base_url, ai_openai_api_key=secret)
    client = make_chat_client(settings)
    _, completion = collect(client)
    assert completion.answer
    assert model_server.requests[-1].headers["authorization"] == f"Bearer {secret}"
    assert secret not in repr(client) and secret not in repr(completion)
    assert secret not in caplog.text


def test_openai_wrong_key(model_server):
    model_server.api_key = "right"
    with pytest.raises(GenerationError, match="HTTP 401"):
        list(OpenAIChatClient(model_server.openai_base_url, "m", api_key="wrong").stream(QUESTION))


def test_make_chat_client_ollama(model_server):
    settings = Settings(ai_gen_model="qwen2.5:3b", ai_gen_num_ctx=2048,
                        ai_ollama_hosts=("127.0.0.1:1", model_server.base_url))
    client = make_chat_client(settings)
    assert isinstance(client, OllamaChatClient) and client.num_ctx == 2048
    _, completion = collect(client)
    assert completion.model == "qwen2.5:3b" and completion.host == model_server.base_url
