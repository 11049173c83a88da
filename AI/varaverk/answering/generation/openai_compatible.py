"""The OpenAI-compatible chat protocol: ``POST {base_url}/chat/completions`` as server-sent
events (llama.cpp, vLLM, LocalAI, ...). ``delta.reasoning_content`` / ``delta.reasoning`` are
reasoning, every delta of it.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Iterator

import httpx

from varaverk import bounded_http
from varaverk.answering.generation.events import (TRUNCATING_REASONS, Completion,
                                                  GenerationError, StreamEvent)
from varaverk.answering.generation.streaming import ChatClient, int_or_none, parse_json_line
from varaverk.answering.generation.think_tags import ThinkSplitter


class OpenAIChatClient(ChatClient):
    """An OpenAI-compatible ``POST {base_url}/chat/completions`` streamed as server-sent events.

    Asks for usage with ``stream_options.include_usage`` (retrying once without it for servers
    that reject the option). ``tok_s`` comes from llama.cpp's ``timings.predicted_per_second``
    when present, else completion tokens over the time from the first to the last delta, else None.
    """

    backend = "openai"

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout: float = 120.0,
                 max_tokens: int | None = None) -> None:
        super().__init__(model, timeout)
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"<OpenAIChatClient base_url={self.base_url} model={self.model}>"

    def stream(self, messages: list[dict[str, str]],
               json_schema: dict | None = None) -> Iterator[StreamEvent]:
        """Stream one turn from ``{base_url}/chat/completions`` (see ``ChatClient.stream``);
        ``json_schema`` goes out as ``response_format`` (``json_schema``, strict).

        Raises GenerationUnavailable (server unreachable) or GenerationError.
        """
        url = self.base_url + "/chat/completions"
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True,
                                   "stream_options": {"include_usage": True}}
        if self.max_tokens:
            payload["max_tokens"] = self.max_tokens
        if json_schema is not None:
            payload["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "answer", "schema": json_schema, "strict": True}}
        with httpx.Client(timeout=self._timeout) as client:
            started = time.monotonic()
            response = self._post_stream(client, url, payload, headers)
            if response.status_code in (400, 422):
                error = self._http_error(response, url)
                response.close()
                if "stream_options" not in str(error):
                    raise error
                payload.pop("stream_options")
                response = self._post_stream(client, url, payload, headers)
            try:
                yield from self._read(response, url, started)
            finally:
                response.close()

    def _events(self, response: bounded_http.BoundedResponse, url: str) -> Iterator[str]:
        """The data of each server-sent event (multi-line data joined with newlines); raises
        GenerationError for an event longer than ``max_line_bytes``."""
        data: list[str] = []
        size = 0
        for line in self._lines(response, url):
            if not line:
                if data:
                    yield "\n".join(data)
                    data, size = [], 0
                continue
            if line.startswith(":"):
                continue  # an SSE comment (keep-alive)
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value[1:] if value.startswith(" ") else value)
                size += len(value) + 1
                if size > self.max_line_bytes:
                    raise GenerationError(f"{url}: the model server sent an event longer than "
                                          f"{self.max_line_bytes} characters")
        if data:
            yield "\n".join(data)

    def _read(self, response: bounded_http.BoundedResponse, url: str, started: float
              ) -> Iterator[StreamEvent]:
        """The stream's events: each data object read for metadata and its choices' deltas,
        then the Completion finished. Raises GenerationError for an HTTP error, an error event
        or a stream that ends before its final event."""
        if response.status_code != 200:
            raise self._http_error(response, url)
        state = _OpenAIStream(Completion(backend=self.backend, model=self.model,
                                         host=self.base_url), started)
        finished = False
        for data in self._events(response, url):
            if data.strip() == "[DONE]":
                finished = True
                break
            obj = _event_object(data, url)
            state.note_metadata(obj)
            for choice in obj.get("choices") or []:
                yield from self._choice_events(state, choice)
        if not finished and state.completion.done_reason is None:
            raise GenerationError(f"{url}: the stream ended before the final event")
        yield from self._split_events(state.splitter, state.splitter.finish())
        state.finish()
        yield StreamEvent("done", completion=state.completion)

    def _choice_events(self, state: "_OpenAIStream", choice: dict) -> Iterator[StreamEvent]:
        """The reasoning and content deltas of one choice; notes its finish reason."""
        delta = choice.get("delta") or {}
        thinking = delta.get("reasoning_content") or delta.get("reasoning") or ""
        content = delta.get("content") or ""
        if thinking or content:
            state.note_delta()
        if thinking:
            state.reasoning.append(thinking)
            yield StreamEvent("thinking", thinking)
        if content:
            yield from self._split_events(state.splitter, state.splitter.feed(content))
        if choice.get("finish_reason"):
            state.completion.done_reason = choice["finish_reason"]


def _event_object(data: str, url: str) -> dict:
    """One server-sent event's JSON object; GenerationError for anything else or an error."""
    obj = parse_json_line(data, url)
    if not isinstance(obj, dict):
        raise GenerationError(f"{url}: unexpected event {data[:200]!r}")
    if obj.get("error"):
        error = obj["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise GenerationError(f"{url}: the model server reported an error mid-stream: {message}")
    return obj


class _OpenAIStream:
    """What one OpenAI-compatible stream has told so far, for the Completion at its end."""

    def __init__(self, completion: Completion, started: float) -> None:
        self.completion = completion
        self.started = started  # time.monotonic() when the request was sent
        self.splitter = ThinkSplitter()
        self.reasoning: list[str] = []
        self.last_delta_at: float | None = None
        self.speed: float | None = None  # tokens/s reported by the server (llama.cpp)

    def note_metadata(self, obj: dict) -> None:
        """Creation time, usage counts and the server's own speed, when the event has them."""
        completion = self.completion
        if isinstance(obj.get("created"), (int, float)) and completion.created_at is None:
            completion.created_at = datetime.fromtimestamp(obj["created"], timezone.utc)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            completion.prompt_tokens = int_or_none(usage.get("prompt_tokens"))
            completion.completion_tokens = int_or_none(usage.get("completion_tokens"))
        timings = obj.get("timings")
        if isinstance(timings, dict) and isinstance(timings.get("predicted_per_second"),
                                                    (int, float)):
            self.speed = float(timings["predicted_per_second"]) or None

    def note_delta(self) -> None:
        """A reasoning or content delta arrived: time of the first and of the latest."""
        now = time.monotonic()
        self.last_delta_at = now
        if self.completion.first_token_s is None:
            self.completion.first_token_s = now - self.started

    def finish(self) -> None:
        """Fill in the answer, reasoning, truncation, tokens/s and elapsed time."""
        completion, splitter = self.completion, self.splitter
        completion.answer = splitter.answer
        completion.thinking = "\n\n".join(t for t in ("".join(self.reasoning).strip(),
                                                      splitter.thinking) if t)
        completion.truncated = completion.done_reason in TRUNCATING_REASONS or splitter.unclosed
        speed = self.speed
        if speed is None and completion.completion_tokens and self.last_delta_at is not None:
            # tokens after the first one, over the time from the first delta to the last
            span = self.last_delta_at - (self.started + completion.first_token_s)
            if completion.completion_tokens > 1 and span > 0:
                speed = (completion.completion_tokens - 1) / span
        completion.tok_s = speed
        completion.elapsed_s = time.monotonic() - self.started
