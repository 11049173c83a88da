"""Reading an HTTP answer from a server we do not control, within bounds.

Model servers and partner docks are configured by us but not trusted: a broken or hostile one
can trickle its answer a byte at a time (httpx's timeouts bound each read, never the whole),
send an endless body, a gzip bomb, or JSON nested 100,000 deep. Every answer read here is
bounded three ways:

* One deadline for the whole exchange: connect, headers and body. A watchdog thread shuts the
  connection's socket down when it passes, which wakes a read blocked anywhere below us;
  ``DeadlineExceeded`` follows. A stream may move its deadline on as it makes progress
  (``BoundedResponse.extend``): a generation is bounded per line, not in total.
* A limit on the body's decoded bytes. gzip and deflate are inflated here a piece at a time, so
  a bomb stops at the limit having cost the limit; any other content encoding is refused (we
  only ever ask for these two). ``BodyTooLarge``.
* ``loads`` parses JSON strictly: nesting too deep for the parser (RecursionError), NaN,
  Infinity and numbers too large for a float are a ValueError, like any malformed answer.

A ``cancellable()`` scope lets another thread end every exchange the scope's thread has open
(a stopped turn): their sockets are shut down as a deadline would, and ``Cancelled`` follows.
The server sees its connection close, which is how Ollama and OpenAI-compatible servers learn
to stop generating.

Every request says ``Connection: close``. A fresh connection is what lets the watchdog hold the
socket before the first byte of the answer (httpcore's ``trace`` extension reports it as the
connection is made), so trickled headers are cut as well as a trickled body. The cost is one
connection per request, small next to a model's work.

Errors: ``BoundedReadError`` (``DeadlineExceeded``, ``Cancelled``, ``BodyTooLarge``,
``UnsupportedEncoding``)
for a broken bound; httpx's own exceptions for everything else (refused connection, a silence
longer than the client's read timeout, a broken stream). Neither kind is raised by ``send``
for an error status: callers look at ``status_code``.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator

import httpx

PIECE = 64 * 1024          # bytes inflated per step: the most a bomb gets past one check
ACCEPT_ENCODING = "gzip, deflate"
_SOCKET_EVENTS = ("connection.connect_tcp.complete", "connection.start_tls.complete")


class BoundedReadError(Exception):
    """An answer broke one of the bounds; the message says which (the caller names the URL;
    the body is never echoed)."""


class DeadlineExceeded(BoundedReadError):
    """The answer (or its next line) was not complete when the deadline passed."""


class Cancelled(BoundedReadError):
    """The exchange was cancelled from another thread (``CancelScope.cancel``)."""


class BodyTooLarge(BoundedReadError):
    """The decoded body, or one line of it, grew past its limit."""


class UnsupportedEncoding(BoundedReadError):
    """A ``Content-Encoding`` other than gzip, deflate or identity."""


class _Watchdog:
    """Shuts a connection's socket down once ``deadline_at`` (monotonic seconds) passes.

    The socket arrives through ``trace`` (httpcore's trace extension) as the connection is
    made, or through ``adopt``. One daemon thread per exchange sleeps until the deadline,
    which ``extend`` may move on; ``stop`` ends it.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.cancelled = False
        self.scope: CancelScope | None = None
        self._deadline_at = time.monotonic() + seconds
        self._sock: socket.socket | None = None
        self._done = False
        self._cond = threading.Condition()
        threading.Thread(target=self._run, name="http deadline", daemon=True).start()

    def trace(self, event: str, info: dict) -> None:
        if event in _SOCKET_EVENTS and info.get("return_value") is not None:
            self.adopt(info["return_value"].get_extra_info("socket"))

    def adopt(self, sock: socket.socket | None) -> None:
        """Watch ``sock`` (the newest one wins: TLS wraps the plain socket it came from)."""
        with self._cond:
            if sock is not None:
                self._sock = sock
            if self.fired:
                self._shut()

    def extend(self, seconds: float) -> None:
        """Move the deadline to ``seconds`` from now (no effect once it has fired)."""
        with self._cond:
            self._deadline_at = time.monotonic() + seconds
            self.seconds = seconds

    def stop(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify()
        if self.scope is not None:
            self.scope.leave(self)

    def cancel(self) -> None:
        """Fire now: shut the socket down (or as soon as it arrives) and end the thread."""
        with self._cond:
            self.cancelled = self.fired = True
            self._shut()
            self._done = True
            self._cond.notify()

    def error(self) -> BoundedReadError:
        """What a read cut short by this watchdog raises."""
        if self.cancelled:
            return Cancelled("cancelled")
        return DeadlineExceeded(f"no complete answer within {self.seconds:g} s")

    def _run(self) -> None:
        with self._cond:
            while not self._done:
                remaining = self._deadline_at - time.monotonic()
                if remaining <= 0:
                    self.fired = True
                    self._shut()
                    return
                self._cond.wait(remaining)

    def _shut(self) -> None:
        if self._sock is None:
            return
        try:
            # socket.socket's own shutdown, also for an SSLSocket: only the file descriptor
            # is touched, never the TLS state another thread is reading with
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
        except OSError:
            pass  # closed already: nothing left to wake


class _Inflater:
    """Inflates a gzip or deflate body given piece by piece, at most PIECE bytes a step.

    Bytes after the end of the compressed stream are dropped (as httpx does), and ``done``
    tells the reader it need not read them at all. Raises httpx.DecodingError for a body that
    does not inflate.
    """

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        gzipped = encoding in ("gzip", "x-gzip")
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS if gzipped else zlib.MAX_WBITS)
        # deflate: zlib-wrapped as the RFC says, or raw as some servers send it
        self._may_be_raw = not gzipped

    @property
    def done(self) -> bool:
        """Whether the compressed stream has ended."""
        return self._d.eof

    def __call__(self, data: bytes) -> Iterator[bytes]:
        while not self._d.eof:
            try:
                out = self._d.decompress(data, PIECE)
            except zlib.error as exc:
                if not self._may_be_raw:
                    raise httpx.DecodingError(f"{self.encoding} body does not inflate: "
                                              f"{exc}") from None
                self._d, self._may_be_raw = zlib.decompressobj(-zlib.MAX_WBITS), False
                continue
            self._may_be_raw = False
            data = self._d.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < PIECE:
                return


def _inflater_for(header: str | None) -> _Inflater | None:
    """The inflater for a ``Content-Encoding`` value; None for identity. Raises
    UnsupportedEncoding for any other coding and for codings applied one over another."""
    codings = [c.strip().lower() for c in (header or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
        raise UnsupportedEncoding(f"content encoding {header!r} (only {ACCEPT_ENCODING} asked)")
    return _Inflater(codings[0])


class BoundedResponse:
    """A streamed answer whose body is read within the bounds ``stream`` set.

    Attributes:
        status_code, headers: those of the httpx response.
        max_bytes: the decoded bytes the body may hold.
    """

    def __init__(self, response: httpx.Response, watchdog: _Watchdog, max_bytes: int) -> None:
        self._response = response
        self._watchdog = watchdog
        self.status_code = response.status_code
        self.headers = response.headers
        self.max_bytes = max_bytes
        self._decoded = 0

    def extend(self, seconds: float) -> None:
        """Give the rest of the answer (or its next part) ``seconds`` from now."""
        self._watchdog.extend(seconds)

    def _raw(self) -> Iterator[bytes]:
        try:
            for data in self._response.iter_raw():
                if self._watchdog.fired:
                    raise self._watchdog.error()
                yield data
        except httpx.HTTPError:
            if self._watchdog.fired:
                raise self._watchdog.error() from None
            raise
        if self._watchdog.fired:  # a body ended by closing the connection ends early too
            raise self._watchdog.error()

    def iter_bytes(self) -> Iterator[bytes]:
        """The decoded body in pieces (of at most PIECE bytes when it was compressed).

        Raises DeadlineExceeded, BodyTooLarge past ``max_bytes``, UnsupportedEncoding, or
        httpx.HTTPError (a broken stream, a silence past the read timeout, a bad gzip body).
        """
        inflate = _inflater_for(self.headers.get("content-encoding"))
        for data in self._raw():
            for piece in (inflate(data) if inflate else (data,)):
                self._decoded += len(piece)
                if self._decoded > self.max_bytes:
                    raise BodyTooLarge(f"answer larger than {self.max_bytes} bytes")
                if self._watchdog.fired:
                    raise self._watchdog.error()
                yield piece
            if inflate is not None and inflate.done:
                return  # what follows the compressed stream is not the body

    def read(self) -> bytes:
        """The whole decoded body (see ``iter_bytes`` for the errors)."""
        return b"".join(self.iter_bytes())

    def close(self) -> None:
        """Close the connection and end the watchdog."""
        try:
            self._response.close()
        finally:
            self._watchdog.stop()

    def read_error_text(self, limit: int = 64 * 1024) -> str:
        """The start of an error answer as text, at most ``limit`` decoded bytes (less when
        the body ends, breaks off or breaks a bound first): enough for the server's message,
        never its whole body."""
        chunks, size = [], 0
        try:
            for piece in self.iter_bytes():
                chunks.append(piece)
                size += len(piece)
                if size >= limit:
                    break
        except (BoundedReadError, httpx.HTTPError):
            pass  # keep what came: the status says enough
        return b"".join(chunks)[:limit].decode("utf-8", "replace")


class CancelScope:
    """The exchanges a thread has open while inside ``cancellable()``; ``cancel`` may be called
    from any thread, once or more, and also ends exchanges the scope's thread starts later."""

    def __init__(self) -> None:
        self.cancelled = False
        self._lock = threading.Lock()
        self._open: set[_Watchdog] = set()

    def join(self, watchdog: _Watchdog) -> None:
        with self._lock:
            watchdog.scope = self
            self._open.add(watchdog)
            cancelled = self.cancelled
        if cancelled:
            watchdog.cancel()

    def leave(self, watchdog: _Watchdog) -> None:
        with self._lock:
            self._open.discard(watchdog)

    def cancel(self) -> None:
        """Shut down every open exchange of the scope; their reads raise ``Cancelled``."""
        with self._lock:
            self.cancelled = True
            open_now = list(self._open)
        for watchdog in open_now:
            watchdog.cancel()


_scope: ContextVar[CancelScope | None] = ContextVar("bounded_http_cancel_scope", default=None)


@contextmanager
def cancellable(scope: CancelScope | None = None) -> Iterator[CancelScope]:
    """``scope`` (a new one by default) holds the exchanges this thread (this context) starts
    inside the ``with``."""
    scope = scope or CancelScope()
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def _capped_timeout(timeout: httpx.Timeout, deadline: float) -> httpx.Timeout:
    def cap(value: float | None) -> float:
        return deadline if value is None else min(value, deadline)
    return httpx.Timeout(connect=cap(timeout.connect), read=cap(timeout.read),
                         write=cap(timeout.write), pool=cap(timeout.pool))


def send(client: httpx.Client, method: str, url: str, *, deadline: float, max_bytes: int,
         headers: dict[str, str] | None = None, **request: Any) -> BoundedResponse:
    """Send a request and return its answer once the headers are in, the body unread; the
    caller closes it (``BoundedResponse.close``), or uses ``stream``.

    Args:
        client: the httpx client to send with (its timeouts still bound each read, capped
            at ``deadline``).
        deadline: seconds the whole exchange may take from now (``BoundedResponse.extend``
            moves it on).
        max_bytes: decoded bytes the body may hold.
        headers, **request: passed to ``client.build_request`` (``json=``, ``content=``...).

    Raises DeadlineExceeded when the headers are not in by the deadline, httpx.HTTPError
    when the server cannot be reached or breaks off.
    """
    watchdog = _Watchdog(deadline)
    scope = _scope.get()
    if scope is not None:
        scope.join(watchdog)
    sent = {**(headers or {}), "Connection": "close", "Accept-Encoding": ACCEPT_ENCODING}
    try:
        built = client.build_request(method, url, headers=sent,
                                     timeout=_capped_timeout(client.timeout, deadline),
                                     extensions={"trace": watchdog.trace}, **request)
        response = client.send(built, stream=True)
    except httpx.HTTPError:
        watchdog.stop()
        if watchdog.cancelled:
            raise Cancelled("cancelled") from None
        if watchdog.fired:
            raise DeadlineExceeded(f"no answer within {deadline:g} s") from None
        raise
    except BaseException:
        watchdog.stop()
        raise
    network = response.extensions.get("network_stream")
    if network is not None:  # a reused connection did not pass through trace
        watchdog.adopt(network.get_extra_info("socket"))
    return BoundedResponse(response, watchdog, max_bytes)


@contextmanager
def stream(client: httpx.Client, method: str, url: str, *, deadline: float, max_bytes: int,
           **request: Any) -> Iterator[BoundedResponse]:
    """``send`` as a context manager that closes the answer (see ``send``)."""
    response = send(client, method, url, deadline=deadline, max_bytes=max_bytes, **request)
    try:
        yield response
    finally:
        response.close()


@dataclass(frozen=True)
class Answer:
    """A whole answer: status, headers and the decoded body."""

    status_code: int
    headers: httpx.Headers
    content: bytes


def fetch(client: httpx.Client, method: str, url: str, *, deadline: float, max_bytes: int,
          **request: Any) -> Answer:
    """``stream`` and read the whole body, within ``deadline`` seconds and ``max_bytes``.

    Raises BoundedReadError (DeadlineExceeded, BodyTooLarge, UnsupportedEncoding) or
    httpx.HTTPError (see ``stream``).
    """
    with stream(client, method, url, deadline=deadline, max_bytes=max_bytes,
              **request) as response:
        return Answer(response.status_code, response.headers, response.read())


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]!r} is out of range")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name} in the answer")


def loads(data: bytes | str) -> Any:
    """Parse JSON from a server we do not trust.

    Raises ValueError for malformed JSON, text that is not UTF-8, nesting too deep to parse,
    NaN/Infinity, and numbers beyond a float's range or integers of more than 4,300 digits.
    """
    try:
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
