"""Ollama's chat protocol: ``POST /api/chat`` streamed as JSON lines.

The context window is sized to the prompt (``ollama_num_ctx``: a power of two from 2048 up to
``AI_GEN_NUM_CTX``), and a prompt the server cut to fit its window, seen as a
``prompt_eval_count`` far below our own estimate, sets ``Completion.prompt_cut`` and is logged as
a warning instead of passing as a normal answer. ``message.thinking`` is reasoning, every delta.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import httpx

from varaverk import bounded_http
from varaverk.answering.generation.events import (TRUNCATING_REASONS, Completion,
                                                  GenerationError, GenerationUnavailable,
                                                  StreamEvent)
from varaverk.answering.generation.streaming import (ChatClient, int_or_none, parse_json_line,
                                                     parse_timestamp)
from varaverk.answering.generation.think_tags import ThinkSplitter
from varaverk.modelservers import ModelServerUnavailable, forget, pick_ollama_host

log = logging.getLogger("varaverk.answering.generation")

# Our prompt-size estimates, without the server's tokenizer: generous when sizing the window
# (dense text such as YAML runs near 3 characters a token), sparing when judging a cut.
SIZING_CHARS_PER_TOKEN = 3
CUT_CHARS_PER_TOKEN = 4
REPLY_TOKENS = 1024       # room left in the window for the answer
MIN_NUM_CTX = 2048
# The server counted well under our sparing estimate: it cut the prompt. (A long prefix it had
# cached from the previous turn also counts low, hence "well under", not "under".)
CUT_RATIO = 0.4


def prompt_chars(messages: list[dict[str, str]]) -> int:
    """Characters of the messages' contents (what the estimates count)."""
    return sum(len(m.get("content") or "") for m in messages)


def ollama_num_ctx(messages: list[dict[str, str]], ceiling: int) -> int:
    """Ollama's ``num_ctx`` for this prompt: the prompt's estimated tokens plus REPLY_TOKENS,
    rounded up to a power of two (each distinct num_ctx makes Ollama reload the model, so only
    a few sizes are used), at least MIN_NUM_CTX and at most ``ceiling`` (AI_GEN_NUM_CTX)."""
    wanted = prompt_chars(messages) // SIZING_CHARS_PER_TOKEN + REPLY_TOKENS
    size = MIN_NUM_CTX
    while size < wanted:
        size *= 2
    return max(1, min(size, ceiling))


def prompt_was_cut(messages: list[dict[str, str]], prompt_tokens: int | None) -> bool:
    """Whether the server's prompt token count is far below what the prompt must hold."""
    estimate = prompt_chars(messages) // CUT_CHARS_PER_TOKEN
    return prompt_tokens is not None and estimate >= 256 and prompt_tokens < estimate * CUT_RATIO


class OllamaChatClient(ChatClient):
    """Ollama ``POST /api/chat`` with ``stream: true`` and ``options.num_ctx`` sized to the
    prompt (``ollama_num_ctx``, at most ``num_ctx``)."""

    backend = "ollama"

    def __init__(self, hosts, model: str, num_ctx: int = 8192, timeout: float = 120.0) -> None:
        super().__init__(model, timeout)
        self.hosts = list(hosts)
        self.num_ctx = num_ctx

    def _pick(self) -> str:
        try:
            return pick_ollama_host(self.hosts)
        except ModelServerUnavailable as exc:
            raise GenerationUnavailable(str(exc)) from None

    def stream(self, messages: list[dict[str, str]],
               json_schema: dict | None = None) -> Iterator[StreamEvent]:
        """Stream one turn from the first healthy Ollama host (see ``ChatClient.stream``);
        ``json_schema`` goes out as Ollama's ``format`` (structured outputs).

        When the remembered host cannot be reached, the choice is forgotten and a host is
        picked once more. ``Completion.tok_s`` is ``eval_count`` over ``eval_duration`` (ns).
        Raises GenerationUnavailable (no host reachable) or GenerationError.
        """
        payload = {"model": self.model, "messages": messages, "stream": True,
                   "options": {"num_ctx": ollama_num_ctx(messages, self.num_ctx)}}
        if json_schema is not None:
            payload["format"] = json_schema
        with httpx.Client(timeout=self._timeout) as client:
            started = time.monotonic()
            host = self._pick()
            try:
                response = self._post_stream(client, host + "/api/chat", payload)
            except GenerationUnavailable:
                forget(self.hosts)  # the remembered host went away: choose again, once
                host = self._pick()
                response = self._post_stream(client, host + "/api/chat", payload)
            try:
                yield from self._read(response, host, started, messages,
                                      payload["options"]["num_ctx"])
            finally:
                response.close()

    def _read(self, response: bounded_http.BoundedResponse, host: str, started: float,
              messages: list[dict[str, str]] = (), num_ctx: int | None = None
              ) -> Iterator[StreamEvent]:
        url = host + "/api/chat"
        if response.status_code != 200:
            raise self._http_error(response, url)
        splitter = ThinkSplitter()
        native_thinking: list[str] = []
        completion = Completion(backend=self.backend, model=self.model, host=host)
        final: dict | None = None
        for line in self._lines(response, url):
            if not line.strip():
                continue
            obj = parse_json_line(line, url)
            if not isinstance(obj, dict):
                raise GenerationError(f"{url}: unexpected line {line[:200]!r}")
            if "error" in obj:
                raise GenerationError(f"{url}: the model server reported an error mid-stream: "
                                      f"{obj['error']}")
            message = obj.get("message") or {}
            thinking = message.get("thinking") or ""
            content = message.get("content") or ""
            if (thinking or content) and completion.first_token_s is None:
                completion.first_token_s = time.monotonic() - started
            if thinking:
                native_thinking.append(thinking)
                yield StreamEvent("thinking", thinking)
            if content:
                yield from self._split_events(splitter, splitter.feed(content))
            if obj.get("done"):
                final = obj
                break
        if final is None:
            raise GenerationError(f"{url}: the stream ended before the final message")
        yield from self._split_events(splitter, splitter.finish())
        completion.answer = splitter.answer
        completion.thinking = "\n\n".join(t for t in ("".join(native_thinking).strip(),
                                                      splitter.thinking) if t)
        completion.done_reason = final.get("done_reason")
        completion.truncated = completion.done_reason in TRUNCATING_REASONS or splitter.unclosed
        completion.prompt_tokens = int_or_none(final.get("prompt_eval_count"))
        if prompt_was_cut(messages, completion.prompt_tokens):
            completion.prompt_cut = True
            log.warning("%s evaluated only %d prompt tokens of a prompt of about %d: it "
                        "probably cut the prompt to its context window (num_ctx %d; raise "
                        "AI_GEN_NUM_CTX, or the model's own limit)",
                        url, completion.prompt_tokens,
                        prompt_chars(messages) // CUT_CHARS_PER_TOKEN, num_ctx)
        completion.completion_tokens = int_or_none(final.get("eval_count"))
        duration = int_or_none(final.get("eval_duration"))
        if completion.completion_tokens is not None and duration:
            completion.tok_s = completion.completion_tokens * 1e9 / duration
        completion.created_at = parse_timestamp(final.get("created_at"))
        completion.elapsed_s = time.monotonic() - started
        yield StreamEvent("done", completion=completion)
