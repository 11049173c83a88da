"""The model digest: a schema-constrained request, strictly validated; a malformed or failed
digest keeps the extractive one and is retried, at most MAX_ATTEMPTS times."""

from __future__ import annotations

import json

import pytest

from tests.memory.conftest import NAS_TALK
from varaverk.ledger.storage import read_rows
from varaverk.memory.digest import DIGEST_SCHEMA, DigestInvalid, extractive_digest, parse_digest
from varaverk.memory.host_memory import MAX_ATTEMPTS, HostMemory
from varaverk.memory.triplets import Turn

TURNS = [Turn("c", i, f"c:{i}", t["speaker"], t["role"], t["said_at"], t["text"])
         for i, t in enumerate(NAS_TALK[:3])]
GOOD = {"facts": [{"statement": "The NAS is a Synology at 192.168.1.20.", "speaker": "user",
                   "type": "fact"},
                  {"statement": "Restic backups moved to the NAS because the cloud bill "
                                "doubled.", "speaker": "user", "type": "decision"}],
        "recollection": "I remember the user told me their NAS is the Synology at .20."}


def test_a_valid_digest_is_parsed():
    digest = parse_digest(json.dumps(GOOD), TURNS)
    assert digest.method == "model"
    assert [(f.speaker, f.type) for f in digest.facts] == [("user", "fact"), ("user", "decision")]
    assert digest.recollection.startswith("I remember the user told me")


@pytest.mark.parametrize("answer, fault", [
    ("not json", "not JSON"),
    (json.dumps({"facts": []}), "exactly facts and recollection"),
    (json.dumps({**GOOD, "extra": 1}), "exactly facts and recollection"),
    (json.dumps({**GOOD, "facts": []}), "a list of 1 to"),
    (json.dumps({**GOOD, "recollection": " "}), "non-empty"),
    (json.dumps({**GOOD, "facts": [{"statement": "x", "speaker": "user"}]}), "facts\\[0\\]"),
    (json.dumps({**GOOD, "facts": [{"statement": "x", "speaker": "user", "type": "rumour"}]}),
     "rumour"),
    (json.dumps({**GOOD, "facts": [{"statement": "x", "speaker": "system", "type": "fact"}]}),
     "did not speak"),
    (json.dumps({**GOOD, "facts": [{"statement": 3, "speaker": "user", "type": "fact"}]}),
     "strings"),
])
def test_a_malformed_digest_is_refused(answer, fault):
    with pytest.raises(DigestInvalid, match=fault):
        parse_digest(answer, TURNS)


def test_the_extractive_digest_needs_no_model():
    digest = extractive_digest(TURNS)
    assert [f.statement for f in digest.facts] == [
        "The NAS is the Synology at 192.168.1.20.", "Noted: the NAS is the Synology at .20.",
        "I moved restic backups to the NAS because the cloud bill doubled."]
    assert digest.method == "extractive"


def test_the_model_digest_is_schema_constrained_and_stored(memory_settings, model_server):
    model_server.script(content=[json.dumps(GOOD)])
    settings = memory_settings.replace(ai_memory_digest="model", ai_memory_model="digester")
    with HostMemory(settings) as mem:
        mem.remember("c1", NAS_TALK[:3])
        mem.digest_pending()
        [row] = mem.store.triplets()
        assert (row.status, row.digest) == ("digested", "model")
        assert [f.type for f in mem.store.facts(row.id)] == ["fact", "decision"]
    [sent] = model_server.requests_to("/api/chat")
    assert sent.json["format"] == DIGEST_SCHEMA and sent.json["model"] == "digester"
    assert "Exchange:\n<<<" in sent.json["messages"][1]["content"]
    [spent], _ = read_rows(settings.token_db_path)  # the digest's tokens are this host's too
    assert (spent.profile, spent.source, spent.completion_tokens) == ("memory", "digest", 1)


def test_the_openai_protocol_sends_the_schema_as_response_format(memory_settings, model_server):
    model_server.script(content=[json.dumps(GOOD)])
    settings = memory_settings.replace(ai_memory_digest="model", ai_gen_backend="openai",
                                       ai_openai_base_url=model_server.openai_base_url)
    with HostMemory(settings) as mem:
        mem.remember("c1", NAS_TALK[:3])
        mem.digest_pending()
        assert mem.store.triplets()[0].digest == "model"
    [sent] = model_server.requests_to("/v1/chat/completions")
    assert sent.json["response_format"]["json_schema"]["schema"] == DIGEST_SCHEMA


def test_a_malformed_digest_keeps_the_extractive_one_and_is_retried(memory_settings,
                                                                     model_server):
    model_server.script(content=['{"facts": "oops"'])
    settings = memory_settings.replace(ai_memory_digest="model")
    with HostMemory(settings) as mem:
        mem.remember("c1", NAS_TALK[:3])
        mem.digest_pending()
        [row] = mem.store.triplets()
        assert (row.status, row.digest, row.attempts) == ("retry", "extractive", 1)
        assert "not JSON" in row.error
        assert len(mem.store.facts(row.id)) == 3  # recall works meanwhile
        assert mem.store.turns("c1")[0].text == NAS_TALK[0]["text"]  # the raw triplet kept
        model_server.script(content=[json.dumps(GOOD)])
        assert mem.digest_pending() == 1
        [row] = mem.store.triplets()
        assert (row.status, row.digest) == ("digested", "model")


def test_retries_stop_after_max_attempts(memory_settings, model_server):
    model_server.fail_next("/api/chat", 500, {"error": "model crashed"}, times=MAX_ATTEMPTS)
    settings = memory_settings.replace(ai_memory_digest="model")
    with HostMemory(settings) as mem:
        mem.remember("c1", NAS_TALK[:3])
        for attempt in range(1, MAX_ATTEMPTS + 1):
            mem.digest_pending()
            [row] = mem.store.triplets()
            assert row.attempts == attempt
        assert (row.status, row.digest) == ("digested", "extractive")
        assert mem.digest_pending() == 0


def test_no_generation_server_still_remembers_extractively(memory_settings):
    settings = memory_settings.replace(ai_memory_digest="model", ai_gen_backend="openai",
                                       ai_openai_base_url="http://127.0.0.1:9/v1")
    with HostMemory(settings) as mem:
        mem.remember("c1", NAS_TALK[:3])
        mem.digest_pending()
        [row] = mem.store.triplets()
        assert (row.status, row.digest) == ("retry", "extractive")
        assert "unreachable" in row.error
        assert mem.recall("Which Synology is the NAS?")[0].triplet_id == row.id


def test_what_the_model_repeats_is_redacted_too(memory_settings, model_server):
    leaky = {"facts": [{"statement": "The admin password is Hunter2-Secret!", "speaker": "user",
                        "type": "fact"}],
             "recollection": "I remember the token ghp_abcdefghijklmnopqrstuvwxyz0123456789."}
    model_server.script(content=[json.dumps(leaky)])
    with HostMemory(memory_settings.replace(ai_memory_digest="model")) as mem:
        mem.remember("c1", NAS_TALK[:3])
        mem.digest_pending()
        [row] = mem.store.triplets()
        assert [f.statement for f in mem.store.facts(row.id)] == \
            ["The admin password is [redacted]"]
        assert "ghp_" not in mem.store.recollection(row.id)


def test_an_unknown_digest_mode_is_a_configuration_error(tmp_path):
    from varaverk.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="AI_MEMORY_DIGEST: expected one of model, extractive"):
        load_settings(environ={"AI_MEMORY_DIGEST": "magic", "AI_DATA_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="AI_MEMORY_BUDGET: must be between 50 and 100000"):
        load_settings(environ={"AI_MEMORY_BUDGET": "10", "AI_DATA_DIR": str(tmp_path)})
