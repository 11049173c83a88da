"""Turns through a real gunicorn with two workers: a stream resumed again and again with
Last-Event-ID, on whichever worker answers, loses and repeats nothing; Stop sent on its own
connection ends every attached stream the same way."""

from __future__ import annotations

import json
import threading

import httpx

SLOW = ["According ", "to ", "the ", "docs, ", "this ", "is ", "slow."]


def start(url: str, question: str = "tell me slowly", **fields) -> str:
    resp = httpx.post(url + "/api/turns", json={"question": question, "profile": "code",
                                                **fields}, headers={"Origin": url}, timeout=30)
    assert resp.status_code == 202, resp.text
    return resp.json()["turn_id"]


def read_stream(url: str, turn_id: str, after: int = 0, limit: int | None = None) -> list[dict]:
    """Events of one SSE connection after ``after``; hangs up after ``limit`` of them."""
    events = []
    headers = {"Last-Event-ID": str(after)} if after else {}
    with httpx.stream("GET", f"{url}/api/turns/{turn_id}/events", headers=headers,
                      timeout=30) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if limit is not None and len(events) >= limit:
                    break
    return events


def test_resuming_on_either_worker_loses_and_repeats_nothing(running_dock, model):
    model.script(content=SLOW)
    model.delta_delay = 0.15
    url = running_dock.url
    turn_id = start(url)
    seen: list[dict] = []
    reconnects = 0
    while not seen or seen[-1]["type"] != "saved":
        seen += read_stream(url, turn_id, seen[-1]["seq"] if seen else 0, limit=1)
        reconnects += 1
    assert reconnects >= 8
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert "".join(e["data"]["text"] for e in seen if e["type"] == "content") == "".join(SLOW)
    assert read_stream(url, turn_id) == seen  # a late page replays exactly the same


def test_stop_on_its_own_connection_ends_every_attached_stream(running_dock, model):
    model.script(content=SLOW)
    model.delta_delay = 0.4
    url = running_dock.url
    turn_id = start(url)
    results: list[list[dict]] = [[], []]

    def attach(i: int) -> None:
        results[i] = read_stream(url, turn_id)

    threads = [threading.Thread(target=attach, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    read_stream(url, turn_id, limit=3)  # two tokens are out
    stopped = [httpx.post(f"{url}/api/turns/{turn_id}/stop", headers={"Origin": url},
                          timeout=30) for _ in range(2)]
    assert [r.status_code for r in stopped] == [202, 202]
    for t in threads:
        t.join(timeout=30)
    assert results[0] == results[1]
    assert [e["type"] for e in results[0]][-2:] == ["stopped", "saved"]
    partial = results[0][-2]["data"]["answer"]
    assert partial and "".join(SLOW).startswith(partial) and partial != "".join(SLOW)
    log = (running_dock.settings.ai_log_dir / "ai-dock.log").read_text()
    assert f"turn {turn_id}: stop requested" in log or f"turn {turn_id} stopped" in log


def test_a_stopped_dock_ends_the_answers_it_was_generating_with_an_error(running_dock, model):
    from varaverk.answering.turn_log import TurnLog

    model.script(content=SLOW)
    model.delta_delay = 1.0
    url = running_dock.url
    turn_id = start(url)
    assert [e["type"] for e in read_stream(url, turn_id, limit=2)] == ["start", "content"]
    running_dock.stop()  # SIGTERM: gunicorn's graceful stop, every worker exits
    status, events = TurnLog(running_dock.settings.ai_data_dir / "turns.sqlite").read(turn_id)
    assert status == "error" and events[-1][1] == "error"
    assert json.loads(events[-1][2])["kind"] == "interrupted"
    assert "ai-dock: 1 answer(s) interrupted" in running_dock.log_file.read_text()
