"""The chat worker: events, not covered without a model call, escalation, errors, ledger."""

from __future__ import annotations

import pytest

from tests.query.conftest import query_settings
from tests.support.environ import environ_without_ai
from varaverk.answering.answer import TurnEvent, TurnRequest, run_turn

MOVER = "what stops rsync and the mover running at once"


@pytest.fixture
def settings(harborlab_pristine, harborlab_index, model_server):
    return query_settings(harborlab_pristine, harborlab_index, model_server)


def events(request, settings, retriever, **kw):
    return list(run_turn(request, settings, retriever=retriever, **kw))


def types(evs):
    return [e.type for e in evs]


def test_answer_flow(settings, retriever, model_server, tmp_path):
    model_server.script(content=["The mover is held ", "[Backup/rsync_mirror.sh › "
                                 "OPERATIONAL SAFEGUARDS › Mover Coordination]."],
                        thinking=["Look at", " safeguards."])
    ledger = tmp_path / "tokens.db"
    evs = events(TurnRequest("varaverk", MOVER), settings, retriever, ledger_path=ledger,
                 host="hostA")
    t = types(evs)
    assert t[0] == "sources" and t[-1] == "done"
    assert t.count("done") == 1 and "error" not in t
    assert "thinking" in t and "content" in t
    sources = evs[0].data["sources"]
    assert any(s["citation"] == "Backup/rsync_mirror.sh › OPERATIONAL SAFEGUARDS › Mover Coordination"
               for s in sources)
    assert evs[0].data["confident"] is True
    assert {"path", "kind", "section", "title", "start_line", "end_line", "score", "text"} \
        <= set(evs[0].data["results"][0])
    done = evs[-1].data
    assert done["answer"].startswith("The mover is held")
    assert done["reasoning"] == "Look at safeguards."
    assert done["not_covered"] is False and done["profile"] == "varaverk"
    assert done["completion_tokens"] == 4 and done["tok_s"] == 20.0
    assert isinstance(done["prompt_tokens"], int)
    assert set(done["timings"]) >= {"retrieval_s", "generation_s", "total_s"}
    # The prompt: profile system prompt + rules, labelled context, the question.
    sent = model_server.requests_to("/api/chat")[-1].json["messages"]
    assert sent[0]["role"] == "system" and "Cite every claim" in sent[0]["content"]
    # One label per excerpt: the section's paragraphs under it, each opened by its title.
    assert "[Backup/rsync_mirror.sh › OPERATIONAL SAFEGUARDS]\n" in sent[-1]["content"]
    assert "\n› Mover Coordination\n" in sent[-1]["content"]
    assert sent[-1]["content"].endswith(f"Question: {MOVER}")
    # Ledger row on done.
    line = ledger.read_text().strip()
    fields = line.split("|")
    assert fields[2:5] == ["hostA", "varaverk", "cli"] and fields[6:] == ["4", "20.0"]


def test_not_covered_calls_no_model(settings, retriever, model_server, tmp_path):
    ledger = tmp_path / "tokens.db"
    evs = events(TurnRequest("varaverk", "Where is the Kubernetes manifest for harborlab?"),
                 settings, retriever, ledger_path=ledger)
    assert types(evs) == ["sources", "done"]
    done = evs[-1].data
    assert done["not_covered"] is True
    assert done["answer"] == "The documentation does not cover this."
    assert done["sources"]  # nearest sources listed
    assert done["prompt_tokens"] is None and done["completion_tokens"] is None
    assert model_server.requests_to("/api/chat") == []
    assert not ledger.exists()


def test_error_mid_stream_gives_error_and_no_done(settings, retriever, model_server, tmp_path):
    model_server.script(content=["The", " mover", " is"])
    model_server.stream_error = "model crashed"
    model_server.stream_error_after = 2
    ledger = tmp_path / "tokens.db"
    evs = events(TurnRequest("varaverk", MOVER), settings, retriever, ledger_path=ledger)
    t = types(evs)
    assert t[-1] == "error" and "done" not in t
    assert evs[-1].data["kind"] == "generation"
    assert "model crashed" in evs[-1].data["message"]
    assert not ledger.exists()


def test_unreachable_server_is_an_unavailable_error(hl_settings, retriever, tmp_path):
    ledger = tmp_path / "tokens.db"
    evs = events(TurnRequest("varaverk", MOVER), hl_settings, retriever, ledger_path=ledger)
    assert types(evs) == ["sources", "error"]
    assert evs[-1].data["kind"] == "unavailable"
    assert not ledger.exists()


def test_chat_escalates_when_confident_and_stays_chat_otherwise(settings, retriever,
                                                                model_server):
    evs = events(TurnRequest("chat", MOVER), settings, retriever)
    assert evs[0] == TurnEvent("profile", {"profile": "varaverk", "from": "chat",
                                           "reason": evs[0].data["reason"]})
    assert evs[-1].data["profile"] == "varaverk"
    sent = model_server.requests_to("/api/chat")[-1].json["messages"]
    assert "Mover Coordination" in sent[-1]["content"]

    model_server.reset()
    evs = events(TurnRequest("chat", "Tell me a joke about penguins"), settings, retriever)
    assert "profile" not in types(evs) and "sources" not in types(evs)
    assert evs[-1].type == "done" and evs[-1].data["profile"] == "chat"
    sent = model_server.requests_to("/api/chat")[-1].json["messages"]
    assert "Documentation excerpts" not in sent[-1]["content"]
    assert sent[-1]["content"] == "Tell me a joke about penguins"


def test_history_is_trimmed_and_follow_up_rewritten(settings, retriever, model_server):
    history = [{"role": "user", "content": "What does the mirror's merge interlock protect against?"},
               {"role": "assistant", "content": "Files that exist only on harbor02."}]
    model_server.script(content=["Can --force-delete lift the merge-run delete interlock?"])
    gen = run_turn(TurnRequest("varaverk", "Can --force-delete get around it?", history=history),
                   settings, retriever=retriever)
    first = next(gen)
    assert first.type == "sources"
    assert first.data["query"] == "Can --force-delete lift the merge-run delete interlock?"
    model_server.script(content=["It does not."])
    rest = list(gen)
    assert rest[-1].type == "done"
    sent = model_server.requests_to("/api/chat")[-1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[-1]["content"].endswith("Question: Can --force-delete get around it?")


def test_code_profile_scans_fenced_shell(settings, retriever, model_server):
    model_server.script(content=["Try:\n```bash\nrm -rf \"$DIR\"/\n```\n"])
    evs = events(TurnRequest("code", "delete my temp dir"), settings, retriever)
    t = types(evs)
    assert "sources" not in t
    assert t[-2:] == ["findings", "done"]
    findings = evs[-2].data["findings"]
    # Line numbers are the answer's own: the rm sits on line 3 of the answer.
    assert [(f["line"], f["snippet"]) for f in findings] == [(3, 'rm -rf "$DIR"/')]
    assert findings[0]["reason"]


def test_unknown_profile(settings, retriever):
    evs = events(TurnRequest("nope", "hi"), settings, retriever)
    assert types(evs) == ["error"] and evs[0].data["kind"] == "profile"


def test_missing_index_for_a_retrieval_profile(tmp_path, model_server, harborlab_pristine):
    settings = query_settings(harborlab_pristine, tmp_path / "empty", model_server)
    evs = list(run_turn(TurnRequest("varaverk", MOVER), settings))
    assert types(evs) == ["error"] and evs[0].data["kind"] == "no_index"
    chat = list(run_turn(TurnRequest("chat", MOVER), settings))
    assert chat[-1].type == "done" and chat[-1].data["profile"] == "chat"


def test_turn_request_from_dict_validates():
    r = TurnRequest.from_dict({"question": "q", "k": 3, "history": []})
    assert (r.profile, r.k, r.source) == ("varaverk", 3, "cli")
    for bad in ({}, {"question": ""}, {"question": "q", "k": 0}, {"question": "q", "history": {}}):
        with pytest.raises(ValueError):
            TurnRequest.from_dict(bad)


def test_worker_cli_reads_a_request_and_writes_ndjson(settings, model_server, tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path
    model_server.script(content=["Held."])
    env = environ_without_ai()
    env.update({"AI_ENABLED": "true", "AI_REPO_ROOT": str(settings.ai_repo_root),
                "AI_DATA_DIR": str(settings.ai_data_dir), "AI_LOG_DIR": str(tmp_path / "log"),
                "AI_GEN_BACKEND": "ollama", "AI_GEN_MODEL": "m",
                "AI_OLLAMA_HOSTS": model_server.base_url})
    entry = Path(__file__).resolve().parents[2] / "Tools" / "varaverk_tools" / "ai_chat_worker.py"
    ledger = tmp_path / "t.db"
    out = subprocess.run([sys.executable, str(entry), "--token-db", str(ledger),
                          "--token-host", "hostA"],
                         input=json.dumps({"profile": "varaverk", "question": MOVER}),
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [l["type"] for l in lines] == ["sources", "content", "done"]
    assert lines[-1]["data"]["answer"] == "Held."
    assert ledger.read_text().count("|hostA|varaverk|cli|") == 1
    bad = subprocess.run([sys.executable, str(entry)], input="{}", capture_output=True,
                         text=True, env=env, timeout=300)
    assert bad.returncode == 2


def test_cli_ledger_rows_are_never_pruned_but_dock_rows_are(settings, retriever, model_server,
                                                           tmp_path):
    ledger = tmp_path / "tokens.db"
    old = "2025-01-01|00:00:00|hostA|varaverk|cli|1|1|1.0\n"
    ledger.write_text(old * 50)
    tight = settings.replace(ai_token_retain_rows=10)
    question = "What stops rsync and the mover running at once?"
    model_server.script(content=["Held."])
    events(TurnRequest("varaverk", question, source="cli"), tight, retriever, ledger_path=ledger)
    assert len(ledger.read_text().splitlines()) == 51
    # 51 rows are past the prune threshold of 10 retained rows: the dock's append prunes.
    model_server.script(content=["Held."])
    events(TurnRequest("varaverk", question, source="webgui"), tight, retriever,
           ledger_path=ledger)
    rows = ledger.read_text().splitlines()
    assert len(rows) == 10 and rows[-1].split("|")[4] == "webgui"
