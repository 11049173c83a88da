"""``ai-index`` as a real subprocess: gating, modes, exit codes, locking, and harborlab end to end
with the offline default embedder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.index.conftest import ENTRY, cli_env, make_settings, run_index
from tests.support.repos import git, harborlab_files, make_repo
from varaverk import exitcodes
from varaverk.locking import index_lock
from varaverk.index.store.index import Index

CANARIES = ("CANARY-7f3a9c-SECRET", "CANARY-b41e02-SECRET", "CANARY-d9e8aa-UNTRACKED")


def _all_bytes_under(*folders: Path) -> bytes:
    data = b""
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                data += path.read_bytes()
    return data


def test_canary_strings_are_the_ones_in_the_fixture():
    found = set()
    for data in harborlab_files().values():
        found |= {c for c in CANARIES if c in data.decode("utf-8", "replace")}
    assert found == set(CANARIES)


def test_disabled_logs_one_line_and_exits_0(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n"})
    settings = make_settings(repo, tmp_path, model_server, ai_enabled=False)
    proc = run_index(settings)
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "ai-index: AI_ENABLED is false: nothing indexed (set AI_ENABLED=true to enable)"]
    assert proc.stdout == ""
    log_lines = (settings.ai_log_dir / "ai-index.log").read_text().splitlines()
    assert len(log_lines) == 1 and "AI_ENABLED is false" in log_lines[0]
    assert not settings.ai_data_dir.exists() and model_server.requests == []


def test_dry_run_contacts_nothing_and_writes_nothing(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n", "Docs/README-A.md": "# A\nx\n",
                                      "tool.sh": "#!/bin/sh\n# PURPOSE\n#   Does it.\n"})
    for enabled in (True, False):
        settings = make_settings(repo, tmp_path, model_server, ai_enabled=enabled)
        proc = run_index(settings, "--dry-run")
        assert proc.returncode == 0, proc.stderr
        assert "nothing contacted, nothing written" in proc.stdout
        assert "readme        1 files" in proc.stdout and "header        1 files" in proc.stdout
        proc = run_index(settings, "--dry-run", "--json")
        result = json.loads(proc.stdout)
        assert result["kinds"]["doc"]["files"] == 1 and result["tracked"] == 3
        assert result["embedder"]["backend"] == "ollama"
    assert model_server.requests == []
    assert not (tmp_path / "data").exists() and not (tmp_path / "log").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_status_without_index_exits_66_and_writes_nothing(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n"})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings, "--status")
    assert proc.returncode == exitcodes.NO_INDEX and "no index yet" in proc.stderr
    proc = run_index(settings, "--status", "--json")
    assert proc.returncode == exitcodes.NO_INDEX and json.loads(proc.stdout)["exists"] is False
    assert not (tmp_path / "data").exists() and not (tmp_path / "log").exists()


def test_lock_contention_exits_75_naming_the_holder(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n"})
    settings = make_settings(repo, tmp_path, model_server, ai_index_lock_timeout=0.5)
    with index_lock(settings.index_path, 1, command="ai-index --force (nightly holder)"):
        proc = run_index(settings, console_script=True)
    assert proc.returncode == exitcodes.LOCKED
    assert "ai-index --force (nightly holder)" in proc.stderr
    assert f"pid {os.getpid()}" in proc.stderr and "waited 0.5 s" in proc.stderr
    assert run_index(settings).returncode == 0  # released


def test_second_process_waits_for_the_first(tmp_path, model_server):
    """Two real ai-index processes: the second waits for the first's lock, then finds no work."""
    repo = make_repo(tmp_path / "r", {f"Docs/README-{i}.md": f"# T{i}\nText {i}.\n" for i in range(30)})
    settings = make_settings(repo, tmp_path, model_server, ai_index_lock_timeout=60)
    env = cli_env(settings)
    procs = [subprocess.Popen([sys.executable, str(ENTRY)], env=env, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0]
    summaries = sorted(err for _, err in results)
    assert sum("30 indexed" in s for s in summaries) == 1  # exactly one did the work
    conn = sqlite3.connect(settings.index_path)
    assert conn.execute("SELECT count(DISTINCT path) FROM chunks").fetchone() == (30,)


def test_b04_empty_repository_exits_0_with_a_message(tmp_path, model_server):
    repo = make_repo(tmp_path / "empty", {})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    assert "no tracked files yet: 0 documents indexed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_b08_cli_exit_0(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": b"# Ok\nfine\n",
                                      "notes/inbox.org": b"* Prices\nCoffee costs 2\xa2 here\n"})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings, env_extra={"AI_GLOBS_DOC": "README.md notes/*.org"})
    assert proc.returncode == 0, proc.stderr
    assert "notes/inbox.org: invalid UTF-8 at byte 23; decoded as cp1252" in proc.stderr
    with Index.open(settings.index_path, readonly=True) as idx:
        texts = [c.text for c in idx.chunks_for_path("notes/inbox.org")]
    assert any("Coffee costs 2\u00a2 here" in t for t in texts)


def test_b20_cli_mismatch_exits_65_and_force_rebuilds(tmp_path, model_server):
    model_server.dims = {"all-minilm": 384, "nomic-embed-text": 768}
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nOne.\n"})
    settings = make_settings(repo, tmp_path, model_server)
    assert run_index(settings).returncode == 0
    proc = run_index(settings, env_extra={"AI_EMBED_MODEL": "nomic-embed-text"})
    assert proc.returncode == exitcodes.MISMATCH
    assert ("index built with ollama/all-minilm (384 dims); this run uses ollama/nomic-embed-text"
            in proc.stderr) and "run ai-index --force to rebuild" in proc.stderr
    proc = run_index(settings, "--force", env_extra={"AI_EMBED_MODEL": "nomic-embed-text"})
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(settings.index_path)
    assert conn.execute("SELECT DISTINCT length(vec) FROM chunks").fetchall() == [(3072,)]


def test_embedding_server_unavailable_exits_69_and_keeps_the_index(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nOne.\n"})
    settings = make_settings(repo, tmp_path, model_server)
    assert run_index(settings).returncode == 0
    before = sqlite3.connect(settings.index_path).execute("SELECT id, text FROM chunks").fetchall()
    (repo / "README.md").write_text("# R\nTwo.\n")
    proc = run_index(settings, env_extra={"AI_OLLAMA_HOSTS": "http://127.0.0.1:9"})
    assert proc.returncode == exitcodes.UNAVAILABLE, proc.stderr
    assert "the previous index is unchanged" in proc.stderr
    assert sqlite3.connect(settings.index_path).execute(
        "SELECT id, text FROM chunks").fetchall() == before


def test_config_error_exits_78(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n"})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings, env_extra={"AI_INDEX_LOCK_TIMEOUT": "soon"})
    assert proc.returncode == exitcodes.CONFIG and "AI_INDEX_LOCK_TIMEOUT" in proc.stderr
    proc = run_index(settings, "--config", str(tmp_path / "missing.conf"))
    assert proc.returncode == exitcodes.CONFIG and "config file not found" in proc.stderr
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    proc = run_index(settings, env_extra={"AI_REPO_ROOT": str(not_a_repo)})
    assert proc.returncode == exitcodes.CONFIG
    assert f"cannot list tracked files in {not_a_repo}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_wraps_to_the_terminal_width_as_argparse_would(monkeypatch):
    """The width comes from COLUMNS or the terminal, as argparse finds it, without argparse
    importing shutil on every start (only --help prints)."""
    import argparse

    from varaverk_tools import ai_index

    for columns in ("60", "131"):
        monkeypatch.setenv("COLUMNS", columns)
        ours = ai_index.build_parser()
        theirs = ai_index.build_parser()
        theirs.formatter_class = argparse.RawDescriptionHelpFormatter
        assert ours.format_help() == theirs.format_help()
        assert ours.format_usage() == theirs.format_usage()
    probe = ("import sys\nfrom varaverk_tools.ai_index import build_parser\n"
             "build_parser().parse_args(['-q'])\nprint('shutil' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_help_explains_modes_and_exit_codes():
    proc = subprocess.run([sys.executable, str(ENTRY), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for text in ("--force", "--dry-run", "--status", "--json", "--config", "75", "65", "69", "78"):
        assert text in proc.stdout


# ---------------------------------------------------------------------------------------------
# harborlab, end to end, with the offline default embedder (local all-MiniLM-L6-v2)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def harborlab_indexed(harborlab_pristine, tmp_path_factory):
    base = tmp_path_factory.mktemp("hl-index")
    repo = base / "harborlab"
    shutil.copytree(harborlab_pristine, repo, symlinks=True)
    settings = make_settings(repo, base, None, ai_embed_backend="local")
    proc = run_index(settings, console_script=True)
    assert proc.returncode == 0, proc.stderr
    return settings, proc


def test_harborlab_no_canary_anywhere_in_data_or_logs(harborlab_indexed):
    settings, proc = harborlab_indexed
    blob = _all_bytes_under(settings.ai_data_dir, settings.ai_log_dir)
    assert len(blob) > 100_000  # there really is an index to search
    for canary in CANARIES:
        assert canary.encode() not in blob
        assert canary not in proc.stderr


def test_harborlab_all_59_tracked_files_accounted_for(harborlab_indexed):
    settings, _ = harborlab_indexed
    proc = run_index(settings, "--status", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    tracked = git(settings.ai_repo_root, "ls-files", "-z").split("\0")
    tracked = {p for p in tracked if p}
    assert len(tracked) == 59 and info["repository"]["tracked"] == 59
    conn = sqlite3.connect(settings.index_path)
    rows = dict(conn.execute("SELECT path, status FROM files"))
    assert set(rows) == tracked
    assert info["files"]["indexed"] + info["files"]["skipped"] == 59
    skipped = {s["path"]: s["reason"] for s in info["skipped"]}
    assert skipped == {".gitignore": "not a documentation kind",
                       "Media/logo.png": "not a documentation kind",
                       "Docs/README-Empty.md": "no text to index"}
    assert info["meta"]["embed_backend"] == "local"
    assert info["meta"]["embed_dimension"] == "384"
    assert info["behind"]["behind"] is False
    assert set(info["chunks_by_kind"]) == {"header", "readme", "manual", "template", "doc"}
    lengths = conn.execute("SELECT DISTINCT length(vec) FROM chunks").fetchall()
    assert lengths == [(1536,)]
    proc = run_index(settings, "--status")
    assert "skipped (3):" in proc.stdout and "up to date with the repository" in proc.stdout


def test_harborlab_second_run_opens_no_repository_file(harborlab_indexed, tmp_path):
    """Proof by audit hook: the no-op run never opens a file of the work tree."""
    settings, _ = harborlab_indexed
    out = tmp_path / "opened.json"
    code = textwrap.dedent(f"""
        import json, sys
        root = {str(settings.ai_repo_root)!r}
        opened = []
        def hook(event, args):
            if event == "open" and args and isinstance(args[0], str) and args[0].startswith(root):
                opened.append(args[0])
        sys.addaudithook(hook)
        from varaverk_tools.ai_index import main
        rc = main([])
        open({str(out)!r}, "w").write(json.dumps(opened))
        sys.exit(rc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(settings), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == []
    assert ("index up to date: 59 tracked files: 0 indexed, 56 unchanged, 3 skipped "
            "(2 not a documentation kind, 1 no text to index), 0 deleted" in proc.stderr)
    assert "0 chunks embedded" in proc.stderr


def test_harborlab_killed_rebuild_leaves_the_index_usable(harborlab_indexed, tmp_path):
    settings, _ = harborlab_indexed
    data = tmp_path / "data"
    shutil.copytree(settings.ai_data_dir, data)
    copy = settings.replace(ai_data_dir=data, ai_log_dir=tmp_path / "log")
    with Index.open(copy.index_path, readonly=True) as idx:
        before = (idx.meta()["generation"], idx.status()["chunks"])
    proc = subprocess.Popen([sys.executable, str(ENTRY), "--force"], env=cli_env(copy),
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    log = copy.ai_log_dir / "ai-index.log"
    while time.monotonic() < deadline and proc.poll() is None:
        if Path(str(copy.index_path) + ".lock.holder").exists():
            time.sleep(1.0)  # well into reading, chunking and embedding
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the rebuild finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with Index.open(copy.index_path, readonly=True) as idx:
        assert (idx.meta()["generation"], idx.status()["chunks"]) == before
        table = idx.vector_table()
        assert table.matrix.shape == (before[1], 384)
        assert idx.fts_search("MOVER_STOP_TIMEOUT", 3)
    assert not log.exists() or "index rebuilt" not in log.read_text()
    status = run_index(copy, "--status")  # the lock died with its holder
    assert status.returncode == 0 and "up to date with the repository" in status.stdout


def _run_on_a_terminal(settings, *args: str) -> tuple[int, str]:
    """Run ai-index with stdout and stderr on a pseudo-terminal 120 columns wide."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, str(ENTRY), *args], env=cli_env(settings),
                            stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        out += data
    os.close(master)
    return proc.wait(timeout=60), out.decode("utf-8", "replace")


def test_progress_bar_on_a_terminal_only(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {f"Docs/README-{i}.md": f"# T{i}\nText {i}.\n" for i in range(5)})
    settings = make_settings(repo, tmp_path, model_server)
    rc, out = _run_on_a_terminal(settings, "--force")
    assert rc == 0 and "embedding:" in out and "5/5" in out and "chunk/s" in out
    rc, out = _run_on_a_terminal(settings, "--force", "-q")
    assert rc == 0 and "embedding:" not in out
    proc = run_index(settings, "--force")  # stderr is a pipe: no bar
    assert proc.returncode == 0 and "embedding:" not in proc.stderr
