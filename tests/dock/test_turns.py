"""Turns that live on the server (``/api/turns``), through Flask's test client against the fake
model server and a real index of harborlab: a turn runs with nobody attached, replays from any
event (Last-Event-ID) without loss or repeats, stops for everyone with its partial answer saved,
and stays within its caps."""

from __future__ import annotations

import json
import time

from tests.dock.conftest import EXPECTED_ANSWER, QUESTION, SAME
from varaverk.answering.turn_log import STALE_SECONDS, TurnLog
from varaverk.ledger.storage import read_rows
from varaverk_dock.app import create_app

SLOW = ["According ", "to ", "the ", "docs, ", "this ", "is ", "slow."]


def start(client, question=QUESTION, **fields):
    return client.post("/api/turns", json={"question": question, **fields}, headers=SAME)


def sse_events(chunks) -> list[dict]:
    """The ``data`` objects of an SSE body (bytes chunks), each checked against its ``id``."""
    text = b"".join(chunks).decode("utf-8")
    events = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines()
                     if ": " in line and not line.startswith(":"))
        if "data" in lines:
            event = json.loads(lines["data"])
            assert int(lines["id"]) == event["seq"]
            events.append(event)
    return events


def follow(client, turn_id, after=None) -> list[dict]:
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    resp = client.get(f"/api/turns/{turn_id}/events", headers=headers)
    assert resp.status_code == 200 and resp.mimetype == "text/event-stream"
    return sse_events([resp.data])


def first_events(client, turn_id, count, after: int | None = None) -> list[dict]:
    """Read a live stream (after event ``after``, sent as ``Last-Event-ID``) until ``count``
    events arrived, then hang up (as a reload does)."""
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    resp = client.get(f"/api/turns/{turn_id}/events", headers=headers, buffered=False)
    got, buf = [], b""
    for chunk in resp.iter_encoded():
        buf += chunk
        got = sse_events([buf.rsplit(b"\n\n", 1)[0] + b"\n\n"]) if b"\n\n" in buf else []
        if len(got) >= count:
            break
    resp.close()
    return got[:count]


def wait_status(app, turn_id, status="running", timeout=20.0):
    log = app.extensions["varaverk_dock"].turn_log
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = log.info(turn_id)
        if info["status"] != "running":
            assert info["status"] == status, info
            return info
        time.sleep(0.05)
    raise AssertionError(f"turn {turn_id} still running after {timeout} s")


def content_of(events) -> str:
    return "".join(e["data"]["text"] for e in events if e["type"] == "content")


def stored(settings) -> list[dict]:
    folder = settings.ai_data_dir / "ai_chats"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_a_turn_runs_with_nobody_attached_and_replays_whole(app, client, settings):
    resp = start(client)
    assert resp.status_code == 202
    turn_id = resp.get_json()["turn_id"]
    assert resp.get_json()["events"] == f"/api/turns/{turn_id}/events"
    wait_status(app, turn_id, "done")
    events = follow(client, turn_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-2:] == ["done", "saved"] and "sources" in kinds
    assert events[0]["data"]["question"] == QUESTION
    assert content_of(events) == EXPECTED_ANSWER == events[-2]["data"]["answer"]
    assert events[-2]["data"]["html"].startswith("<p>According to")
    chat = stored(settings)
    assert [m["content"] for m in chat[0]["messages"]] == [QUESTION, EXPECTED_ANSWER]
    assert chat[0]["id"] == events[-1]["data"]["chat_id"]
    assert len(read_rows(settings.token_db_path)[0]) == 1


def test_last_event_id_resumes_with_nothing_lost_or_repeated(app, client, model):
    model.script(content=SLOW)
    model.delta_delay = 0.1
    turn_id = start(client, profile="chat", question="tell me slowly").get_json()["turn_id"]
    seen = first_events(client, turn_id, 3)
    assert [e["seq"] for e in seen] == [1, 2, 3]
    last = seen[-1]["seq"]
    while True:  # reconnect after every two events, as a flaky connection would
        seen += first_events(client, turn_id, 2, after=last)
        last = seen[-1]["seq"]
        if seen[-1]["type"] == "saved":
            break
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert content_of(seen) == "".join(SLOW)
    assert [e["type"] for e in seen].count("done") == 1


def test_stop_ends_the_turn_for_everyone_and_saves_the_partial_answer(app, client, model,
                                                                      settings):
    model.script(content=SLOW)
    model.delta_delay = 0.3
    turn_id = start(client, profile="code", question="tell me slowly").get_json()["turn_id"]
    early = first_events(client, turn_id, 3)
    assert [e["type"] for e in early] == ["start", "content", "content"]
    stop = client.post(f"/api/turns/{turn_id}/stop", headers=SAME)
    assert stop.status_code == 202 and stop.get_json()["status"] == "stopped"
    events = follow(client, turn_id)
    assert [e["type"] for e in events][-2:] == ["stopped", "saved"]
    partial = events[-2]["data"]["answer"]
    assert partial == content_of(events) and "".join(SLOW).startswith(partial)
    assert 0 < len(partial) < len("".join(SLOW))
    messages = stored(settings)[0]["messages"]
    assert messages[1] == {"role": "assistant", "content": partial, "stopped": True}
    time.sleep(1.0)  # the model stream is closed at its next delta: nothing more is written
    assert follow(client, turn_id) == events
    assert read_rows(settings.token_db_path)[0] == []  # a stopped answer is no ledger row
    again = client.post(f"/api/turns/{turn_id}/stop", headers=SAME)
    assert again.status_code == 202 and again.get_json()["status"] == "stopped"


def test_one_running_turn_per_chat_and_the_cap_on_turns(settings, model):
    app = create_app(settings.replace(ai_dock_max_turns=2))
    client = app.test_client()
    first = start(client, profile="chat", question="first")
    wait_status(app, first.get_json()["turn_id"], "done")
    chat_id = stored(settings)[0]["id"]
    model.script(content=SLOW)
    model.delta_delay = 0.2
    running = start(client, profile="chat", question="second", chat_id=chat_id).get_json()
    busy = start(client, profile="chat", question="third", chat_id=chat_id)
    assert busy.status_code == 409 and busy.get_json()["turn_id"] == running["turn_id"]
    assert client.get(f"/api/turns?chat_id={chat_id}").get_json() == {
        "running": running["turn_id"]}
    other = start(client, profile="chat", question="elsewhere")
    assert other.status_code == 202
    capped = start(client, profile="chat", question="one too many")
    assert capped.status_code == 429 and "AI_DOCK_MAX_TURNS" in capped.get_json()["error"]
    for turn in (running, other.get_json()):
        wait_status(app, turn["turn_id"], "done")
    assert client.get(f"/api/turns?chat_id={chat_id}").get_json() == {"running": None}
    assert start(client, profile="chat", question="now there is room").status_code == 202


def test_regenerate_and_edit_replace_the_last_answer(app, client, settings, model):
    turn_id = start(client, profile="code", question="first question").get_json()["turn_id"]
    wait_status(app, turn_id, "done")
    chat_id = stored(settings)[0]["id"]
    turn_id = start(client, profile="code", question="second question",
                    chat_id=chat_id).get_json()["turn_id"]
    wait_status(app, turn_id, "done")
    model.script(content=["A new answer."])
    turn_id = start(client, profile="code", question="second question", chat_id=chat_id,
                    replace_last=True).get_json()["turn_id"]
    wait_status(app, turn_id, "done")
    assert follow(client, turn_id)[0]["data"]["replace_last"] is True
    # The replaced turn is not in the prompt's history: only the first question is.
    sent = model.requests_to("/api/chat")[-1].json["messages"]
    assert [m["content"] for m in sent[:-1] if m["role"] == "user"] == ["first question"]
    assert "second question" in sent[-1]["content"]
    model.script(content=["Edited answer."])
    turn_id = start(client, profile="code", question="second, edited", chat_id=chat_id,
                    replace_last=True).get_json()["turn_id"]
    wait_status(app, turn_id, "done")
    messages = [m["content"] for m in stored(settings)[0]["messages"]]
    assert messages[2:] == ["second, edited", "Edited answer."] and len(messages) == 4


def test_bad_requests_get_clear_errors(client):
    assert start(client, replace_last=True).status_code == 409  # nothing to replace
    assert start(client, replace_last="yes").status_code == 400
    assert start(client, history=[]).status_code == 400
    assert client.get("/api/turns/nope/events").status_code == 400
    missing = client.get("/api/turns/" + "0" * 32 + "/events")
    assert missing.status_code == 404 and "kept 24 h" in missing.get_json()["error"]
    assert client.post("/api/turns/" + "0" * 32 + "/stop", headers=SAME).status_code == 404
    turn_id = start(client).get_json()["turn_id"]
    bad = client.get(f"/api/turns/{turn_id}/events", headers={"Last-Event-ID": "-1"})
    assert bad.status_code == 400 and "whole number" in bad.get_json()["error"]
    assert client.get("/api/turns?chat_id=../x").status_code == 400
    cross = client.post("/api/turns", json={"question": "x"},
                        headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403


def test_attached_streams_are_capped_per_process(settings, model):
    app = create_app(settings.replace(ai_dock_max_streams=1))
    client = app.test_client()
    model.script(content=SLOW)
    model.delta_delay = 0.2
    turn_id = start(client, profile="chat", question="slow").get_json()["turn_id"]
    held = client.get(f"/api/turns/{turn_id}/events", buffered=False)
    assert held.status_code == 200
    refused = client.get(f"/api/turns/{turn_id}/events")
    assert refused.status_code == 429 and "AI_DOCK_MAX_STREAMS" in refused.get_json()["error"]
    held.close()  # the place is given back when the response closes, read or not
    assert client.get(f"/api/turns/{turn_id}/events").status_code == 200


def test_a_turn_whose_process_died_is_closed_and_old_turns_are_pruned(tmp_path):
    log = TurnLog(tmp_path / "turns.sqlite", retain_seconds=60)
    dead = log.begin("chat-a", 4, {"question": "q"})
    log.append(dead, 2, [("content", {"text": "half"})])
    now = time.time()
    log._db().execute("UPDATE turns SET heartbeat = ?", (now - STALE_SECONDS - 1,))
    events = list(log.follow(dead, 0, poll_seconds=0.01, idle_seconds=0.01))
    assert [e[1] if e else None for e in events] == ["start", "content", None, "error"]
    assert json.loads(events[-1][2])["kind"] == "interrupted"
    assert log.info(dead)["status"] == "error"
    # The dead turn no longer holds a place under the cap, nor blocks its chat.
    log.begin("chat-a", 1, {"question": "again"})
    log._db().execute("UPDATE turns SET updated = ? WHERE id = ?", (now - 61, dead))
    log.begin(None, 4, {"question": "later"})
    assert log.info(dead) is None and log.read(dead) == (None, [])


def test_a_stop_requested_through_another_process_reaches_the_runner(tmp_path):
    """Two runners over one file stand for two gunicorn workers: the stop is written by one
    and honoured by the other's watcher."""
    from varaverk.answering.answer import TurnEvent
    from varaverk.answering.turn_runner import TurnRunner

    path = tmp_path / "turns.sqlite"
    mine, theirs = TurnRunner(TurnLog(path), poll_seconds=0.05), TurnLog(path)
    finished = []

    def slow_events():
        for word in SLOW:
            time.sleep(0.2)
            yield TurnEvent("content", {"text": word})
        yield TurnEvent("done", {"answer": "".join(SLOW)})

    turn_id = mine.turn_log.begin(None, 4, {"question": "q"})
    thread = mine.start(turn_id, slow_events(),
                        lambda kind, data: finished.append(kind) or [("saved", {"ok": 1})])
    time.sleep(0.5)
    theirs.request_stop(turn_id)
    thread.join(timeout=10)
    status, events = theirs.read(turn_id)
    assert status == "stopped" and finished == ["stopped"]
    kinds = [e[1] for e in events]
    assert kinds[-2:] == ["stopped", "saved"] and "done" not in kinds
    partial = json.loads(events[-2][2])["answer"]
    assert partial == "".join(json.loads(e[2])["text"] for e in events if e[1] == "content")


def test_a_stop_closes_the_model_connection_at_once(tmp_path, model):
    """A model still working on its first token (a long prompt on a small machine) used to
    keep its connection, and its work, until that token came: a stop now shuts it down."""
    from varaverk.answering.answer import TurnEvent
    from varaverk.answering.generation.ollama import OllamaChatClient
    from varaverk.answering.turn_runner import TurnRunner

    model.script(content=SLOW)
    model.delta_delay = 8.0
    runner = TurnRunner(TurnLog(tmp_path / "turns.sqlite"), poll_seconds=0.05)
    client = OllamaChatClient([model.base_url], "m", timeout=30.0)

    def events():
        for event in client.stream([{"role": "user", "content": "tell me slowly"}]):
            if event.type == "content":
                yield TurnEvent("content", {"text": event.text})
        yield TurnEvent("done", {"answer": "never"})

    turn_id = runner.turn_log.begin(None, 4, {"question": "q"})
    thread = runner.start(turn_id, events(), lambda kind, data: [])
    deadline = time.monotonic() + 10
    while not model.requests_to("/api/chat") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the request is in, the model is "thinking"
    assert runner.stop_here(turn_id)
    thread.join(timeout=3)
    assert not thread.is_alive()
    assert runner.turn_log.read(turn_id)[0] == "stopped"


def test_the_turn_log_is_private_and_a_token_guards_every_turn_route(settings, model):
    token = "turns-token-123"
    app = create_app(settings.replace(ai_dock_token=token))
    client = app.test_client()
    turn_id = client.post("/api/turns", json={"question": QUESTION}, headers={
        **SAME, "X-Varaverk-Token": token}).get_json()["turn_id"]
    assert client.get(f"/api/turns/{turn_id}/events").status_code == 401
    assert client.post(f"/api/turns/{turn_id}/stop", headers=SAME).status_code == 401
    assert client.get("/api/turns?chat_id=x").status_code == 401
    assert client.post("/api/turns", json={"question": "q"}, headers={
        "Origin": "http://evil.example", "X-Varaverk-Token": token}).status_code == 403
    wait_status(app, turn_id, "done")
    assert (settings.ai_data_dir / "turns.sqlite").stat().st_mode & 0o777 == 0o600


def test_a_failed_write_fails_its_own_turn_only(tmp_path):
    import sqlite3
    import threading

    import pytest

    log = TurnLog(tmp_path / "turns.sqlite")
    turns = [log.begin(None, 8, {"question": str(i)}) for i in range(4)]
    with pytest.raises(sqlite3.IntegrityError):
        log.append(turns[0], 1, [("content", {"text": "seq 1 is the start event"})])
    # Appends from many threads at once are committed together and each gets its own seq.
    threads = [threading.Thread(target=lambda t=t: [log.append(t, seq, [("content", {
        "text": f"{seq}"})]) for seq in range(2, 52)]) for t in turns[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for turn_id in turns[1:]:
        status, events = log.read(turn_id)
        assert status == "running" and [e[0] for e in events] == list(range(1, 52))
    assert log.read(turns[0])[1] == [(1, "start", json.dumps({"question": "0",
                                                              "turn_id": turns[0]}))]
