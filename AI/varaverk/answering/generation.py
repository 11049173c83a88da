"""Streaming chat generation from Ollama (``/api/chat``) or an OpenAI-compatible server.

``make_chat_client(settings).stream(messages)`` yields ``StreamEvent``s as the model writes:
"thinking" and "content" deltas, then exactly one "done" event whose ``completion`` holds the
whole answer, the reasoning kept apart, the token counts and the timings.

Robustness rules, each from a failure seen in the wild (../shared/cases.md):
  * The body is read as raw bytes, buffered, split on ``b"\\n"``; only complete lines are decoded
    and parsed, and a last line without a newline is parsed at EOF. A UTF-8 character or a
    JSON object cut across reads is therefore never a problem.
  * Reasoning never leaks into the answer: ``message.thinking`` (Ollama) and
    ``delta.reasoning_content`` / ``delta.reasoning`` (OpenAI-compatible) are thinking, every delta
    of it; ``<think>`` blocks inside the content are split off by ``ThinkSplitter``,
    including tags cut across deltas, a missing opening tag and a block left unclosed.
  * Unknown counts stay unknown: a missing ``prompt_eval_count`` or ``usage`` gives None, never 0;
    a missing or zero ``eval_duration`` gives ``tok_s`` None, never a division by zero.
  * Ollama's context window is sized to the prompt (``ollama_num_ctx``: a power of two from
    2048 up to ``AI_GEN_NUM_CTX``), and a prompt the server cut to fit its window, seen as a
    ``prompt_eval_count`` far below our own estimate, sets ``Completion.prompt_cut`` and is
    logged as a warning instead of passing as a normal answer.
  * ``GenerationUnavailable`` (a ``GenerationError``) is raised only when no server could be
    reached and nothing was streamed; every other failure, including an ``{"error": ...}`` line or
    a dropped connection mid-stream, is a ``GenerationError``.

A note for consumers that show content live: when a lone ``</think>`` arrives (a model whose chat
template opened the block in the prompt), the text streamed before it as "content" turns out to
be reasoning. The splitter then emits a "thinking" event holding that text with
``StreamEvent.reclassified`` True; re-render from the "done" event's ``completion.answer``, which is
always right.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator

import httpx

from varaverk import exitcodes
from varaverk.config import ConfigError, Settings
from varaverk.errors import VaraverkError
from varaverk.modelservers import ModelServerUnavailable, forget, pick_ollama_host

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
TRUNCATING_REASONS = frozenset({"length", "max_tokens"})


class GenerationError(VaraverkError):
    """Generation failed (HTTP error, error line, broken stream); the message says where and why."""

    kind = "generation"


class GenerationUnavailable(GenerationError):
    """No model server could be reached; raised before anything was streamed."""

    exit_code = exitcodes.UNAVAILABLE
    kind = "unavailable"


log = logging.getLogger("varaverk.answering.generation")


@dataclass
class Completion:
    """One finished model turn.

    Attributes:
        answer: the answer text, reasoning removed, stripped ("" when the model gave none).
        thinking: all reasoning text (native thinking field and ``<think>`` blocks), stripped.
        prompt_tokens: prompt tokens as the server counted them; None when it did not say.
        completion_tokens: generated tokens (thinking included, as servers count); None if unknown.
        tok_s: generation speed in tokens per second; None when unknown.
        truncated: the turn stopped early (done_reason "length", or a ``<think>`` left unclosed).
        prompt_cut: the server evaluated far fewer prompt tokens than the prompt holds (it cut
            the prompt to its context window, so the model never saw part of it).
        done_reason: the server's stop reason ("stop", "length", ...) or None.
        created_at: the server's timestamp of the final message (UTC) or None.
        first_token_s: seconds from sending the request to the first delta (None if none came).
        elapsed_s: seconds from sending the request to the end of the stream.
        backend: "ollama" | "openai"; model: the model name asked for; host: the base URL used.
    """

    answer: str = ""
    thinking: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tok_s: float | None = None
    truncated: bool = False
    prompt_cut: bool = False
    done_reason: str | None = None
    created_at: datetime | None = None
    first_token_s: float | None = None
    elapsed_s: float = 0.0
    backend: str = ""
    model: str = ""
    host: str = ""


@dataclass
class StreamEvent:
    """One event of a stream: type "content" | "thinking" (``text`` is the delta) | "done".

    ``completion`` is set on the "done" event only. ``reclassified`` marks a "thinking" event
    carrying text that was already streamed as "content" (see the module docstring).
    """

    type: str
    text: str = ""
    completion: Completion | None = None
    reclassified: bool = False


# -- <think> splitting ---------------------------------------------------------------------------

def _partial_tag_suffix(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a think tag."""
    for n in range(min(len(text), len(CLOSE_TAG) - 1), 0, -1):
        tail = text[-n:]
        if OPEN_TAG.startswith(tail) or CLOSE_TAG.startswith(tail):
            return n
    return 0


class ThinkSplitter:
    """Separates ``<think>...</think>`` reasoning from the answer in streamed content.

    Feed content deltas with ``feed``; it returns (kind, text) pieces to stream, kind
    "content" | "thinking" | "reclassified" (text first streamed as content that a lone
    ``</think>`` showed to be reasoning). Call ``finish`` at the end. ``answer`` and ``thinking``
    then hold the stripped totals; ``unclosed`` tells whether a block was still open.

    Rules: a tag may be cut anywhere across deltas (a possible partial tag is held back until the
    next delta decides it); ``</think>`` without an opening tag makes everything before it
    reasoning (chat templates that open the block in the prompt); an unclosed block at the end
    stays reasoning, never answer.
    """

    def __init__(self) -> None:
        self._pending = ""            # held back: may be the start of a tag
        self._in_think = False
        self._seen_tag = False        # any tag seen; a lone </think> only counts before that
        self._answer: list[str] = []
        self._thinking: list[str] = []
        self._answer_started = False  # leading whitespace of the answer is dropped

    @property
    def unclosed(self) -> bool:
        """True when a ``<think>`` block was still open at the end (its text stays reasoning)."""
        return self._in_think

    @property
    def answer(self) -> str:
        """All content streamed as answer so far, outside think blocks, stripped."""
        return "".join(self._answer).strip()

    @property
    def thinking(self) -> str:
        """All reasoning so far (think blocks, and text before a lone ``</think>``), stripped."""
        return "".join(self._thinking).strip()

    def _emit(self, kind: str, text: str, out: list[tuple[str, str]]) -> None:
        if not text:
            return
        if kind == "content":
            if not self._answer_started:
                text = text.lstrip()
                if not text:
                    return
                self._answer_started = True
            self._answer.append(text)
        else:
            self._thinking.append(text)
        out.append((kind, text))

    def _process(self, text: str, out: list[tuple[str, str]]) -> None:
        while text:
            if self._in_think:
                end = text.find(CLOSE_TAG)
                if end < 0:
                    self._emit("thinking", text, out)
                    return
                self._emit("thinking", text[:end], out)
                self._in_think = False
                text = text[end + len(CLOSE_TAG):]
                continue
            start, end = text.find(OPEN_TAG), text.find(CLOSE_TAG)
            if end >= 0 and (start < 0 or end < start):
                before = text[:end]
                if not self._seen_tag:
                    # a lone </think>: what came before it was reasoning after all
                    earlier = "".join(self._answer)
                    self._answer.clear()
                    self._answer_started = False
                    if earlier:
                        self._thinking.append(earlier)
                        out.append(("reclassified", earlier))
                    self._emit("thinking", before, out)
                else:
                    self._emit("content", before, out)
                self._seen_tag = True
                text = text[end + len(CLOSE_TAG):]
                continue
            if start >= 0:
                self._emit("content", text[:start], out)
                self._in_think = True
                self._seen_tag = True
                text = text[start + len(OPEN_TAG):]
                continue
            self._emit("content", text, out)
            return

    def feed(self, delta: str) -> list[tuple[str, str]]:
        """Split one content delta; returns the pieces that can be streamed now."""
        out: list[tuple[str, str]] = []
        text = self._pending + delta
        hold = _partial_tag_suffix(text)
        self._pending = text[len(text) - hold:] if hold else ""
        self._process(text[:len(text) - hold] if hold else text, out)
        return out

    def finish(self) -> list[tuple[str, str]]:
        """Flush a held-back partial tag (it was literal text after all)."""
        out: list[tuple[str, str]] = []
        text, self._pending = self._pending, ""
        self._process(text, out)
        return out


# -- byte-level line buffering -------------------------------------------------------------------

class LineBuffer:
    """Accumulates raw bytes and hands out complete lines, decoded.

    ``feed(chunk)`` returns the complete lines so far (without the newline, ``\\r`` stripped);
    ``close()`` returns the last line when the body ended without a newline. Decoding happens
    per complete line, so a multi-byte character cut across reads is reassembled first.
    Raises GenerationError for a line that is not valid UTF-8.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    @staticmethod
    def _decode(raw: bytes) -> str:
        try:
            return raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GenerationError(f"the model server sent a line that is not UTF-8: {exc}") from None

    def feed(self, chunk: bytes) -> list[str]:
        """Add ``chunk`` (raw bytes); return the lines it completed, decoded, without newline.

        Raises GenerationError when a completed line is not valid UTF-8.
        """
        self._buffer += chunk
        if b"\n" not in chunk:
            return []
        *complete, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        return [self._decode(line) for line in complete]

    def close(self) -> list[str]:
        """The unterminated last line as a one-item list ([] when only whitespace remains).

        Empties the buffer. Raises GenerationError when that line is not valid UTF-8.
        """
        rest, self._buffer = bytes(self._buffer), bytearray()
        return [self._decode(rest)] if rest.strip() else []


def _parse_json_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise GenerationError(f"{where}: malformed JSON line from the model server ({exc}): "
                              f"{line[:200]!r}") from None


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``Z`` or offset, any number of fraction digits) as aware UTC."""
    if not isinstance(value, str) or not value:
        return None
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.strip()).replace("Z", "+00:00")
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.astimezone(timezone.utc)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# -- clients -------------------------------------------------------------------------------------

class ChatClient:
    """Common streaming machinery; subclasses open the request and interpret each message."""

    backend = ""

    def __init__(self, model: str, timeout: float = 120.0) -> None:
        self.model = model
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 5.0))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model}>"

    def stream(self, messages: list[dict[str, str]]) -> Iterator[StreamEvent]:
        """Stream one turn for ``messages`` (``[{"role", "content"}, ...]``).

        Yields "thinking"/"content" deltas and finally one "done" event with the Completion.
        Raises GenerationUnavailable (nothing streamed, no server reachable) or GenerationError.
        """
        raise NotImplementedError

    def _post_stream(self, client: httpx.Client, url: str, payload: dict,
                     headers: dict | None = None):
        """Open a streaming POST; maps connection failures to GenerationUnavailable."""
        request = client.build_request("POST", url, json=payload, headers=headers)
        try:
            return client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise GenerationUnavailable(f"{self.backend} model server {url} unreachable: {exc}") \
                from None
        except httpx.HTTPError as exc:
            raise GenerationError(f"{url}: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _http_error(response: httpx.Response, url: str) -> GenerationError:
        response.read()
        try:
            body = response.json()
            error = body.get("error", body) if isinstance(body, dict) else body
            if isinstance(error, dict):
                error = error.get("message", error)
        except ValueError:
            error = response.text.strip()[:300]
        return GenerationError(f"HTTP {response.status_code} from {url}: {error}")

    def _split_events(self, splitter: ThinkSplitter,
                      pieces: list[tuple[str, str]]) -> Iterator[StreamEvent]:
        for kind, text in pieces:
            if kind == "reclassified":
                yield StreamEvent("thinking", text, reclassified=True)
            else:
                yield StreamEvent(kind, text)

    def _lines(self, response: httpx.Response, url: str) -> Iterator[str]:
        """Complete decoded lines of the streamed body, the last one even without a newline."""
        buffer = LineBuffer()
        try:
            for chunk in response.iter_bytes():
                yield from buffer.feed(chunk)
        except httpx.HTTPError as exc:
            raise GenerationError(f"{url}: the stream broke off ({type(exc).__name__}: {exc})") \
                from None
        yield from buffer.close()


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

    def stream(self, messages: list[dict[str, str]]) -> Iterator[StreamEvent]:
        """Stream one turn from the first healthy Ollama host (see ``ChatClient.stream``).

        When the remembered host cannot be reached, the choice is forgotten and a host is
        picked once more. ``Completion.tok_s`` is ``eval_count`` over ``eval_duration`` (ns).
        Raises GenerationUnavailable (no host reachable) or GenerationError.
        """
        payload = {"model": self.model, "messages": messages, "stream": True,
                   "options": {"num_ctx": ollama_num_ctx(messages, self.num_ctx)}}
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

    def _read(self, response: httpx.Response, host: str, started: float,
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
            obj = _parse_json_line(line, url)
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
        completion.prompt_tokens = _int_or_none(final.get("prompt_eval_count"))
        if prompt_was_cut(messages, completion.prompt_tokens):
            completion.prompt_cut = True
            log.warning("%s evaluated only %d prompt tokens of a prompt of about %d: it "
                        "probably cut the prompt to its context window (num_ctx %d; raise "
                        "AI_GEN_NUM_CTX, or the model's own limit)",
                        url, completion.prompt_tokens,
                        prompt_chars(messages) // CUT_CHARS_PER_TOKEN, num_ctx)
        completion.completion_tokens = _int_or_none(final.get("eval_count"))
        duration = _int_or_none(final.get("eval_duration"))
        if completion.completion_tokens is not None and duration:
            completion.tok_s = completion.completion_tokens * 1e9 / duration
        completion.created_at = parse_timestamp(final.get("created_at"))
        completion.elapsed_s = time.monotonic() - started
        yield StreamEvent("done", completion=completion)


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

    def stream(self, messages: list[dict[str, str]]) -> Iterator[StreamEvent]:
        """Stream one turn from ``{base_url}/chat/completions`` (see ``ChatClient.stream``).

        Raises GenerationUnavailable (server unreachable) or GenerationError.
        """
        url = self.base_url + "/chat/completions"
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True,
                                   "stream_options": {"include_usage": True}}
        if self.max_tokens:
            payload["max_tokens"] = self.max_tokens
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

    def _events(self, response: httpx.Response, url: str) -> Iterator[str]:
        """The data of each server-sent event (multi-line data joined with newlines)."""
        data: list[str] = []
        for line in self._lines(response, url):
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
                continue
            if line.startswith(":"):
                continue  # an SSE comment (keep-alive)
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value[1:] if value.startswith(" ") else value)
        if data:
            yield "\n".join(data)

    def _read(self, response: httpx.Response, url: str, started: float) -> Iterator[StreamEvent]:
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
    obj = _parse_json_line(data, url)
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
            completion.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            completion.completion_tokens = _int_or_none(usage.get("completion_tokens"))
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


def make_chat_client(settings: Settings) -> ChatClient:
    """The chat client ``AI_GEN_BACKEND`` asks for; contacts nothing until ``stream``.

    Raises ConfigError for an unknown backend or an empty ``AI_GEN_MODEL``.
    """
    model = settings.ai_gen_model.strip()
    if not model:
        raise ConfigError("AI_GEN_MODEL: a generation model name is required")
    if settings.ai_gen_backend == "ollama":
        return OllamaChatClient(settings.ai_ollama_hosts, model, settings.ai_gen_num_ctx,
                                settings.ai_http_timeout)
    if settings.ai_gen_backend == "openai":
        return OpenAIChatClient(settings.ai_openai_base_url, model, settings.ai_openai_api_key,
                                settings.ai_http_timeout)
    raise ConfigError(f"AI_GEN_BACKEND: unknown backend {settings.ai_gen_backend!r}")
