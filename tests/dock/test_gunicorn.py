"""End to end: ``ai-dock`` execs a real gunicorn on a free loopback port in front of the fake
model server; concurrency, the ledger, and a crash in the middle of a turn."""

from __future__ import annotations

import json
import threading

import httpx

from tests.dock.conftest import EXPECTED_ANSWER, QUESTION
from varaverk.ledger.storage import read_rows
from varaverk_dock.conversations import ChatStore


def stream_ask(url: str, question: str = QUESTION, **fields) -> list[dict]:
    """POST /api/ask as a browser would (same origin) and collect the NDJSON events."""
    events = []
    with httpx.stream("POST", url + "/api/ask", json={"question": question, **fields},
                      headers={"Origin": url}, timeout=60) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.strip():
                events.append(json.loads(line))
    return events


def test_gunicorn_serves_the_page_and_a_streamed_answer(running_dock):
    page = httpx.get(running_dock.url + "/")
    assert page.status_code == 200 and b'id="composer"' in page.content
    assert httpx.get(running_dock.url + "/static/dock.js").status_code == 200
    events = stream_ask(running_dock.url)
    assert [e["type"] for e in events][-2:] == ["done", "saved"]
    assert events[-2]["data"]["answer"] == EXPECTED_ANSWER
    chats = httpx.get(running_dock.url + "/api/chats").json()["chats"]
    assert [c["id"] for c in chats] == [events[-1]["data"]["chat_id"]]
    cross = httpx.post(running_dock.url + "/api/ask", json={"question": "x"},
                       headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403
    log = running_dock.log_file.read_text()
    assert '"POST /api/ask HTTP/1.1" 200' in log
    dock_log = (running_dock.settings.ai_log_dir / "ai-dock.log").read_text()
    assert "ask: profile=varaverk chat=new" in dock_log
    assert "refused POST /api/ask: cross-origin" in dock_log


def test_twenty_concurrent_asks_all_complete_with_twenty_ledger_rows(running_dock):
    results: list[list[dict] | Exception] = [None] * 20

    def one(i: int) -> None:
        try:
            results[i] = stream_ask(running_dock.url, f"{QUESTION} (asker {i})")
        except Exception as exc:  # collected and asserted below
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    errors = [r for r in results if not isinstance(r, list)]
    assert errors == []
    endings = [[(e["type"], e.get("data")) for e in r][-2:] for r in results]
    assert all([kind for kind, _ in ending] == ["done", "saved"] for ending in endings), \
        [ending for ending in endings if [kind for kind, _ in ending] != ["done", "saved"]]
    rows, problems = read_rows(running_dock.settings.token_db_path)
    assert problems == [] and len(rows) == 20
    assert {(r.host, r.profile, r.source, r.completion_tokens, r.tok_s) for r in rows} == {
        ("hostA", "varaverk", "webgui", 10, 20.0)}
    raw_lines = running_dock.settings.token_db_path.read_text().splitlines()
    assert len(raw_lines) == 20 and all(line.count("|") == 7 for line in raw_lines)
    # AI_CHAT_HISTORY_MAX=10: twenty new chats were saved, the ten oldest pruned.
    store = ChatStore(running_dock.settings.ai_data_dir / "ai_chats", "hostA")
    chats, chat_problems = store.list_chats()
    assert chat_problems == [] and len(chats) == 10


def test_sigkill_during_a_turn_leaves_every_conversation_readable(running_dock, model):
    url = running_dock.url
    first = stream_ask(url)
    chat_id = first[-1]["data"]["chat_id"]
    stream_ask(url, "Another question about MIRROR_MAX_DELETE_PCT")
    store = ChatStore(running_dock.settings.ai_data_dir / "ai_chats", "hostA")
    before = {p.name: p.read_bytes() for p in store.directory.glob("*.json")}
    model.delta_delay = 0.3
    seen = []
    try:
        with httpx.stream("POST", url + "/api/ask", json={"question": "and then?",
                                                          "chat_id": chat_id},
                          headers={"Origin": url}, timeout=60) as resp:
            for line in resp.iter_lines():
                if line.strip():
                    seen.append(json.loads(line)["type"])
                if seen.count("content") == 2:
                    running_dock.kill()
    except httpx.HTTPError:
        pass  # the connection dies with the dock
    assert "content" in seen and "done" not in seen
    after = {p.name: p.read_bytes() for p in store.directory.glob("*.json")}
    assert after == before  # the interrupted turn changed nothing on disk
    chats, problems = store.list_chats()
    assert problems == [] and len(chats) == 2
    for c in chats:
        assert len(store.load(c["id"]).messages) == 2
    assert len(read_rows(running_dock.settings.token_db_path)[0]) == 2


def test_token_in_a_url_never_reaches_the_access_log(settings, tmp_path):
    from tests.dock.conftest import start_dock

    secret = "url-token-that-must-not-be-logged"
    dock = start_dock(settings.replace(ai_dock_token=secret), tmp_path, workers=1)
    try:
        assert httpx.get(dock.url + "/api/chats").status_code == 401
        login = httpx.get(dock.url + f"/?token={secret}")
        assert login.status_code == 302 and secret not in login.headers["location"]
        cookie = login.cookies.get("varaverk_dock")
        assert cookie and secret not in cookie
        assert httpx.get(dock.url + "/api/chats", cookies={"varaverk_dock": cookie}
                         ).status_code == 200
        wrong = httpx.get(dock.url + "/?token=guess-123")
        assert wrong.status_code == 302 and wrong.headers["location"].endswith("/login")
    finally:
        dock.stop()
    logs = dock.log_file.read_text() + (settings.ai_log_dir / "ai-dock.log").read_text()
    assert '"GET / HTTP/1.1" 302' in logs
    assert secret not in logs and "guess-123" not in logs
