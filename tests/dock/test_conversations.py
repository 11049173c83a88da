"""The chat store: validation, atomic saves, corrupt files (B29), pruning."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from varaverk_dock.conversations import (MAX_CONTENT_CHARS, ChatNotFound, ChatStore,
                                         CorruptChat, InvalidMessage, validate_message,
                                         validate_messages)

B29_TRUNCATED = (b'{"id":"c1","messages":[{"role":"user","content":"When do backups run?"},'
                 b'{"role":"assistant","content":"Nightly at 02')
VALID = {"id": "c2", "messages": [{"role": "user", "content": "Where is the mirror?"},
                                  {"role": "assistant", "content": "On harbor02."}]}


@pytest.fixture
def store(tmp_path) -> ChatStore:
    return ChatStore(tmp_path / "ai_chats", "hostA", max_chats=10)


def test_validate_message_keeps_only_role_and_content():
    assert validate_message({"role": "user", "content": "hi", "extra": 1}) == {
        "role": "user", "content": "hi"}
    assert validate_message({"role": "assistant", "content": "x" * MAX_CONTENT_CHARS})


SOURCE = {"citation": "Backup/rsync_mirror.sh › CONFIGURATION › MIRROR_MAX_DELETE_PCT",
          "path": "Backup/rsync_mirror.sh", "section": "CONFIGURATION",
          "title": "MIRROR_MAX_DELETE_PCT", "start_line": 40, "end_line": 44, "score": 0.83}


def test_an_answer_keeps_its_sources_record_through_a_save_and_a_load(store):
    chat = store.append_turn(None, "What caps deletions?", "MIRROR_MAX_DELETE_PCT.", "varaverk",
                             sources=[{**SOURCE, "text": "the chunk"}], index_head="ab12cd3" * 2)
    loaded = store.load(chat.id)
    # The chunk's text is kept too, so a reopened answer's source opens to it.
    assert loaded.messages[1] == {"role": "assistant", "content": "MIRROR_MAX_DELETE_PCT.",
                                  "sources": [{**SOURCE, "text": "the chunk"}],
                                  "index_head": "ab12cd3" * 2}
    assert loaded.history() == [{"role": "user", "content": "What caps deletions?"},
                                {"role": "assistant", "content": "MIRROR_MAX_DELETE_PCT."}]


def test_an_answer_whose_sources_cannot_be_stored_is_saved_without_them(store, caplog):
    # A path git listed in bytes that are not UTF-8 reaches us with surrogate escapes.
    caplog.set_level(logging.WARNING, logger="varaverk")
    chat = store.append_turn(None, "q?", "a.", "varaverk",
                             sources=[{**SOURCE, "path": "caf\udce9.sh"}], index_head=None)
    assert store.load(chat.id).messages[1] == {"role": "assistant", "content": "a."}
    assert any("without its sources" in r.getMessage() and "Unicode" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("sources, head, reason", [
    ("not a list", None, "must be a list"),
    ([SOURCE] * 51, None, "at most 50"),
    (["a.sh"], None, "not an object"),
    ([{**SOURCE, "path": ""}], None, "no path"),
    ([{**SOURCE, "title": 5}], None, "title is not a string"),
    ([{**SOURCE, "start_line": 9, "end_line": 3}], None, "line range"),
    ([{**SOURCE, "start_line": True}], None, "line range"),
    ([{**SOURCE, "score": float("nan")}], None, "finite"),
    ([{**SOURCE, "score": "0.9"}], None, "finite"),
    ([SOURCE], "HEAD; rm -rf /", "commit id"),
])
def test_validate_message_rejects_bad_sources(sources, head, reason):
    with pytest.raises(InvalidMessage, match=reason):
        validate_message({"role": "assistant", "content": "x", "sources": sources,
                          "index_head": head})


@pytest.mark.parametrize("raw, reason", [
    ({"role": "system", "content": "x"}, "'system' is not allowed"),
    ({"role": "developer", "content": "x"}, "not allowed"),
    ({"role": None, "content": "x"}, "not allowed"),
    ({"role": "user", "content": None}, "not a string"),
    ({"role": "user", "content": ["a"]}, "not a string"),
    ({"role": "user", "content": "x" * (MAX_CONTENT_CHARS + 1)}, "exceeds the cap"),
    ({"role": "user", "content": "a\x00b"}, "NUL"),
    (["user", "hi"], "not an object"),
])
def test_validate_message_rejects(raw, reason):
    with pytest.raises(InvalidMessage, match=reason):
        validate_message(raw)


def test_validate_messages_names_the_bad_index():
    with pytest.raises(InvalidMessage, match="message 2"):
        validate_messages([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                           {"role": "system", "content": "c"}])
    with pytest.raises(InvalidMessage, match="must be a list"):
        validate_messages({"role": "user"})


def test_ids_carry_host_and_are_unique(store):
    ids = {store.new_id() for _ in range(200)}
    assert len(ids) == 200
    assert all("-hostA-" in i for i in ids)


def test_append_turn_creates_then_continues_a_chat(store):
    chat = store.append_turn(None, "q1", "a1", "varaverk")
    again = store.append_turn(chat.id, "q2", "a2", "chat")
    assert again.id == chat.id
    loaded = store.load(chat.id)
    assert [m["content"] for m in loaded.messages] == ["q1", "a1", "q2", "a2"]
    assert loaded.profile == "chat" and loaded.created == chat.created
    data = json.loads(store.path_of(chat.id).read_text())
    assert set(data) == {"version", "id", "host", "created", "updated", "profile", "title",
                         "messages"}
    assert oct(store.directory.stat().st_mode & 0o777) == "0o700"
    assert oct(store.path_of(chat.id).stat().st_mode & 0o777) == "0o600"


def test_oversized_answer_is_not_stored(store):
    with pytest.raises(InvalidMessage):
        store.append_turn(None, "q", "x" * (MAX_CONTENT_CHARS + 1), "varaverk")
    assert list(store.directory.glob("*.json")) == []


def test_save_leaves_no_temporary_files(store):
    chat = store.append_turn(None, "q", "a", "varaverk")
    for _ in range(5):
        store.append_turn(chat.id, "q", "a", "varaverk")
    assert sorted(p.name for p in store.directory.iterdir()) == [".lock", f"{chat.id}.json"]


def test_debris_of_a_killed_save_is_ignored_then_cleaned(store):
    chat = store.append_turn(None, "q", "a", "varaverk")
    fresh = store.directory / f".{chat.id}.abc123.tmp"
    stale = store.directory / f".{chat.id}.def456.tmp"
    for p in (fresh, stale):
        p.write_bytes(b'{"messages": [')
    old = time.time() - 7200
    os.utime(stale, (old, old))
    chats, problems = store.list_chats()
    assert [c["id"] for c in chats] == [chat.id] and problems == []
    store.append_turn(chat.id, "q2", "a2", "varaverk")
    assert fresh.exists() and not stale.exists()  # a concurrent save's file is left alone


@pytest.mark.parametrize("content, reason", [
    (B29_TRUNCATED, "not valid JSON"),
    (b"", "empty file"),
    (b"\x00" * 4096, "4096 NUL bytes"),
    (b'["a list"]', "not a chat object"),
    (b"\xff\xfe garbage", "not valid JSON"),
])
def test_b29_corrupt_file_is_set_aside_and_reported_once(store, content, reason, caplog):
    caplog.set_level(logging.WARNING, logger="varaverk")
    store.directory.mkdir()
    (store.directory / "2025-01-02T10-15-00-hostA.json").write_bytes(content)
    (store.directory / "2025-01-02T11-00-00-hostB.json").write_text(json.dumps(VALID))
    chats, problems = store.list_chats()
    assert [c["id"] for c in chats] == ["2025-01-02T11-00-00-hostB"]
    assert chats[0]["title"] == "Where is the mirror?"
    assert len(problems) == 1 and reason in problems[0]
    [aside] = list(store.directory.glob("*.corrupt-*"))
    assert aside.name.startswith("2025-01-02T10-15-00-hostA.json.corrupt-")
    assert aside.read_bytes() == content  # kept for inspection, byte for byte
    again, problems_again = store.list_chats()
    assert problems_again == [] and [c["id"] for c in again] == ["2025-01-02T11-00-00-hostB"]
    assert sum("unreadable" in r.getMessage() for r in caplog.records) == 1


def test_loading_a_corrupt_chat_raises_and_sets_it_aside(store):
    store.directory.mkdir()
    (store.directory / "2025-01-02T10-15-00-hostA.json").write_bytes(b"")
    with pytest.raises(CorruptChat, match="set aside"):
        store.load("2025-01-02T10-15-00-hostA")
    with pytest.raises(ChatNotFound):
        store.load("2025-01-02T10-15-00-hostA")


def test_invalid_messages_on_disk_are_dropped_and_logged(store, caplog):
    caplog.set_level(logging.WARNING, logger="varaverk")
    store.directory.mkdir()
    (store.directory / "2025-01-02T10-15-00-hostA.json").write_text(json.dumps({"messages": [
        {"role": "user", "content": "q"}, {"role": "system", "content": "SECRET-INJECTION"},
        {"role": "assistant", "content": 42}, {"role": "assistant", "content": "a"}]}))
    chat = store.load("2025-01-02T10-15-00-hostA")
    assert chat.messages == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("rejected on load" in m for m in messages) == 2
    assert not any("SECRET-INJECTION" in m for m in messages)


@pytest.mark.parametrize("bad", ["../x", "..", "a/b", "a.json", "", "x" * 129, "-x", "a\x00b"])
def test_malformed_ids_never_become_paths(store, bad):
    with pytest.raises(ChatNotFound):
        store.path_of(bad)
    with pytest.raises(ChatNotFound):
        store.delete(bad)


def test_pruned_to_history_max_oldest_first_by_creation(tmp_path):
    store = ChatStore(tmp_path / "ai_chats", "hostA", max_chats=3)
    store.directory.mkdir()
    # Creation order differs from name order and from update order on purpose.
    for name, created, updated in [("b-old", "2025-01-01T00:00:00Z", "2025-06-01T00:00:00Z"),
                                   ("a-mid", "2025-02-01T00:00:00Z", "2025-02-01T00:00:00Z"),
                                   ("c-new", "2025-03-01T00:00:00Z", "2025-03-01T00:00:00Z")]:
        (store.directory / f"{name}.json").write_text(json.dumps(
            {"created": created, "updated": updated,
             "messages": [{"role": "user", "content": name}]}))
    fresh = store.append_turn(None, "newest", "a", "varaverk")
    remaining = sorted(p.stem for p in store.directory.glob("*.json"))
    assert remaining == sorted(["a-mid", "c-new", fresh.id])
    store.append_turn("a-mid", "continue the old one", "a", "varaverk")
    # a-mid was created earliest of those left but the chat just saved is never pruned.
    assert store.path_of("a-mid").exists()


KILLER = r"""
import sys
from varaverk_dock.conversations import ChatStore
store = ChatStore(sys.argv[1], "hostA", max_chats=5)
chat = store.append_turn(None, "q", "first answer " * 10, "varaverk")
print(chat.id, flush=True)
n = 0
while True:
    n += 1
    store.append_turn(chat.id, f"question {n}", ("answer %d " % n) * 2000, "varaverk")
    if len(store.load(chat.id).messages) > 150:
        store.create([{"role": "user", "content": "filler %d" % n}])
"""


def test_sigkill_during_saves_leaves_every_chat_readable(tmp_path):
    folder = tmp_path / "ai_chats"
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", KILLER, str(folder)],
                                stdout=subprocess.PIPE, text=True)
        main_id = proc.stdout.readline().strip()
        time.sleep(0.3 + 0.2 * attempt)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = ChatStore(folder, "hostA")
        chats, problems = store.list_chats()
        assert problems == [] and main_id in {c["id"] for c in chats}
        raw = json.loads(store.path_of(main_id).read_bytes())  # complete JSON, never torn
        chat = store.load(main_id)
        assert len(chat.messages) == len(raw["messages"]) >= 2
        assert len(chat.messages) % 2 == 0  # whole turns only
        assert [m["role"] for m in chat.messages[-2:]] == ["user", "assistant"]
        assert list(folder.glob("*.corrupt-*")) == []
