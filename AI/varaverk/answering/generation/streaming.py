"""The streaming machinery both chat protocols share: ``ChatClient`` and ``LineBuffer``.

The body is read as raw bytes, buffered, split on ``b"\\n"``; only complete lines are decoded
and parsed, and a last line without a newline is parsed at EOF. A UTF-8 character or a JSON
object cut across reads is therefore never a problem. ``GenerationUnavailable`` is raised only
when no server could be reached and nothing was streamed; every other failure, including an
``{"error": ...}`` line or a dropped connection mid-stream, is a ``GenerationError``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Iterator

import httpx

from varaverk.answering.generation.events import (GenerationError, GenerationUnavailable,
                                                  StreamEvent)
from varaverk.answering.generation.think_tags import ThinkSplitter


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
            raise GenerationError(f"the model server sent a line that is not UTF-8: {exc}") \
                from None

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


def parse_json_line(line: str, where: str) -> Any:
    """One line of a stream as JSON; GenerationError naming ``where`` when it is not JSON."""
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


def int_or_none(value: Any) -> int | None:
    """A count as the server reported it: a whole number >= 0, else None (unknown, never 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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
