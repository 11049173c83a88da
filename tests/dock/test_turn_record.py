"""A saved answer's turn record (reasoning, timings, tokens, escalation, findings): checked on
the way in and out, kept through a real turn of the dock, never replayed into a prompt."""

from __future__ import annotations

import json
import logging

import pytest

from tests.dock.conftest import QUESTION, SAME, events_of
from varaverk_dock.conversations import ChatStore
from varaverk_dock.turn_record import (MAX_REASONING_CHARS, InvalidRecord, record_of_turn,
                                       validate_record)

RECORD = {"profile": "varaverk", "reasoning": "I weigh the cap.",
          "timings": {"retrieval_s": 0.25, "total_s": 1.5}, "prompt_tokens": 700,
          "completion_tokens": 12, "tok_s": 20.0, "not_covered": False, "prompt_cut": False,
          "findings": [{"line": 4, "reason": "recursive delete", "snippet": "rm -rf /",
                        "rule": "rm-root"}]}


def test_validate_record_keeps_the_known_keys_and_drops_the_rest():
    assert validate_record({**RECORD, "extra": "dropped", "tok_s": None}) == {
        k: v for k, v in RECORD.items() if k != "tok_s"}


@pytest.mark.parametrize("raw, fault", [
    ([], "not an object"),
    ({"reasoning": "x" * (MAX_REASONING_CHARS + 1)}, "reasoning"),
    ({"timings": {"total_s": float("nan")}}, "timing total_s"),
    ({"timings": {"total_s": -1}}, "timing total_s"),
    ({"prompt_tokens": 1.5}, "prompt_tokens"),
    ({"completion_tokens": True}, "completion_tokens"),
    ({"not_covered": "yes"}, "not_covered"),
    ({"findings": [{"line": 0, "reason": "r"}]}, "finding"),
    ({"findings": [{"line": 2, "reason": 3}]}, "finding reason"),
    ({"escalated_to": "x\x00"}, "escalated_to"),
    ({"capabilities": [{"name": "n", "summary": 5}]}, "capability summary"),
    ({"capabilities": "all"}, "capabilities"),
])
def test_validate_record_refuses(raw, fault):
    with pytest.raises(InvalidRecord, match=fault):
        validate_record(raw)


def test_record_of_turn_takes_the_escalation_and_the_findings_events():
    done = {"profile": "varaverk", "reasoning": "", "timings": {"total_s": 1.0},
            "prompt_tokens": 5, "completion_tokens": 2, "tok_s": None, "not_covered": False,
            "prompt_cut": False, "answer": "not in the record"}
    events = {"profile": [{"profile": "varaverk", "reason": "the index is confident"}],
              "findings": [{"findings": RECORD["findings"]}],
              "capability": [{"name": "scoped_log", "summary": "read 2 lines", "extra": 1}]}
    record = validate_record(record_of_turn(done, "chat", events))
    assert record["escalated_to"] == "varaverk"
    assert record["escalation_reason"] == "the index is confident"
    assert record["findings"] == RECORD["findings"]
    assert record["capabilities"] == [{"name": "scoped_log", "summary": "read 2 lines"}]
    assert "answer" not in record and "reasoning" not in record
    assert "escalated_to" not in record_of_turn(done, "varaverk", {})


def test_a_record_survives_a_save_and_a_load_and_a_bad_one_is_dropped(tmp_path, caplog):
    store = ChatStore(tmp_path / "ai_chats", "hostA")
    chat = store.append_turn(None, "q?", "a.", "varaverk", record=RECORD)
    assert store.load(chat.id).messages[1]["record"] == RECORD
    assert store.load(chat.id).history()[1] == {"role": "assistant", "content": "a."}
    caplog.set_level(logging.WARNING, logger="varaverk")
    bad = store.append_turn(None, "q?", "b.", "varaverk", record={"timings": "soon"})
    assert store.load(bad.id).messages[1] == {"role": "assistant", "content": "b."}
    assert any("without its record" in r.getMessage() for r in caplog.records)
    # A record broken on disk: the answer is kept, the record dropped, the file still loads.
    path = store.path_of(chat.id)
    body = json.loads(path.read_text())
    body["messages"][1]["record"] = {"prompt_tokens": "many"}
    path.write_text(json.dumps(body))
    assert store.load(chat.id).messages[1] == {"role": "assistant", "content": "a."}


def test_a_turn_through_the_dock_is_reopened_with_its_record_and_never_replayed(client, model):
    model.script(thinking=["SECRET-REASONING"], content=["The cap is MIRROR_MAX_DELETE_PCT."])
    events = events_of(client.post("/api/ask", json={"question": QUESTION},
                                   headers=SAME).data)
    chat_id = next(e for e in events if e["type"] == "saved")["data"]["chat_id"]
    done = next(e for e in events if e["type"] == "done")["data"]
    body = client.get(f"/api/chats/{chat_id}").get_json()
    answer = body["messages"][1]
    assert answer["record"]["reasoning"] == "SECRET-REASONING"
    assert answer["record"]["timings"] == done["timings"]
    assert answer["record"]["completion_tokens"] == done["completion_tokens"]
    assert answer["sources"][0]["text"] == done["sources"][0]["text"]
    listing = client.get("/api/chats").get_json()
    assert listing["kept"] == 10
    model.script(content=["again"])
    client.post("/api/ask", json={"question": "and then?", "chat_id": chat_id},
                headers=SAME).get_data()  # the stream runs as it is read
    prompt = json.dumps(model.requests_to("/api/chat")[-1].json["messages"])
    assert "SECRET-REASONING" not in prompt and "The cap is MIRROR_MAX_DELETE_PCT." in prompt
