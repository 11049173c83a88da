"""What a one-shot command costs: the no-op ``ai-index`` and ``ai-query --search`` import only
what their work needs (each module named here cost those runs more than their own work:
tests/benchmarks/bench_refresh.py and bench_query_startup.py measure it), and a refresh with
work lists the repository once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.index.conftest import cli_env, make_settings, run_index
from tests.support.repos import git, make_repo
from varaverk.index.refresh import refresh

DOCS = {"README.md": "# Lab\n\nThe homelab.\n",
        "Docs/README-Backup.md": "# Backup\n\nNightly at 02:00.\n\n## Restore\n\nUse restore.sh.\n"}


def _loaded(settings, code: str, unwanted: tuple[str, ...]) -> str:
    """Run ``code`` (which sets ``rc``) in a subprocess for ``settings``: ``"<rc> [unwanted
    modules it imported]"``."""
    probe = f"import sys\n{code}\nprint(rc, sorted(m for m in {unwanted!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=cli_env(settings), cwd=settings.ai_repo_root)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr


def test_a_no_op_refresh_loads_only_what_a_no_op_needs(tmp_path, model_server):
    """No dataclasses (nor inspect, which they import), no json, no numpy, not the locked
    pass, not the reading side (only a racy file is read), not the question words' patterns,
    not the embedder."""
    settings = make_settings(make_repo(tmp_path / "r", DOCS), tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    unwanted = ("dataclasses", "inspect", "json", "numpy", "varaverk.index.locked_pass",
                "varaverk.index.prepare", "varaverk.documents.guard", "contextvars",
                "varaverk.text", "varaverk.embedding")
    code = "from varaverk_tools.ai_index import main\nrc = main(['-q'])"
    assert _loaded(settings, code, unwanted) == "0 []"


def test_a_no_op_refresh_with_its_fingerprint_loads_neither_logging_nor_argparse(tmp_path,
                                                                              model_server):
    """Once a full run found nothing to do (and recorded its inputs), the next no-op loads
    neither the settings nor the refresh machinery, logging, argparse, ast, typing, pathlib,
    hashlib, SQLite or python-dotenv (those a bare interpreter already holds aside: an editable
    install's finder imports pathlib): its work is one git rev-parse and a stat per path
    (varaverk.index.fingerprint)."""
    settings = make_settings(make_repo(tmp_path / "r", DOCS), tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    # A full no-op run of the command records its inputs.
    assert run_index(settings, "-q").returncode == 0
    unwanted = ("logging", "argparse", "ast", "json", "typing", "pathlib", "hashlib", "sqlite3",
                "dotenv", "urllib.parse", "varaverk.config", "varaverk.cli", "varaverk.logs",
                "varaverk.terminal", "varaverk.index.refresh", "varaverk.index.store.index",
                "varaverk.index.classify", "varaverk.documents.tracked_files")
    bare = _loaded(settings, "rc = 0", unwanted).split(" ", 1)[1]
    code = "from varaverk_tools.ai_index import main\nrc = main([])"
    assert _loaded(settings, code, unwanted) == f"0 {bare}"
    log = (settings.ai_log_dir / "ai-index.log").read_text().splitlines()
    assert "index up to date: 2 tracked files" in log[-1]


def test_a_no_op_refresh_with_its_fingerprint_runs_git_once(tmp_path, model_server):
    """The shortcut's one git process: ``git rev-parse`` (HEAD and the git index file, whose
    stat stands for the listing), counted by a ``git`` on PATH that logs and runs the real one."""
    settings = make_settings(make_repo(tmp_path / "r", DOCS), tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    assert run_index(settings, "-q").returncode == 0  # records
    calls = tmp_path / "git-calls"
    env = cli_env(settings, PATH=f"{_git_shim(tmp_path, calls)}{os.pathsep}{os.environ['PATH']}")
    code = "from varaverk_tools.ai_index import main\nraise SystemExit(main(['-q']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=settings.ai_repo_root)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    (call,) = calls.read_text().splitlines()
    assert call.split()[2] == "rev-parse"


def _git_shim(tmp_path, calls) -> str:
    """A folder holding a ``git`` that appends its arguments to ``calls`` and runs the real one."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("git")} "$@"\n')
    (shim / "git").chmod(0o755)
    return str(shim)


def test_a_local_search_loads_no_http_client(tmp_path):
    """ai-query --search with the offline embedder and no reranker loads neither httpx (nor
    what it pulls in) nor the bounded reader of model servers."""
    settings = make_settings(make_repo(tmp_path / "r", DOCS), tmp_path, ai_embed_backend="local")
    assert refresh(settings, progress=False).wrote
    unwanted = ("httpx", "click", "rich", "email", "http.client", "varaverk.bounded_http",
                "varaverk.modelservers")
    code = ("from varaverk_tools.ai_query import main\n"
            "rc = main(['--search', 'when does the backup run'])")
    assert _loaded(settings, code, unwanted) == "0 []"


def test_a_refresh_with_work_lists_the_repository_once(tmp_path, model_server):
    """The locked pass reuses the optimistic pass's listing (no run wrote in between): one
    ``git ls-files`` per run, counted by a ``git`` on PATH that logs and runs the real one."""
    repo = make_repo(tmp_path / "r", DOCS)
    settings = make_settings(repo, tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    (repo / "README.md").write_text("# Lab\n\nThe homelab, changed.\n")
    git(repo, "commit", "-q", "-am", "change")
    calls = tmp_path / "git-calls"
    env = cli_env(settings, PATH=f"{_git_shim(tmp_path, calls)}{os.pathsep}{os.environ['PATH']}")
    code = "from varaverk_tools.ai_index import main\nraise SystemExit(main(['-q']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=repo)
    assert out.returncode == 0, out.stderr
    listed = [line for line in calls.read_text().splitlines() if "ls-files" in line]
    assert len(listed) == 1, listed
    assert refresh(settings, progress=False).unchanged == 2  # and it did the work
