"""The test model server itself: other areas rely on its deterministic behaviour."""

from __future__ import annotations

import math

import httpx

from tests.support.model_server import embed_vector, reply_for


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) *
                                               math.sqrt(sum(y * y for y in b)))


def test_bag_of_words_embeddings_make_shared_words_similar(model_server):
    model_server.dims["big"] = 128
    body = httpx.post(model_server.base_url + "/api/embed", json={
        "model": "big", "input": ["rsync mirror backup", "backup with rsync", "cats and dogs"]}).json()
    a, b, c = body["embeddings"]
    assert len(a) == 128
    assert math.isclose(sum(x * x for x in a), 1.0)
    assert _cos(a, b) > 0.5 > _cos(a, c)
    assert _cos(a, embed_vector("rsync mirror backup", 128)) > 0.9999


def test_legacy_endpoint_is_not_normalised(model_server):
    body = httpx.post(model_server.base_url + "/api/embeddings",
                      json={"model": "m", "prompt": "one two three"}).json()
    assert len(body["embedding"]) == 64
    assert sum(x * x for x in body["embedding"]) > 1.5


def test_default_reply_quotes_the_first_label_and_requests_are_recorded(model_server):
    messages = [{"role": "system", "content": "Answer from context."},
                {"role": "user", "content": "[Backup/rsync_mirror.sh › PURPOSE]\nMirrors.\n\nQ?"}]
    body = httpx.post(model_server.base_url + "/api/chat",
                      json={"model": "m", "messages": messages, "stream": False}).json()
    assert body["message"]["content"] == "According to [Backup/rsync_mirror.sh › PURPOSE], this is covered."
    assert body["message"]["content"] == reply_for(messages)
    assert [r.path for r in model_server.requests] == ["/api/chat"]
    assert model_server.requests[0].json["messages"] == messages


def test_fail_next_then_recovers(model_server):
    model_server.fail_next("/api/tags", 503, {"error": "busy"}, times=2)
    codes = [httpx.get(model_server.base_url + "/api/tags").status_code for _ in range(3)]
    assert codes == [503, 503, 200]


def test_a_client_that_hangs_up_mid_stream_prints_no_traceback(model_server, capfd):
    # A traceback printed in the server's thread runs ast.parse there (Python 3.11 marks the
    # failing expression with it), while the test's own thread may be parsing too: CPython
    # gh-106905 then failed the other parse with "AST constructor recursion depth mismatch".
    import socket
    import time

    model_server.delta_delay = 0.05
    with socket.create_connection(("127.0.0.1", model_server.port)) as conn:
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        conn.sendall(b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        conn.recv(64)       # the stream has begun
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    deadline = time.monotonic() + 5
    while model_server.requests[-1].path != "/api/chat" and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)     # the rest of the deltas meet the closed socket
    assert "Traceback" not in capfd.readouterr().err
