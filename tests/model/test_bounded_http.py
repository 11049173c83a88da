"""varaverk.bounded_http against real sockets: what it decodes (it inflates gzip and deflate
itself), what it refuses, its deadline (moved on by a stream), its JSON, and that it leaves
no watchdog thread behind."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
import zlib

import httpx
import pytest

from tests.support import hostile_server as hs
from varaverk import bounded_http

BODY = b"".join(b"line %d %s\n" % (i, os.urandom(8).hex().encode()) for i in range(40_000))


def _deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("encoding, body", [
    ("gzip", gzip.compress(BODY)),
    ("x-gzip", gzip.compress(BODY)),
    ("deflate", _deflate(BODY, zlib.MAX_WBITS)),       # zlib-wrapped, as the RFC says
    ("deflate", _deflate(BODY, -zlib.MAX_WBITS)),      # raw, as some servers send it
    ("identity", BODY),
    ("gzip", gzip.compress(BODY) + b"trailing bytes"),  # ignored after the end, as httpx does
])
def test_bodies_are_decoded_as_httpx_would(encoding, body):
    with hs.HostileServer({"/x": hs.answer(body, Content_Encoding=encoding)}) as server, \
            httpx.Client() as client:
        answer = bounded_http.fetch(client, "GET", server.base_url + "/x", deadline=10,
                                    max_bytes=len(BODY))
    assert answer.status_code == 200 and answer.content == BODY


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, gzip", "compress"])
def test_other_encodings_are_refused(encoding):
    with hs.HostileServer({"/x": hs.answer(b"xyz", Content_Encoding=encoding)}) as server, \
            httpx.Client() as client:
        with pytest.raises(bounded_http.UnsupportedEncoding, match="content encoding"):
            bounded_http.fetch(client, "GET", server.base_url + "/x", deadline=10,
                               max_bytes=100)


def test_a_body_one_byte_over_the_limit_is_refused():
    with hs.HostileServer({"/x": hs.answer(BODY)}) as server, httpx.Client() as client:
        url = server.base_url + "/x"
        assert bounded_http.fetch(client, "GET", url, deadline=10,
                                  max_bytes=len(BODY)).content == BODY
        with pytest.raises(bounded_http.BodyTooLarge, match=f"larger than {len(BODY) - 1}"):
            bounded_http.fetch(client, "GET", url, deadline=10, max_bytes=len(BODY) - 1)


def test_requests_close_their_connection_and_ask_only_for_what_is_inflated_here():
    seen = []

    def record(conn, request):
        seen.append(request.decode("latin-1").lower())
        hs.answer(b"{}")(conn, request)

    with hs.HostileServer({"/x": record}) as server, httpx.Client() as client:
        bounded_http.fetch(client, "GET", server.base_url + "/x", deadline=10, max_bytes=10)
    assert "connection: close" in seen[0] and "accept-encoding: gzip, deflate\r\n" in seen[0]


def test_a_stream_that_moves_its_deadline_on_outlives_it():
    """Ten pieces 0.3 s apart (3 s in all) under a 1 s deadline moved on at every piece."""
    def pieces(conn, _request):
        conn.sendall(hs.head(200, "text/plain"))
        for i in range(10):
            conn.sendall(b"%d\n" % i)
            time.sleep(0.3)

    with hs.HostileServer({"/x": pieces}) as server, httpx.Client() as client:
        with bounded_http.stream(client, "GET", server.base_url + "/x", deadline=1.0,
                                 max_bytes=100) as response:
            got = b""
            for piece in response.iter_bytes():
                got += piece
                response.extend(1.0)
        assert got == b"".join(b"%d\n" % i for i in range(10))
        started = time.monotonic()
        with pytest.raises(bounded_http.DeadlineExceeded, match="within 1 s"):
            bounded_http.fetch(client, "GET", server.base_url + "/x", deadline=1.0,
                               max_bytes=100)
        assert time.monotonic() - started < 3


def test_no_watchdog_is_left_behind():
    before = threading.active_count()
    with hs.HostileServer({"/x": hs.answer(b"{}"),
                           "/slow": hs.trickle(b"{}" * 50, every=0.1)}) as server, \
            httpx.Client() as client:
        for _ in range(20):
            bounded_http.fetch(client, "GET", server.base_url + "/x", deadline=5, max_bytes=10)
        with pytest.raises(bounded_http.DeadlineExceeded):
            bounded_http.fetch(client, "GET", server.base_url + "/slow", deadline=0.5,
                               max_bytes=1000)
        with bounded_http.stream(client, "GET", server.base_url + "/x", deadline=5,
                                 max_bytes=10) as response:
            assert response.status_code == 200
    time.sleep(0.3)  # the watchdogs wake, see they are done and end
    assert [t.name for t in threading.enumerate() if t.name == "http deadline"] == []
    assert threading.active_count() <= before + 1  # the server's own accept thread at most


def _silent_for(seconds: float):
    """A handler that sends its headers, then nothing for ``seconds`` (a model thinking)."""
    def handler(conn, _request):
        conn.sendall(hs.head(200, "text/plain"))
        time.sleep(seconds)
    return handler


def test_a_cancelled_scope_ends_its_thread_s_reads_at_once():
    with hs.HostileServer({"/think": _silent_for(10), "/wait": _silent_for(10)}) \
            as server, httpx.Client() as client:
        outcomes: dict[str, object] = {}
        scope = bounded_http.CancelScope()
        in_body = threading.Event()

        def reader():
            with bounded_http.cancellable(scope):
                try:
                    with bounded_http.stream(client, "GET", server.base_url + "/think",
                                             deadline=30, max_bytes=100) as response:
                        in_body.set()
                        response.read()
                except bounded_http.BoundedReadError as exc:
                    outcomes["body"] = exc
                try:  # started after the cancel: ended before it waits on anything
                    bounded_http.fetch(client, "GET", server.base_url + "/wait", deadline=30,
                                       max_bytes=100)
                except bounded_http.BoundedReadError as exc:
                    outcomes["later"] = exc

        thread = threading.Thread(target=reader)
        thread.start()
        assert in_body.wait(10)
        time.sleep(0.2)
        scope.cancel()
        thread.join(timeout=5)
        assert not thread.is_alive()
        assert isinstance(outcomes["body"], bounded_http.Cancelled)
        assert isinstance(outcomes["later"], bounded_http.Cancelled)
        # exchanges outside the scope are not touched by it
        assert bounded_http.fetch(client, "GET", server.base_url + "/x", deadline=5,
                                  max_bytes=100).status_code == 404


def test_an_unreachable_server_is_httpx_s_error():
    with httpx.Client() as client, pytest.raises(httpx.ConnectError):
        bounded_http.fetch(client, "GET", "http://127.0.0.1:9/x", deadline=5, max_bytes=10)


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"a": NaN}', "non-finite number NaN"),
    ('{"a": -Infinity}', "non-finite number -Infinity"),
    ('{"a": 1e999}', "out of range"),
    ('{"a": ' + "9" * 5000 + "}", "digits"),
    (b'{"a": "\xff"}', "utf-8"),
    ('{"a": 1', "Expecting"),
])
def test_loads_refuses_what_json_would_crash_on_or_let_through(text, message):
    with pytest.raises(ValueError, match=message):
        bounded_http.loads(text)


def test_loads_keeps_what_json_reads():
    data = {"a": [1, 2.5, -0.0, None, True, "ü"], "b": {"c": 1e300}}
    assert bounded_http.loads(json.dumps(data).encode()) == data


def test_junk_after_a_gzip_body_is_dropped_unkept():
    """A small gzip body followed by endless junk: the body is read, the junk never held
    (zlib keeps bytes after the end of its stream unless it is no longer fed)."""
    from tests.support.measured import run_measured
    shape = hs.endless(gzip.compress(b'{"ok": 1}'), b"junk", 300 << 20, Content_Encoding="gzip")
    with hs.HostileServer({"/x": shape}) as server:
        result = run_measured(
            "import httpx\nfrom varaverk import bounded_http\n"
            "with httpx.Client() as client:\n"
            f"    answer = bounded_http.fetch(client, 'GET', {server.base_url + '/x'!r},\n"
            "                                deadline=30, max_bytes=100)\n"
            "result['content'] = answer.content.decode()\n")
    assert result.get("content") == '{"ok": 1}', result
    assert result["peak_mib"] < 160, result
