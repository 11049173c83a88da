"""ai-memory end to end: import a chat export, list, show, search, recall --json without a
generation model, export, forget; the gates (AI_ENABLED, AI_MEMORY_ENABLED) and bad input."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.support.environ import write_master_conf
from varaverk_tools.ai_memory import main

EXPORT = [
    {"chat": "nas", "sender": "me", "timestamp": "2026-03-02T10:00:00",
     "text": "The NAS is the Synology at 192.168.1.20.", "id": "n1"},
    {"chat": "nas", "sender": "assistant", "timestamp": "2026-03-02T10:00:05",
     "text": "Noted, the NAS sits at .20.", "id": "n2"},
    {"chat": "nas", "sender": "me", "timestamp": "2026-03-02T10:01:00",
     "text": "I moved restic backups to the NAS because the cloud bill doubled.", "id": "n3"},
    {"chat": "mover", "sender": "me", "timestamp": "2026-03-05T09:00:00",
     "text": "Never restart the mover during a parity check.", "id": "m1"},
    {"chat": "mover", "sender": "me", "timestamp": "not a time", "text": "lost"},
    {"chat": "mover", "sender": "me", "timestamp": "2026-03-05T09:01:00",
     "text": "<Media omitted>"},
]


@pytest.fixture
def conf(tmp_path, model_server, monkeypatch) -> Path:
    model_server.dims["bow"] = 1024
    for key in [k for k in __import__("os").environ if k.startswith("AI_")]:
        monkeypatch.delenv(key)
    path = write_master_conf(tmp_path / "master.conf", {
        "AI_ENABLED": "true", "AI_MEMORY_ENABLED": "true", "AI_DATA_DIR": tmp_path / "data",
        "AI_LOG_DIR": tmp_path / "log", "AI_EMBED_BACKEND": "ollama", "AI_EMBED_MODEL": "bow",
        "AI_OLLAMA_HOSTS": model_server.base_url, "AI_MEMORY_DIGEST": "model",
        "AI_HTTP_TIMEOUT": "10"})
    (tmp_path / "export.json").write_text(json.dumps(EXPORT), encoding="utf-8")
    return path


def run(conf: Path, *args: str) -> int:
    return main(["--config", str(conf), *args])


def test_import_list_show_search_and_recall_without_generation(conf, model_server, capsys):
    model_server.script(content=["not json"])  # the model digest fails: extractive stands in
    assert run(conf, "import", str(conf.parent / "export.json")) == 0
    out = capsys.readouterr().out
    assert "imported 4 turns of 2 conversations (2 messages skipped)" in out
    assert run(conf, "list") == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[:2] for line in listed] == [["mover", "1 turns"], ["nas", "3 turns"]]
    assert run(conf, "list", "--conversation", "nas") == 0
    assert "extractive (retry)\t3 facts" in capsys.readouterr().out
    assert run(conf, "search", "parity") == 0
    assert "mover\tm1\t2026-03-05T09:00:00\tme: Never restart" in capsys.readouterr().out

    chats_before = len(model_server.requests_to("/api/chat"))
    assert run(conf, "recall", "--json", "why did restic backups move to the NAS?") == 0
    recalled = json.loads(capsys.readouterr().out)
    assert len(model_server.requests_to("/api/chat")) == chats_before  # no generation
    hot = recalled["recalled"][0]
    assert [t["id"] for t in hot["turns"]] == ["n1", "n2", "n3"]
    assert hot["hot"] and hot["votes"] >= 1 and hot["conversation"] == "nas"
    assert hot["facts"][2]["statement"].startswith("I moved restic backups")
    assert hot["recollection"].startswith("I remember (2026-03-02)")
    assert recalled["in_prompt"][0] == hot["triplet"]
    assert '"I moved restic backups to the NAS' in recalled["block"]

    assert run(conf, "show", str(hot["triplet"])) == 0
    shown = capsys.readouterr().out
    assert "[n3 2026-03-02T10:01:00] me: I moved restic" in shown and "facts:" in shown


def test_export_and_forget(conf, capsys, tmp_path):
    run(conf, "import", str(conf.parent / "export.json"))
    assert run(conf, "export", str(tmp_path / "out.json")) == 0
    exported = json.loads((tmp_path / "out.json").read_text())
    assert sorted(c["id"] for c in exported["conversations"]) == ["mover", "nas"]
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o600
    assert run(conf, "forget", "--all") == 2  # --all needs --yes; nothing lost
    assert run(conf, "forget", "--conversation", "mover") == 0
    assert run(conf, "forget", "--triplet", "999") == 2
    assert run(conf, "forget", "--all", "--yes") == 0
    db = sqlite3.connect(tmp_path / "data" / "memory.db")
    assert db.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM facts").fetchone()[0] == 0


def test_memory_off_remembers_nothing(conf, capsys, tmp_path):
    conf.write_text(conf.read_text().replace('AI_MEMORY_ENABLED="true"',
                                             'AI_MEMORY_ENABLED="false"'))
    assert run(conf, "import", str(conf.parent / "export.json")) == 0
    assert "AI_MEMORY_ENABLED is false" in capsys.readouterr().err
    assert not (tmp_path / "data" / "memory.db").exists()
    conf.write_text(conf.read_text().replace('AI_ENABLED="true"', 'AI_ENABLED="false"'))
    assert run(conf, "list") == 0
    assert "AI_ENABLED is false" in capsys.readouterr().err


def test_a_bad_import_file_is_a_usage_error_and_loses_nothing(conf, capsys, tmp_path):
    run(conf, "import", str(conf.parent / "export.json"))
    (tmp_path / "bad.json").write_text('{"chat": "x"}')
    assert run(conf, "import", str(tmp_path / "bad.json")) == 2
    assert "cannot import" in capsys.readouterr().err
    assert run(conf, "import", str(tmp_path / "missing.json")) == 2
    db = sqlite3.connect(tmp_path / "data" / "memory.db")
    assert db.execute("SELECT count(*) FROM turns").fetchone()[0] == 4


def test_eval_prints_votes_beside_both_baselines(conf, capsys):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "memory-dev.json"
    assert run(conf, "eval", "--json", str(fixture)) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["questions"] == 48 and result["triplets"] == 32
    assert set(result["methods"]) == {"votes", "nearest", "bm25"}
    for method in result["methods"].values():
        assert 0.0 <= method["recall@1"] <= method["recall@5"] <= 1.0
    assert result["methods"]["nearest"]["recalled"] == 1.0  # a baseline never abstains
