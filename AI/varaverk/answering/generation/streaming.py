"""The streaming machinery both chat protocols share: ``ChatClient`` and ``LineBuffer``.

The body is read as raw bytes, buffered, split on ``b"\\n"``; only complete lines are decoded
and parsed, and a last line without a newline is parsed at EOF. A UTF-8 character or a JSON
object cut across reads is therefore never a problem. ``GenerationUnavailable`` is raised only
when no server could be reached and nothing was streamed; every other failure, including an
``{"error": ...}`` line or a dropped connection mid-stream, is a ``GenerationError``.

A hostile or broken server costs one deadline and bounded memory (``varaverk.bounded_http``):
the answer must start within AI_HTTP_TIMEOUT and each further line (an SSE keep-alive comment
does not count) must be complete within AI_HTTP_TIMEOUT of the one before, so a slow model
streams as long as it keeps writing but a trickle that never finishes a line is cut; a line or
an event holds at most MAX_LINE_BYTES, the whole stream MAX_STREAM_BYTES (both decoded: gzip is
inflated a piece at a time), an error answer is read only as far as its message, and JSON nested
too deeply is a malformed line. Each is a GenerationError.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Iterator

import httpx

from varaverk import bounded_http
from varaverk.answering.generation.events import (GenerationError, GenerationUnavailable,
                                                  StreamEvent)
from varaverk.answering.generation.think_tags import ThinkSplitter

# A line (Ollama) or an event (SSE) holds one delta and a few counts: far below this.
MAX_LINE_BYTES = 1024 * 1024
# A whole stream: some hundred thousand tokens of Ollama's lines, many times a long answer.
MAX_STREAM_BYTES = 64 * 1024 * 1024


class LineBuffer:
    """Accumulates raw bytes and hands out complete lines, decoded.

    ``feed(chunk)`` returns the complete lines so far (without the newline, ``\\r`` stripped);
    ``close()`` returns the last line when the body ended without a newline. Decoding happens
    per complete line, so a multi-byte character cut across reads is reassembled first.
    Raises GenerationError for a line that is not valid UTF-8 or longer than ``max_line``
    bytes (a line is held whole until its newline comes).
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self.max_line = max_line

    def _too_long(self) -> GenerationError:
        return GenerationError(f"the model server sent a line longer than {self.max_line} "
                               "bytes")

    @staticmethod
    def _decode(raw: bytes) -> str:
        try:
            return raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GenerationError(f"the model server sent a line that is not UTF-8: {exc}") \
                from None

    def feed(self, chunk: bytes) -> list[str]:
        """Add ``chunk`` (raw bytes); return the lines it completed, decoded, without newline.

        Raises GenerationError when a completed line is not valid UTF-8, or a line grows
        longer than ``max_line`` bytes.
        """
        self._buffer += chunk
        if b"\n" not in chunk:
            if len(self._buffer) > self.max_line:
                raise self._too_long()
            return []
        *complete, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        if len(rest) > self.max_line or any(len(line) > self.max_line for line in complete):
            raise self._too_long()
        return [self._decode(line) for line in complete]

    def close(self) -> list[str]:
        """The unterminated last line as a one-item list ([] when only whitespace remains).

        Empties the buffer. Raises GenerationError when that line is not valid UTF-8.
        """
        rest, self._buffer = bytes(self._buffer), bytearray()
        return [self._decode(rest)] if rest.strip() else []


def parse_json_line(line: str, where: str) -> Any:
    """One line of a stream as JSON; GenerationError naming ``where`` when it is not JSON
    (nesting too deep for the parser included)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise GenerationError(f"{where}: malformed JSON line from the model server ({reason}): "
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


def int_or_none(value: Any) -> int | None:
    """A count as the server reported it: a whole number >= 0, else None (unknown, never 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ChatClient:
    """Common streaming machinery; subclasses open the request and interpret each message.

    Attributes:
        max_line_bytes: the longest line or event accepted (MAX_LINE_BYTES).
        max_stream_bytes: the most a whole stream may hold, decoded (MAX_STREAM_BYTES).
    """

    backend = ""
    max_line_bytes = MAX_LINE_BYTES
    max_stream_bytes = MAX_STREAM_BYTES

    def __init__(self, model: str, timeout: float = 120.0) -> None:
        self.model = model
        self._seconds = timeout  # for the answer to start, then for each further line
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 5.0))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model}>"

    def stream(self, messages: list[dict[str, str]],
               json_schema: dict | None = None) -> Iterator[StreamEvent]:
        """Stream one turn for ``messages`` (``[{"role", "content"}, ...]``); with
        ``json_schema``, the model is constrained to JSON of that schema (structured output).

        Yields "thinking"/"content" deltas and finally one "done" event with the Completion.
        Raises GenerationUnavailable (nothing streamed, no server reachable) or GenerationError.
        """
        raise NotImplementedError

    def _post_stream(self, client: httpx.Client, url: str, payload: dict,
                     headers: dict | None = None) -> bounded_http.BoundedResponse:
        """Open a streaming POST whose answer must start within the timeout (the caller
        closes it); maps connection failures to GenerationUnavailable."""
        try:
            return bounded_http.send(client, "POST", url, deadline=self._seconds,
                                     max_bytes=self.max_stream_bytes, json=payload,
                                     headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise GenerationUnavailable(f"{self.backend} model server {url} unreachable: {exc}") \
                from None
        except bounded_http.BoundedReadError as exc:
            raise GenerationError(f"{url}: {exc} (AI_HTTP_TIMEOUT)") from None
        except httpx.HTTPError as exc:
            raise GenerationError(f"{url}: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _http_error(response: bounded_http.BoundedResponse, url: str) -> GenerationError:
        """The error an answer with an error status stands for; reads only the start of its
        body (enough for the server's message)."""
        text = response.read_error_text()
        try:
            body = bounded_http.loads(text)
            error = body.get("error", body) if isinstance(body, dict) else body
            if isinstance(error, dict):
                error = error.get("message", error)
        except ValueError:
            error = text.strip()
        return GenerationError(f"HTTP {response.status_code} from {url}: {str(error)[:300]}")

    def _split_events(self, splitter: ThinkSplitter,
                      pieces: list[tuple[str, str]]) -> Iterator[StreamEvent]:
        for kind, text in pieces:
            if kind == "reclassified":
                yield StreamEvent("thinking", text, reclassified=True)
            else:
                yield StreamEvent(kind, text)

    def _lines(self, response, url: str) -> Iterator[str]:
        """Complete decoded lines of the streamed body, the last one even without a newline.

        ``response``: a ``bounded_http.BoundedResponse`` (each line that carries something
        gives the next one the whole timeout again), or any response with ``iter_bytes``.
        Raises GenerationError for a broken stream and for every bound broken.
        """
        buffer = LineBuffer(self.max_line_bytes)
        bounded = isinstance(response, bounded_http.BoundedResponse)
        try:
            for chunk in response.iter_bytes():
                lines = buffer.feed(chunk)
                if bounded and any(line.strip() and line[0] != ":" for line in lines):
                    response.extend(self._seconds)
                yield from lines
        except bounded_http.DeadlineExceeded:
            raise GenerationError(f"{url}: the model server sent no complete line within "
                                  f"{self._seconds:g} s (AI_HTTP_TIMEOUT)") from None
        except (bounded_http.BoundedReadError, GenerationError) as exc:
            raise GenerationError(f"{url}: {exc}") from None
        except httpx.HTTPError as exc:
            raise GenerationError(f"{url}: the stream broke off ({type(exc).__name__}: {exc})") \
                from None
        yield from buffer.close()
