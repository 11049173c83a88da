"""Memory in the dock: a turn is remembered after it is saved (off the stream), a new chat
recalls it, shows it and saves it with the answer; the memory routes list and forget; deleting
a chat may forget its memories."""

from __future__ import annotations

import time

import pytest

from tests.dock.conftest import (SAME, app, client, data_dir, dock_index, events_of, model,
                                 settings)

__all__ = ["app", "client", "data_dir", "dock_index", "model", "settings"]  # fixtures


@pytest.fixture
def memory_on(settings):
    return settings.replace(ai_memory_enabled=True, ai_memory_digest="extractive")


@pytest.fixture
def memory_client(memory_on):
    from varaverk_dock.app import create_app

    return create_app(memory_on).test_client()


def _ask(client, question: str, chat_id: str | None = None) -> list[dict]:
    body = {"question": question, "profile": "chat"}
    if chat_id:
        body["chat_id"] = chat_id
    resp = client.post("/api/ask", json=body, headers=SAME)
    assert resp.status_code == 200
    return events_of(resp.data)


def _wait_for_memory(client, chat_id: str, turns: int) -> None:
    """Until ``chat_id``'s ``turns`` are stored and digested: recall finds triplets, which the
    digest writes after the turns (on a loaded host, a question asked once the turns showed
    could come before the digest and recall nothing)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = client.get("/api/memory", headers=SAME).get_json()["conversations"]
        if any(c["id"] == chat_id and c["turns"] >= turns and c["triplets"] for c in listed):
            return
        time.sleep(0.1)
    raise AssertionError(f"chat {chat_id} was not remembered")


def test_told_in_one_chat_recalled_shown_and_saved_in_another(memory_client):
    told = _ask(memory_client, "Remember this: my NAS is the Synology DS923 at 192.168.1.20.")
    first = next(e for e in told if e["type"] == "saved")["data"]["chat_id"]
    _wait_for_memory(memory_client, first, 2)

    asked = _ask(memory_client, "Which Synology DS923 is my NAS?")
    types = [e["type"] for e in asked]
    assert "memory" in types and types.index("memory") < types.index("done")
    [recalled] = next(e for e in asked if e["type"] == "memory")["data"]["recalled"]
    assert recalled["label"].startswith("remembered from ")
    assert "my NAS is the Synology DS923" in recalled["label"]
    assert recalled["conversation"] == first
    second = next(e for e in asked if e["type"] == "saved")["data"]["chat_id"]
    stored = memory_client.get(f"/api/chats/{second}", headers=SAME).get_json()["messages"]
    assert stored[1]["record"]["memory"][0]["label"] == recalled["label"]

    triplets = memory_client.get(f"/api/memory/conversations/{first}",
                                 headers=SAME).get_json()["triplets"]
    assert triplets[0]["facts"][0]["statement"].startswith("Remember this: my NAS")
    assert triplets[0]["said_at"][:2] == "20" and "T" in triplets[0]["said_at"]
    [listed] = [c for c in memory_client.get("/api/memory", headers=SAME).get_json()[
        "conversations"] if c["id"] == first]
    assert listed["triplets"] == len(triplets)
    assert listed["opening"].startswith("Remember this: my NAS is the Synology DS923")

    resp = memory_client.delete(f"/api/chats/{first}?forget_memory=1", headers=SAME)
    assert resp.status_code == 204
    listed = memory_client.get("/api/memory", headers=SAME).get_json()["conversations"]
    assert first not in [c["id"] for c in listed]
    assert memory_client.delete(f"/api/memory/triplets/{triplets[0]['id']}",
                                headers=SAME).status_code == 404


def test_deleting_a_chat_without_the_flag_keeps_its_memory(memory_client):
    told = _ask(memory_client, "Remember: the mover never runs during parity checks.")
    chat_id = next(e for e in told if e["type"] == "saved")["data"]["chat_id"]
    _wait_for_memory(memory_client, chat_id, 2)
    assert memory_client.delete(f"/api/chats/{chat_id}", headers=SAME).status_code == 204
    listed = memory_client.get("/api/memory", headers=SAME).get_json()["conversations"]
    assert chat_id in [c["id"] for c in listed]
    resp = memory_client.delete(f"/api/memory/conversations/{chat_id}", headers=SAME)
    assert resp.get_json() == {"forgot": 2}


def test_memory_off_remembers_nothing_and_creates_no_file(client, settings):
    told = _ask(client, "Remember this: my NAS is the Synology DS923.")
    assert told[-1]["type"] == "saved"
    time.sleep(0.5)
    assert client.get("/api/memory", headers=SAME).get_json() == {"enabled": False,
                                                                   "conversations": []}
    assert not settings.memory_path.exists()


def test_a_real_gunicorn_dock_remembers_and_recalls(memory_on, tmp_path):
    import httpx

    from tests.dock.conftest import start_dock

    dock = start_dock(memory_on, tmp_path, workers=2)
    try:
        def ask(question):
            with httpx.stream("POST", dock.url + "/api/ask", json={"question": question,
                              "profile": "chat"}, headers={"Origin": dock.url},
                              timeout=60) as resp:
                return events_of(resp.read())

        told = ask("Remember this: my NAS is the Synology DS923 at 192.168.1.20.")
        first = next(e for e in told if e["type"] == "saved")["data"]["chat_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = httpx.get(dock.url + "/api/memory").json()["conversations"]
            if listed:
                break
            time.sleep(0.2)
        assert [c["id"] for c in listed] == [first]
        asked = ask("Which Synology DS923 is my NAS?")
        done = next(e for e in asked if e["type"] == "done")["data"]
        assert done["memory"][0]["conversation"] == first
    finally:
        dock.stop()


def test_the_saved_memory_record_is_checked():
    from varaverk_dock.turn_record import InvalidRecord, validate_record

    good = {"triplet": 3, "conversation": "c1", "said_at": "2026-03-02T10:00:00",
            "label": "remembered from 2026-03-02: the NAS", "extra": "dropped"}
    assert validate_record({"memory": [good]})["memory"] == [
        {k: v for k, v in good.items() if k != "extra"}]
    for bad in ([{"triplet": "3"}], [{**good, "label": "x" * 301}], [good] * 9, "many"):
        with pytest.raises(InvalidRecord):
            validate_record({"memory": bad})
