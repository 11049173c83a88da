"""One bad conversation file is set aside and everything else keeps working; hostile request
bodies (deep nesting, a lone surrogate) are 400, never 500."""

from __future__ import annotations

import json

import pytest

from tests.dock.conftest import QUESTION, SAME, events_of
from varaverk.ledger.storage import read_rows


def _chats(settings):
    return settings.ai_data_dir / "ai_chats"


def _ask(client, **fields):
    resp = client.post("/api/ask", json={"question": QUESTION, **fields}, headers=SAME)
    assert resp.status_code == 200, resp.data
    return events_of(resp.data)


def _deep_file(depth: int = 1000) -> bytes:
    data = ('{"id":"x","messages":' + "[" * depth + "]" * depth + "}").encode()
    return data


@pytest.mark.parametrize("bad", ["deep", "directory", "surrogate"])
def test_a_bad_chat_file_is_set_aside_and_saves_go_on(client, settings, bad):
    good = _ask(client)[-1]["data"]["chat_id"]
    folder = _chats(settings)
    name = "2026-01-01T00-00-00-hostA-bad.json"
    if bad == "deep":
        (folder / name).write_bytes(_deep_file())
        assert 1900 < len(_deep_file()) < 2100  # the 2 KB file of the report
    elif bad == "directory":
        (folder / name).mkdir()
    else:
        (folder / name).write_text('{"id":"s","messages":[{"role":"user","content":"\\ud800"},'
                                   '{"role":"user","content":"kept"}]}')
    listing = client.get("/api/chats")
    assert listing.status_code == 200
    ids = [c["id"] for c in listing.get_json()["chats"]]
    assert good in ids
    if bad != "surrogate":
        assert any(name in p for p in listing.get_json().get("problems", [])) or \
            not (folder / name).exists()
        assert [p.name for p in folder.iterdir() if p.name.startswith(name + ".corrupt-")]
    # Every later turn still saves: a new chat and the existing one.
    assert _ask(client)[-1]["type"] == "saved"
    assert _ask(client, chat_id=good)[-1]["type"] == "saved"
    if bad == "surrogate":
        chat = client.get("/api/chats/2026-01-01T00-00-00-hostA-bad")
        assert chat.status_code == 200
        assert [m["content"] for m in chat.get_json()["messages"]] == ["kept"]
        assert _ask(client, chat_id="2026-01-01T00-00-00-hostA-bad")[-1]["type"] == "saved"
    rows, problems = read_rows(settings.token_db_path)
    assert len(rows) >= 3 and problems == []


@pytest.mark.parametrize("route, body", [
    ("/api/ask", b'{"question":' + b"[" * 100000 + b"]" * 100000 + b"}"),
    ("/api/ask", b'{"question":"x","profile":' + b'{"a":' * 50 + b"1" + b"}" * 50 + b"}"),
    ("/api/ask", b'{"question":"\\ud800 what?"}'),
    ("/api/chats", b'{"messages":[{"role":"user","content":"\\udfff"}]}'),
    ("/api/bug-reports/draft", b'{"title":"\\ud800","profile":"troubleshoot"}'),
    ("/api/bug-reports/draft", b'{"title":' + b"[" * 5000 + b"]" * 5000 + b"}"),
])
def test_hostile_bodies_are_400(client, route, body):
    resp = client.post(route, data=body, headers={**SAME, "Content-Type": "application/json"})
    assert resp.status_code == 400, resp.data[:200]
    message = resp.get_json()["error"]
    assert "nested deeper" in message or "lone surrogate" in message


def test_stored_chats_survive_hostile_bodies(client, settings):
    good = _ask(client)[-1]["data"]["chat_id"]
    before = (_chats(settings) / f"{good}.json").read_bytes()
    client.post("/api/ask", data=b'{"question":"\\ud800","chat_id":"' + good.encode() + b'"}',
                headers={**SAME, "Content-Type": "application/json"})
    assert (_chats(settings) / f"{good}.json").read_bytes() == before
    assert json.loads(before)["messages"][0]["content"] == QUESTION
