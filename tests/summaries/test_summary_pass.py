"""Document summaries: made once per content hash, remade after a model change, refined over a
long file, bounded in time, resumed after kill -9, counted by --status and shown by ai-query."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.index.conftest import ENTRY, cli_env, run_index
from tests.support.repos import git
from varaverk import exitcodes
from varaverk.config import Settings
from varaverk.index.refresh import refresh
from varaverk.index.store.index import Index
from varaverk.ledger.storage import read_rows
from varaverk.summaries.refine import PART_CHARS, parts
from varaverk.summaries.summary_pass import summarise, summary_status

QUERY = [sys.executable, "-m", "varaverk_tools.ai_query"]


def _chats(server) -> list:
    return server.requests_to("/api/chat")


def test_extractive_summary_is_title_paragraph_and_outline(indexed):
    report = summarise(indexed)
    assert (report.made, report.todo, report.failed) == (4, 4, 0)
    with Index.open(indexed.index_path, readonly=True) as idx:
        media = idx.summary("Docs/README-Media.md")
    assert media.model == "extractive" and not media.stale_content
    assert media.text.splitlines() == [
        "Media",
        "The media jobs keep the library index current and clean up after downloads.",
        "Sections: Scan; Orphans; Details"]


def test_a_summary_is_made_once_per_content_hash(indexed, docs_repo, model_server):
    assert summarise(indexed).made == 4
    assert summarise(indexed).made == 0  # nothing changed: nothing made, nothing asked
    (docs_repo / "Docs" / "notes.md").write_text("# Notes\n\nThe fans now run at half speed "
                                                 "after midnight.\n")
    git(docs_repo, "commit", "-qam", "notes")
    refresh(indexed, progress=False)
    assert summary_status(indexed)["stale"] == 1
    again = summarise(indexed)
    assert again.made == 1
    with Index.open(indexed.index_path, readonly=True) as idx:
        assert "half speed" in idx.summary("Docs/notes.md").text


def test_model_summaries_refine_a_long_file_and_a_model_change_remakes_them(
        indexed, model_server):
    settings = indexed.replace(ai_summaries="model")
    model_server.script(content=["The ", "mover ", "summary."])
    report = summarise(settings)
    assert report.made == 4 and report.model == "ollama/m"
    with Index.open(settings.index_path, readonly=True) as idx:
        manual = idx.chunks_for_path("Docs/Manual-Mover.md")
        stored = idx.summary("Docs/Manual-Mover.md")
    n_parts = len(parts(manual))
    assert n_parts >= 3  # ~20,000 characters in parts of PART_CHARS
    assert all(len(p) <= PART_CHARS for p in parts(manual))
    assert len(_chats(model_server)) == 3 + n_parts  # one per short file, one per part
    refine = [r.json["messages"][1]["content"] for r in _chats(model_server)
              if "Docs/Manual-Mover.md" in r.json["messages"][1]["content"]]
    assert len(refine) == n_parts
    assert "The mover summary." in refine[1] and "next part" in refine[1]
    assert stored.text == "Mover manual\nThe mover summary." and stored.model == "ollama/m"
    # Each request is a ledger row of this host's, named for the work
    rows, _ = read_rows(settings.token_db_path)
    assert len(rows) == len(_chats(model_server))
    assert {(r.host, r.profile, r.source) for r in rows} == {
        (settings.ai_host_name, "summary", "ai-index")}
    assert all(r.completion_tokens == 3 for r in rows)
    # The same model again: nothing asked. Another model: every summary is stale, remade.
    model_server.reset()
    assert summarise(settings).made == 0 and not _chats(model_server)
    other = settings.replace(ai_gen_model="m2")
    assert summary_status(other)["stale"] == 4
    assert summarise(other).made == 4


def test_the_pass_stops_at_its_time_bound_and_the_next_run_goes_on(indexed):
    ticks = iter(range(100))
    settings = indexed.replace(ai_summary_seconds=3)
    first = summarise(settings, clock=lambda: next(ticks))
    assert first.timed_out and first.made == 2 and first.remaining == 2
    assert summary_status(settings)["missing"] == 2
    second = summarise(settings)
    assert (second.made, second.todo, second.timed_out) == (2, 2, False)


def test_a_deleted_file_loses_its_summary(indexed, docs_repo):
    summarise(indexed)
    git(docs_repo, "rm", "-q", "Docs/notes.md")
    git(docs_repo, "commit", "-qm", "rm")
    refresh(indexed, progress=False)
    assert summarise(indexed).dropped == 1
    with Index.open(indexed.index_path, readonly=True) as idx:
        assert idx.summary("Docs/notes.md") is None


def test_a_pass_killed_mid_way_keeps_what_it_finished_and_resumes(indexed, model_server):
    settings = indexed.replace(ai_summaries="model")
    model_server.delta_delay = 0.15  # a reply of three deltas takes about half a second
    model_server.script(content=["A ", "short ", "summary."])
    env = cli_env(settings, AI_SUMMARIES="model", AI_GEN_BACKEND="ollama", AI_GEN_MODEL="m")
    proc = subprocess.Popen([sys.executable, str(ENTRY), "--summaries"], env=env,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _stored(settings) < 1:
        time.sleep(0.05)
    time.sleep(0.2)  # inside the next file's request
    assert proc.poll() is None, "the pass finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = _stored(settings)
    assert 1 <= kept < 4
    with Index.open(settings.index_path, readonly=True) as idx:
        assert idx.summary_counts("ollama/m")["current"] == kept  # every row whole and current
    model_server.reset()
    model_server.script(content=["A ", "short ", "summary."])
    rerun = run_index(settings, "--summaries", env_extra={"AI_SUMMARIES": "model",
                                                          "AI_GEN_MODEL": "m"})
    assert rerun.returncode == 0, rerun.stderr
    assert f"{4 - kept} made, 0 remaining" in rerun.stderr
    asked = {r.json["messages"][1]["content"].split(":", 1)[0] for r in _chats(model_server)}
    assert len(asked) == 4 - kept  # only the files the killed pass had not finished


def _stored(settings) -> int:
    conn = sqlite3.connect(str(settings.index_path), timeout=30)
    try:
        return conn.execute("SELECT count(*) FROM summaries").fetchone()[0]
    finally:
        conn.close()


def test_status_counts_and_ai_query_prints_a_summary(indexed):
    off = run_index(indexed, "--summaries", env_extra={"AI_SUMMARIES": "off"})
    assert off.returncode == exitcodes.CONFIG and "AI_SUMMARIES is off" in off.stderr
    env = {"AI_SUMMARIES": "extractive"}
    made = run_index(indexed, "--summaries", env_extra=env)
    assert made.returncode == 0, made.stderr
    assert "summarised 4/4 files" in made.stderr and "4 made, 0 remaining" in made.stderr
    status = run_index(indexed, "--status", env_extra=env)
    assert "summaries (extractive): 4 of 4 files summarised, 0 stale, 0 missing" in status.stdout
    stale = run_index(indexed, "--status", env_extra={"AI_SUMMARIES": "model"})
    assert "0 of 4 files summarised, 4 stale, 0 missing" in stale.stdout
    shown = subprocess.run([*QUERY, "--summary", "Docs/README-Backup.md"],
                           env=cli_env(indexed, **env), capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    head, *body = shown.stdout.splitlines()
    assert head.startswith("Summary of Docs/README-Backup.md by extractive, made 20")
    assert body[0] == "Backup" and body[1].startswith("The backup job copies the pool")
    none = subprocess.run([*QUERY, "--summary", "Docs/absent.md"],
                          env=cli_env(indexed, **env), capture_output=True, text=True)
    assert none.returncode == exitcodes.NO_INDEX and "no summary of 'Docs/absent.md'" in \
        none.stderr


def test_summary_settings_are_checked_when_loaded(tmp_path):
    from varaverk.config import ConfigError, load_settings
    conf = tmp_path / "master.conf"
    conf.write_text("")
    with pytest.raises(ConfigError, match="AI_SUMMARIES: expected one of off, extractive, "
                                          "model, query, got 'yes'"):
        load_settings(conf, environ={"AI_SUMMARIES": "yes"})
    with pytest.raises(ConfigError, match="AI_SUMMARY_SECONDS: must be between 0 and 86400"):
        load_settings(conf, environ={"AI_SUMMARY_SECONDS": "-1"})
    with pytest.raises(ConfigError, match="AI_QUERY_SUMMARY_DOCS: must be between 1 and 100"):
        load_settings(conf, environ={"AI_QUERY_SUMMARY_DOCS": "0"})
    query = load_settings(conf, environ={"AI_SUMMARIES": "query",
                                         "AI_QUERY_SUMMARY_SECONDS": "5"})
    assert (query.ai_summaries, query.ai_query_summary_seconds) == ("query", 5.0)
    loaded = load_settings(conf, environ={"AI_SUMMARIES": "model", "AI_CONTEXTUAL_CHUNKS": "true"})
    assert (loaded.ai_summaries, loaded.ai_contextual_chunks) == ("model", True)
    assert (Settings().ai_summaries, Settings().ai_contextual_chunks) == ("off", False)


def test_a_pass_meeting_an_index_run_mid_write_says_so_and_keeps_what_it_made(indexed):
    """An index run holds its write transaction for the whole run (it writes batch by batch):
    a summary pass waits for it like another run would (AI_INDEX_LOCK_TIMEOUT), then stops
    with LockBusy naming it, instead of SQLite's "database is locked" half a minute later."""
    from varaverk.locking import LockBusy, index_lock

    settings = indexed.replace(ai_index_lock_timeout=0.5)
    with index_lock(settings.index_path, 5), Index.open(settings.index_path) as run, \
            run.writing():
        started = time.monotonic()
        with pytest.raises(LockBusy, match="locked by"):
            summarise(settings)
        assert time.monotonic() - started < 10
    report = summarise(settings)  # the run ended: the pass goes on
    assert (report.made, report.todo) == (4, 4)
