"""ai-query as users run it: a real subprocess of Tools/varaverk_tools/ai_query.py against real indexes and a
real model server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.query.conftest import query_settings
from tests.support.environ import environ_without_ai

MAIN = Path(__file__).resolve().parents[2]
ENTRY = MAIN / "Tools" / "varaverk_tools" / "ai_query.py"
MOVER = "what stops rsync and the mover running at once"
RESULT_KEYS = {"path": str, "kind": str, "section": str, "title": str, "start_line": int,
               "end_line": int, "score": float, "text": str, "source": str}


def run(settings, *args, enabled=True, timeout=300, env_extra=None):
    env = environ_without_ai()
    env.update({
        "AI_ENABLED": "true" if enabled else "false",
        "AI_REPO_ROOT": str(settings.ai_repo_root),
        "AI_DATA_DIR": str(settings.ai_data_dir),
        "AI_LOG_DIR": str(settings.ai_log_dir),
        "AI_GEN_BACKEND": "ollama", "AI_GEN_MODEL": "m",
        "AI_OLLAMA_HOSTS": " ".join(settings.ai_ollama_hosts),
        "AI_HTTP_TIMEOUT": "10",
        "AI_TROUBLESHOOT_LOG_DIRS": " ".join(settings.ai_troubleshoot_log_dirs),
    })
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(ENTRY), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def served(harborlab_pristine, harborlab_index, model_server):
    return query_settings(harborlab_pristine, harborlab_index, model_server)


def test_search_end_to_end(hl_settings):
    out = run(hl_settings, "--search", MOVER)
    assert out.returncode == 0, out.stderr
    first = out.stdout.split("\n\n")[:3]
    assert any("Backup/rsync_mirror.sh › OPERATIONAL SAFEGUARDS › Mover Coordination" in block
               for block in first)
    assert "The mover is held through Tools/mover_stop.sh" in out.stdout


def test_search_works_with_ai_disabled(hl_settings):
    out = run(hl_settings, "--search", "-k", "2", MOVER, enabled=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(" › ") >= 2


def test_search_json_schema(hl_settings):
    out = run(hl_settings, "--search", "--json", "-k", "3", "--kind", "header",
              "--section", "OPERATIONAL SAFEGUARDS", MOVER)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["query"] == MOVER and data["mode"] == "search"
    assert data["filters"] == {"kind": "header", "section": "OPERATIONAL SAFEGUARDS", "k": 3,
                               "profile": "varaverk", "source": None}
    assert data["confident"] is True
    assert len(data["results"]) == 3
    for r in data["results"]:
        assert set(r) == set(RESULT_KEYS)
        for key, typ in RESULT_KEYS.items():
            assert isinstance(r[key], typ), key
        assert r["kind"] == "header" and r["section"] == "OPERATIONAL SAFEGUARDS"


def test_answer_streams_and_lists_sources(served, model_server):
    model_server.script(content=["The mover ", "is held."], thinking=["secret ", "reasoning"])
    out = run(served, MOVER)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("The mover is held.")
    assert "secret reasoning" not in out.stdout + out.stderr
    assert "Sources:" in out.stdout
    assert "[Backup/rsync_mirror.sh › OPERATIONAL SAFEGUARDS › Mover Coordination]" in out.stdout
    shown = run(served, "--show-reasoning", MOVER)
    assert "secret reasoning" in shown.stderr and "secret reasoning" not in shown.stdout


def test_answer_json_schema(served, model_server):
    model_server.script(content=["Held ", "by mover_stop."])
    out = run(served, "--json", MOVER)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["mode"] == "answer"
    assert data["answer"] == "Held by mover_stop."
    assert data["not_covered"] is False and data["profile"] == "varaverk"
    assert isinstance(data["prompt_tokens"], int) and data["completion_tokens"] == 2
    assert data["tok_s"] == 20.0
    assert data["reasoning"] == ""
    assert isinstance(data["timings"], dict) and "total_s" in data["timings"]
    assert data["sources"] and {"citation", "path", "section", "title", "start_line",
                                "end_line", "score"} <= set(data["sources"][0])
    assert data["results"] and set(data["results"][0]) == set(RESULT_KEYS)


DRAFT = ["Clean the build output:\n\n", "```bash\nset -euo pipefail\n",
         'rm -rf "$OUT_DIR/"*\n', "```\n\nand on the NAS:\n\n```sh\nsudo wipefs -a /dev/sdb\n```\n"]


def test_code_profile_shows_the_scanner_findings(served, model_server):
    model_server.script(content=DRAFT)
    out = run(served, "--profile", "code", "script to clean the build dir")
    assert out.returncode == 0, out.stderr
    findings = out.stdout[out.stdout.index("Scanner findings"):]
    assert "line 5:" in findings and 'rm -rf "$OUT_DIR/"*' in findings
    assert "line 11:" in findings and "sudo wipefs -a /dev/sdb" in findings
    data = json.loads(run(served, "--json", "--profile", "code", "script to clean it").stdout)
    assert [(f["rule"], f["line"], f["snippet"]) for f in data["findings"]] == [
        ("rm-empty-var", 5, 'rm -rf "$OUT_DIR/"*'), ("wipefs", 11, "sudo wipefs -a /dev/sdb")]
    assert all(f["reason"] for f in data["findings"])
    # A clean draft says so; a profile that drafts no shell has no findings at all.
    model_server.script(content=["```sh\nls -l /srv\n```\n"])
    clean = run(served, "--profile", "code", "list the share")
    assert "Scanner: no destructive operations found" in clean.stdout
    assert json.loads(run(served, "--json", MOVER).stdout)["findings"] is None


def test_not_covered_without_a_model_call(served, model_server):
    out = run(served, "How do I set up a Minecraft server container on harbor01?")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("The documentation does not cover this.")
    assert "Nearest sources:" in out.stdout
    assert model_server.requests_to("/api/chat") == []


def test_no_index_exits_66(harborlab_pristine, tmp_path):
    settings = query_settings(harborlab_pristine, tmp_path / "none")
    out = run(settings, "--search", MOVER)
    assert out.returncode == 66
    assert "ai-index" in out.stderr


def test_chunk_numbers_out_of_step_exit_66_naming_the_rebuild(harborlab_pristine,
                                                              harborlab_index, tmp_path):
    import shutil
    import sqlite3

    data = tmp_path / "data"
    shutil.copytree(harborlab_index, data)
    settings = query_settings(harborlab_pristine, data)
    conn = sqlite3.connect(settings.index_path)
    with conn:   # as a writer without the triggers would leave it
        conn.execute("DELETE FROM chunk_numbers WHERE id = (SELECT min(id) FROM chunks)")
    conn.close()
    out = run(settings, "--search", MOVER)
    assert out.returncode == 66, out.stderr
    assert "ai-index --force" in out.stderr and "Traceback" not in out.stderr


def test_unreachable_server_prints_search_results_and_exits_69(hl_settings):
    out = run(hl_settings, MOVER)
    assert out.returncode == 69
    assert "no model server reachable" in out.stderr
    assert "Backup/rsync_mirror.sh › OPERATIONAL SAFEGUARDS › Mover Coordination" in out.stdout
    js = run(hl_settings, "--json", MOVER)
    assert js.returncode == 69
    data = json.loads(js.stdout)
    assert data["error"]["kind"] == "unavailable" and data["results"]


def test_generation_needs_ai_enabled(served, model_server):
    out = run(served, MOVER, enabled=False)
    assert out.returncode == 0
    assert "AI_ENABLED" in out.stderr and out.stdout == ""
    assert model_server.requests == []


def test_ledger_row_b27(served, model_server, tmp_path):
    """B27: no prompt_eval_count → empty prompt_tokens, never 0; the row is dated by this
    host's clock, not by the model server's (here a year and more wrong)."""
    model_server.omit_prompt_eval_count = True
    model_server.created_at = "2025-01-02T10:15:00Z"
    model_server.script(content=[f"w{i} " for i in range(12)])
    ledger = tmp_path / "tokens.db"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    out = run(served, "--token-db", str(ledger), "--token-host", "hostA", MOVER)
    after = datetime.now(timezone.utc)
    assert out.returncode == 0, out.stderr
    day, clock, rest = ledger.read_text().split("|", 2)
    assert before <= datetime.fromisoformat(f"{day}T{clock}+00:00") <= after
    assert rest == "hostA|varaverk|cli||12|20.0\n"
    run(served, "--token-db", str(ledger), "--token-host", "hostA", MOVER)
    assert len(ledger.read_text().splitlines()) == 2


def test_no_ledger_row_without_the_flags(served, model_server, tmp_path):
    model_server.script(content=["ok"])
    out = run(served, MOVER)
    assert out.returncode == 0
    assert not list(Path(served.ai_data_dir).glob("tokens*"))
    half = run(served, "--token-db", str(tmp_path / "t.db"), MOVER)
    assert half.returncode == 2 and not (tmp_path / "t.db").exists()


def test_history_file(served, model_server, tmp_path):
    history = tmp_path / "h.json"
    history.write_text(json.dumps([
        {"role": "user", "content": "What does the mirror's merge interlock protect against?"},
        {"role": "assistant", "content": "Files only on harbor02."}]))
    out = run(served, "--search", "--json", "--history", str(history),
              "Can --force-delete get around it?")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["search_query"].startswith("Can --force-delete get around it? (")
    assert data["results"][0]["title"] == "--force-delete"
    bad = tmp_path / "bad.json"
    bad.write_text('{"role": "user"}')
    assert run(served, "--search", "--history", str(bad), "q").returncode == 2


def test_search_with_ai_disabled_never_contacts_a_remote_embedder(hl_settings, model_server):
    env_settings = hl_settings.replace(ai_ollama_hosts=(model_server.base_url,))
    env = environ_without_ai()
    env.update({"AI_ENABLED": "false", "AI_REPO_ROOT": str(env_settings.ai_repo_root),
                "AI_DATA_DIR": str(env_settings.ai_data_dir), "AI_EMBED_BACKEND": "ollama",
                "AI_EMBED_MODEL": "all-minilm", "AI_OLLAMA_HOSTS": model_server.base_url})
    out = subprocess.run([sys.executable, str(ENTRY), "--search", MOVER], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0
    assert "AI_ENABLED is false" in out.stderr and out.stdout == ""
    assert model_server.requests == []


def test_troubleshoot_reads_the_named_log_first(served, model_server, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "rsync_mirror.log"
    log.write_text("2026-11-29 02:00:01 start\n"
                   "2026-11-29 02:00:09 ERROR delete ratio 31% above ceiling, share skipped\n")
    env_settings = served.replace(ai_troubleshoot_log_dirs=(str(logs),))
    out = run(env_settings, "--profile", "troubleshoot", "--log", str(log),
              "why was the photos share skipped")
    prompt = json.dumps(model_server.requests_to("/api/chat")[-1].json["messages"])
    assert out.returncode == 0, out.stderr
    assert "delete ratio 31% above ceiling" in prompt
    outside = tmp_path / "elsewhere.log"
    outside.write_text("ERROR secret-looking line outside the log folders\n")
    refused = run(env_settings, "--profile", "troubleshoot", "--log", str(outside),
                  "why did it fail")
    sent = [json.dumps(r.json["messages"]) for r in model_server.requests_to("/api/chat")]
    assert len(sent) == 2 and not any("outside the log folders" in p for p in sent)
    assert "resolves outside the configured log folders" in refused.stderr
