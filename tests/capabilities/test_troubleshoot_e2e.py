"""End to end: with a failing job's log open, a troubleshoot turn through the real worker,
a real index of harborlab and the fake model server cites the log lines it used and a
documentation section, the ledger records the ask, and no secret reaches a prompt, a
response or a log line."""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from tests.capabilities.conftest import assert_no_canary
from tests.capabilities.test_scoped_log import FAILING_JOB
from tests.support.model_server import ModelServer
from varaverk.config import Settings

# The harborlab fixture's own canaries (git-ignored conf, ignored data, untracked notes).
HARBORLAB_CANARIES = ("CANARY-7f3a9c-SECRET", "CANARY-b41e02-SECRET", "CANARY-d9e8aa-UNTRACKED")
RATIO_SECTION = "Backup/rsync_mirror.sh › OPERATIONAL SAFEGUARDS › Delete Ratio Ceiling"


@pytest.fixture(scope="module")
def indexed(harborlab_pristine, tmp_path_factory):
    """harborlab indexed once through the fake Ollama embeddings, and that server."""
    from varaverk.index.refresh import refresh

    server = ModelServer().start()
    data = tmp_path_factory.mktemp("ts-index")
    s = _settings(harborlab_pristine, data, server, data / "logs")
    refresh(s, progress=False)
    yield harborlab_pristine, s.index_path, server
    server.stop()


def _settings(repo, data, server, log_dir, **changes) -> Settings:
    values = dict(ai_enabled=True, ai_repo_root=repo, ai_data_dir=data, ai_log_dir=data / "log",
                  ai_embed_backend="ollama", ai_embed_model="fake-embed",
                  ai_ollama_hosts=(server.base_url,), ai_gen_backend="ollama",
                  ai_gen_model="fake-chat", ai_host_name="hostA", ai_http_timeout=20.0,
                  ai_troubleshoot_log_dirs=(str(log_dir),),
                  ai_conf_read_keys=("MIRROR_*", "NOTIFY_API_TOKEN"))
    values.update(changes)
    return Settings(**values)


def test_troubleshoot_answer_cites_log_lines_and_docs_and_leaks_nothing(indexed, tmp_path,
                                                                         caplog, monkeypatch):
    from varaverk.ledger.storage import read_rows
    from varaverk.retrieval.search import Retriever
    from varaverk.answering.answer import TurnRequest, run_turn

    monkeypatch.delenv("AI_CONFIG", raising=False)
    repo, index_file, server = indexed
    server.reset()
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy2(index_file, data / "index.sqlite")
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    log_file = log_dir / "rsync_mirror.log"
    # The job echoed a secret into its log: it must not reach the model either.
    log_file.write_text(FAILING_JOB + "2026-11-29 02:00:42 notify: ERROR relay refused "
                        "token CANARY-7f3a9c-SECRET\n", encoding="utf-8")
    settings = _settings(repo, data, server, log_dir)
    ledger = data / "tokens.db"
    label = f"log lines 1-7 of {log_file}"
    server.script(content=[f"The run skipped photos ({label}): the dry run wanted to delete "
                           f"18.9% of the files, above the ceiling ",
                           f"[{RATIO_SECTION}]."])
    root = logging.getLogger("varaverk")
    root.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    try:
        events = list(run_turn(
            TurnRequest(profile="troubleshoot", question="Why did last night's mirror skip "
                        "photos, and what is MIRROR_MAX_DELETE_PCT and NOTIFY_API_TOKEN?",
                        log_path="rsync_mirror.log", source="webgui"),
            settings, retriever=Retriever(settings), ledger_path=ledger))
    finally:
        root.removeHandler(caplog.handler)

    kinds = [e.type for e in events]
    assert "error" not in kinds, [e.data for e in events if e.type == "error"]
    capabilities = [e.data for e in events if e.type == "capability"]
    assert capabilities[0]["name"] == "scoped_log" and capabilities[0]["summary"] == label
    done = next(e.data for e in events if e.type == "done")
    assert label in done["answer"] and RATIO_SECTION in done["answer"]

    # What the model was given: the numbered log first, the documentation section the log's
    # error lines retrieved, and the whitelisted configuration value, read just now.
    [chat] = server.requests_to("/api/chat")
    messages = chat.json["messages"]
    assert messages[0]["role"] == "system"
    context = "\n".join(m["content"] for m in messages[1:])  # the system prompt has an example label
    assert f"[{label}]" in context
    assert "4 | 2026-11-29 02:00:40 rsync_mirror: ERROR share photos: delete ratio" in context
    # The section's paragraphs come under one label, each opened by its title.
    section, title = RATIO_SECTION.rsplit(" › ", 1)
    assert f"[{section}]\n" in context and f"\n› {title}\n" in context
    assert context.index(f"[{label}]") < context.index(f"[{section}]")  # log first
    assert "MIRROR_MAX_DELETE_PCT: not set in master.conf" in context
    assert "NOTIFY_API_TOKEN=[redacted]" in context
    assert any("Delete Ratio Ceiling" in json.dumps(src, ensure_ascii=False)
               for src in done["sources"])

    rows, problems = read_rows(ledger)
    assert problems == [] and len(rows) == 1
    assert (rows[0].profile, rows[0].source, rows[0].host) == ("troubleshoot", "webgui", "hostA")

    everything_sent = json.dumps([r.json for r in server.requests], ensure_ascii=False)
    everything_back = json.dumps([e.data for e in events], ensure_ascii=False, default=str)
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    for canary in HARBORLAB_CANARIES:
        for where, text in (("prompt", everything_sent), ("response", everything_back),
                            ("log", logged)):
            assert canary not in text, f"{canary} reached the {where}"
    assert_no_canary(everything_sent, everything_back, logged)
