"""A hostile (or broken) model server on 127.0.0.1, speaking raw HTTP over real sockets.

Where ``tests.support.model_server`` is a well-behaved server with a few failure knobs, this one
answers with the shapes that a server we do not control can send and that must cost us at most
one deadline and a bounded amount of memory::

    with HostileServer({"/v1/rerank": deep_json()}) as server:
        Reranker(server.openai_base_url, timeout=2).scores("q", ["a"])   # -> None

``routes`` maps a request path to a shape; ``default`` answers every other path (a healthy
``/api/tags`` by default, so an Ollama client picks the host before it meets the shape).
A shape is a callable ``(conn, request)`` that writes the whole answer to the socket ``conn``;
``request`` is the raw request (head and body). The shapes below build the common ones.
Every connection is served by a thread of its own and closed after one answer.
"""

from __future__ import annotations

import functools
import json
import socket
import threading
import time
import zlib
from typing import Callable

Shape = Callable[[socket.socket, bytes], None]

# A valid rerank answer (document 0 first), as a JSON object not yet closed: ``padded`` and
# ``gzip_bomb`` add a long string to it.
RESULTS = b'{"results": [{"index": 0, "relevance_score": 1.0}]'
PAD_START, PAD_END = b', "pad": "', b'"}'


def head(status: int = 200, content_type: str = "application/json",
         length: int | None = None, **extra: str) -> bytes:
    """An HTTP/1.1 status line and headers (``Connection: close``; ``Content-Length`` when
    ``length`` is given, else the body ends when the connection closes)."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Type: {content_type}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def answer(body: bytes, status: int = 200, content_type: str = "application/json",
           **extra: str) -> Shape:
    """Send ``body`` whole, with its length."""
    def shape(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(head(status, content_type, len(body), **extra) + body)
    return shape


def deep_json(depth: int = 100_000) -> Shape:
    """A JSON answer nested ``depth`` brackets deep (``{"results": [[[[...]]]]}``)."""
    return answer(b'{"results": ' + b"[" * depth + b"]" * depth + b"}")


def trickle(body: bytes, every: float = 0.5, headers_too: bool = False,
            content_type: str = "application/json") -> Shape:
    """Headers at once (or a byte at a time too), then ``body`` one byte every ``every`` s."""
    def shape(conn: socket.socket, _request: bytes) -> None:
        start = head(200, content_type, len(body))
        if not headers_too:
            conn.sendall(start)
            start = b""
        for byte in start + body:
            conn.sendall(bytes([byte]))
            time.sleep(every)
    return shape


def endless(prefix: bytes, piece: bytes, total: int, content_type: str = "application/json",
            suffix: bytes = b"", status: int = 200, **extra: str) -> Shape:
    """``prefix``, then ``piece`` repeated to about ``total`` bytes, then ``suffix``; no
    Content-Length (the body ends when the connection closes), made as it is sent."""
    def shape(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(head(status, content_type, **extra) + prefix)
        block = piece * max(1, (1 << 20) // len(piece))
        for _ in range(max(1, total // len(block))):
            conn.sendall(block)
        conn.sendall(suffix)
    return shape


def padded(total: int, start: bytes = RESULTS) -> Shape:
    """A valid JSON answer (``start``, an object left open) padded with a string to ``total``
    bytes."""
    return endless(start + PAD_START, b"a", total, suffix=PAD_END)


@functools.cache
def _bomb_body(decoded: int, start: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    block = b"a" * (1 << 20)
    parts = [packer.compress(start + PAD_START)]
    parts += [packer.compress(block) for _ in range(decoded // len(block))]
    return b"".join(parts) + packer.compress(PAD_END) + packer.flush()


def gzip_bomb(decoded: int = 256 << 20, start: bytes = RESULTS) -> Shape:
    """A gzip body of well under a megabyte that inflates to ``decoded`` bytes: ``start``
    padded as ``padded`` does (one line, valid JSON)."""
    return answer(_bomb_body(decoded, start), Content_Encoding="gzip")


def ndjson_lines(lines: list[bytes], then: Shape | None = None) -> Shape:
    """A chunk-less NDJSON stream: each of ``lines`` at once, then ``then`` continues it."""
    def shape(conn: socket.socket, request: bytes) -> None:
        conn.sendall(head(200, "application/x-ndjson") + b"".join(lines))
        if then is not None:
            then(conn, request)
    return shape


def body_trickle(data: bytes, every: float = 0.5) -> Shape:
    """Continue a body already begun: ``data`` one byte every ``every`` s."""
    def shape(conn: socket.socket, _request: bytes) -> None:
        for byte in data:
            conn.sendall(bytes([byte]))
            time.sleep(every)
    return shape


def body_endless(piece: bytes, total: int) -> Shape:
    """Continue a body already begun: ``piece`` repeated to about ``total`` bytes."""
    def shape(conn: socket.socket, _request: bytes) -> None:
        block = piece * max(1, (1 << 20) // len(piece))
        for _ in range(max(1, total // len(block))):
            conn.sendall(block)
    return shape


HEALTHY_TAGS = answer(json.dumps({"models": [{"name": "m"}]}).encode())


class HostileServer:
    """The server; ``routes`` path -> shape, ``default`` for other paths.

    Attributes:
        base_url: ``http://127.0.0.1:PORT``; openai_base_url: ``base_url + "/v1"``.
        paths: the path of every request received, in order.
    """

    def __init__(self, routes: dict[str, Shape] | None = None,
                 default: Shape | None = None) -> None:
        self.routes = dict(routes or {})
        self.default = default
        self.paths: list[str] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            request = _read_request(conn)
            path = request.split(b" ", 2)[1].decode("ascii", "replace").split("?")[0]
            self.paths.append(path)
            shape = self.routes.get(path)
            if shape is None:
                shape = self.default or (HEALTHY_TAGS if path == "/api/tags" else answer(
                    b'{"error": "not found"}', 404))
            shape(conn, request)
        except (OSError, IndexError):
            pass  # the client hung up (as it should, once it has had enough)
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()

    def __enter__(self) -> "HostileServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_request(conn: socket.socket) -> bytes:
    """The request's head and its Content-Length body."""
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return data
        data += more
    head_part, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head_part.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(body) < length:
        more = conn.recv(65536)
        if not more:
            break
        body += more
    conn.settimeout(None)
    return head_part + b"\r\n\r\n" + body
