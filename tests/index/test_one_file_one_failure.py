"""One file, one failure (issue 21): a file that cannot be chunked costs that file only.

Real git repositories, a real SQLite index and the fake model server on 127.0.0.1. The bad
files are issue 21's: a JSON chat export nested 100,000 deep, one that is not a list, a
front matter alias bomb and a billion laughs. Each run completes, the bad file is skipped
with its reason (``--status`` and the log), and a file that turns bad keeps its previous
chunks until it reads cleanly again.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.index.conftest import make_settings, run_index
from tests.support.repos import git, make_repo
from varaverk.documents import guard
from varaverk.index.refresh import refresh

GOOD_CHAT = json.dumps([
    {"chat": "Ops", "sender": "Anna", "timestamp": "2024-05-01T08:00:00",
     "text": "restic prunes the offsite repository every sunday"},
    {"chat": "Ops", "sender": "Ben", "timestamp": "2024-05-01T08:02:00",
     "text": "and the nas snapshots stay for thirty days"}])
DEEP_CHAT = "[" * 100_000 + "]" * 100_000
LAUGHS = "\n".join(['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
    f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]" for p, n in zip("abcdefgh", "bcdefghi")])


@pytest.fixture
def lab(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {
        "README.md": "# Homelab\nThe NAS keeps nightly backups.\n",
        "docs/README.md": "---\ntags: &a [*a]\n---\n# Alias bomb\nStill a page with text.\n",
        "notes/README.md": f"---\n{LAUGHS}\n---\n# Laughs\nA page under a billion laughs.\n",
    })
    chats = make_repo(tmp_path / "chats", {
        "ops.json": GOOD_CHAT, "deep.json": DEEP_CHAT, "dict.json": "{}",
        "WhatsApp Chat with Crew.txt": "[02/03/2024, 19:04:00] Anna: the UPS test is friday\n"})
    settings = make_settings(repo, tmp_path, model_server, ai_sources=(f"chats=chats:{chats}",))
    return settings, repo, chats


def _cli(settings, *args):
    """``ai-index ARGS`` as a subprocess, with the chats source."""
    return run_index(settings, *args, env_extra={"AI_SOURCES": " ".join(settings.ai_sources)})


def _rows(settings, sql, *args):
    conn = sqlite3.connect(settings.index_path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _commit(repo, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change")


def test_bad_files_are_skipped_with_their_reason_and_the_rest_is_indexed(lab):
    settings, _, _ = lab
    result = _cli(settings)
    assert result.returncode == 0, result.stderr
    indexed = {p for (p,) in _rows(settings, "SELECT DISTINCT path FROM chunks")}
    assert indexed == {"README.md", "docs/README.md", "notes/README.md", "chats:ops.json",
                       "chats:WhatsApp Chat with Crew.txt"}
    reasons = dict(_rows(settings, "SELECT path, reason FROM files WHERE status = 'skipped'"))
    assert reasons["chats:deep.json"] == (
        f"{guard.REASON_FAILED} (ValueError: a chat export, but nested deeper than 32 levels)")
    assert reasons["chats:dict.json"].startswith(f"{guard.REASON_FAILED} (ValueError: a chat")
    assert "chats:deep.json: skipped: could not be chunked" in result.stderr
    # The bombs' pages are read without their front matter, each with a warning.
    assert "docs/README.md: front matter not used as metadata" in result.stderr
    assert "notes/README.md: front matter not used as metadata" in result.stderr
    status = _cli(settings, "--status")
    assert status.returncode == 0
    assert f"chats:deep.json: {reasons['chats:deep.json']}" in status.stdout
    again = _cli(settings)  # every later run completes too, with nothing to do
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stderr or "0 indexed" in again.stderr


def test_dry_run_lists_the_bad_files_as_skipped(lab):
    settings, _, _ = lab
    result = _cli(settings, "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    skipped = {s["path"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}
    assert skipped["chats:deep.json"].startswith(guard.REASON_FAILED)
    assert skipped["chats:dict.json"].startswith(guard.REASON_FAILED)


def test_a_file_that_turns_bad_keeps_its_chunks_until_it_reads_cleanly(lab):
    settings, _, chats = lab
    refresh(settings, progress=False)
    before = _rows(settings, "SELECT text FROM chunks WHERE path = 'chats:ops.json'")
    assert before and "restic prunes" in before[0][0]

    _commit(chats, {"ops.json": GOOD_CHAT[:-40]})  # cut off mid-way: not JSON any more
    report = refresh(settings, progress=False)
    reason = dict(report.skipped)["chats:ops.json"]
    assert reason.startswith(f"{guard.REASON_FAILED} (JSONDecodeError")
    assert _rows(settings, "SELECT text FROM chunks WHERE path = 'chats:ops.json'") == before
    assert _rows(settings, "SELECT status, reason, chunk_count FROM files WHERE path = ?",
                 "chats:ops.json") == [("skipped", reason, len(before))]
    # Nothing changed since: the next run does not read it again, and still says why.
    report = refresh(settings, progress=False)
    assert report.files_read == 0 and dict(report.skipped)["chats:ops.json"] == reason

    _commit(chats, {"ops.json": GOOD_CHAT.replace("sunday", "saturday")})
    report = refresh(settings, progress=False)
    assert "chats:ops.json" not in dict(report.skipped)
    after = _rows(settings, "SELECT text FROM chunks WHERE path = 'chats:ops.json'")
    assert "every saturday" in after[0][0]
    assert _rows(settings, "SELECT status FROM files WHERE path = 'chats:ops.json'") == [
        ("indexed",)]


def test_a_file_over_its_time_bound_is_skipped_and_the_run_goes_on(lab, monkeypatch):
    settings, _, chats = lab
    big = "".join(f"[02/03/2024, {i // 60 % 24:02d}:{i % 60:02d}:00] Anna: message {i}\n"
                  for i in range(20_000))
    _commit(chats, {"big.txt": big})
    # A bound of 0.001 s per MiB: every file that reaches a checkpoint runs out of time.
    monkeypatch.setattr(guard, "FILE_SECONDS", 0.0)
    monkeypatch.setattr(guard, "SECONDS_PER_MIB", 0.001)
    report = refresh(settings, progress=False)
    reason = dict(report.skipped)["chats:big.txt"]
    assert reason.startswith(f"{guard.REASON_FAILED} (took more than 0.000")
    assert report.wrote


def test_a_bad_note_costs_its_own_link_title_only(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {"README.md": "# Homelab\nThe NAS.\n"})
    vault = make_repo(tmp_path / "vault", {
        "Bomb.md": "---\ntags: &a [*a]\ntitle: Bomb title\n---\nBody of the bomb.\n",
        "Dated.md": "---\ntitle: Dated title\ndate: 2024-02-30\n---\nBody of the dated note.\n",
        "Backups.md": "---\ntitle: Backup plan\n---\nSee [[Bomb]], [[Dated]] and [[Restic]].\n",
        "Restic.md": "---\ntitle: Restic setup\n---\nRestic prunes on sundays.\n",
    })
    settings = make_settings(repo, tmp_path, model_server,
                             ai_sources=(f"vault=notes:{vault}",))
    report = refresh(settings, progress=False)
    assert not [p for p, _ in report.skipped if p.startswith("vault:")]
    texts = dict(_rows(settings, "SELECT path, text FROM chunks WHERE path LIKE 'vault:%'"))
    # Unusable front matter gives the file name as the title, in the note and in its links.
    assert texts["vault:Backups.md"] == "See Bomb, Dated and Restic setup."
    assert texts["vault:Bomb.md"] == "Body of the bomb."


def test_lone_surrogates_in_json_and_front_matter_never_reach_the_index(tmp_path, model_server):
    # "\ud83d" alone: half an emoji, as cut exports hold; json and YAML both decode it to a
    # lone surrogate, which SQLite (UTF-8) cannot store: the whole write failed.
    repo = make_repo(tmp_path / "repo", {
        "README.md": '---\ntitle: "Half \\ud83d"\n---\n# Homelab\nThe NAS.\n'})
    chats = make_repo(tmp_path / "chats", {"ops.json": json.dumps([
        {"chat": "Ops \ud83d", "sender": "Anna", "timestamp": "2024-05-01T08:00:00",
         "text": "backup done \ud83d"}], ensure_ascii=True)})
    settings = make_settings(repo, tmp_path, model_server, ai_sources=(f"chats=chats:{chats}",))
    report = refresh(settings, progress=False)
    assert report.wrote and not report.skipped
    rows = dict(_rows(settings, "SELECT path, text || context || meta FROM chunks"))
    assert "backup done \ufffd" in rows["chats:ops.json"]
    # libyaml refuses the escape (the front matter is kept as text); PyYAML's own parser
    # reads it, and the value is then stored as U+FFFD.
    assert "Half" in rows["README.md"] and "The NAS." in rows["README.md"]
