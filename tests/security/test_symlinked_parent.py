"""A tracked file's parent folder replaced by a symbolic link is never followed: not to a
git-ignored folder of the repository, not to a folder outside it."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from tests.index.conftest import ENTRY, cli_env, make_settings, run_index
from tests.support.repos import git, make_repo
from varaverk.documents import tracked as sources

TRACKED = "# Walrus\nThe tracked walrus guide: feed the walrus at noon.\n"
HIDDEN = "# Walrus\nHIDDEN-WALRUS-CANARY walrus secrets from an ignored file.\n"


def _repo(tmp_path, target: str):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n", ".gitignore": "private/\n",
                                      "Guides/README-Walrus.md": TRACKED})
    if target == "ignored":
        dest = repo / "private"
    else:
        dest = tmp_path / "outside"
    dest.mkdir()
    (dest / "README-Walrus.md").write_text(HIDDEN)
    shutil.rmtree(repo / "Guides")
    os.symlink(dest, repo / "Guides")
    assert "Guides/README-Walrus.md" in git(repo, "ls-files")
    return repo


@pytest.mark.parametrize("target, reason", [("ignored", sources.REASON_PARENT_LINK_IN),
                                            ("outside", sources.REASON_PARENT_LINK_OUT)])
def test_symlinked_parent_is_not_indexed_nor_searched(tmp_path, model_server, target, reason):
    repo = _repo(tmp_path, target)
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(settings.index_path) as db:
        texts = " ".join(t for (t,) in db.execute("SELECT text FROM chunks"))
        row = db.execute("SELECT status, reason FROM files WHERE path = ?",
                         ("Guides/README-Walrus.md",)).fetchone()
    assert "HIDDEN-WALRUS-CANARY" not in texts
    assert row == ("skipped", reason)
    search = subprocess.run([sys.executable, str(ENTRY.parent / "ai_query.py"), "--search",
                             "walrus"], env=cli_env(settings), capture_output=True, text=True,
                            timeout=120)
    assert "HIDDEN-WALRUS-CANARY" not in search.stdout + search.stderr
    status = run_index(settings, "--status")
    assert "Guides/README-Walrus.md" in status.stdout + status.stderr
    sent = " ".join(str(r.json) for r in model_server.requests if r.json)
    assert "HIDDEN-WALRUS-CANARY" not in sent


def test_open_tracked_refuses_a_link_and_a_swapped_file(tmp_path):
    repo = make_repo(tmp_path / "r", {"Guides/README-A.md": "# A\n"})
    st = os.lstat(repo / "Guides/README-A.md")
    with sources.open_tracked(repo, "Guides/README-A.md", st) as fh:
        assert fh.read() == b"# A\n"
    (repo / "Guides/README-A.md").rename(repo / "Guides/old.md")  # keeps its inode in use
    (repo / "Guides/README-A.md").write_text("# swapped\n")
    with pytest.raises(OSError, match="changed between"):
        sources.open_tracked(repo, "Guides/README-A.md", st)
    (tmp_path / "x.md").write_text("x")
    (repo / "Guides/README-A.md").unlink()
    os.symlink(tmp_path / "x.md", repo / "Guides/README-A.md")
    with pytest.raises(OSError):
        sources.open_tracked(repo, "Guides/README-A.md")


def test_a_real_parent_folder_still_reads(tmp_path):
    repo = make_repo(tmp_path / "r", {"a/b/README-A.md": "# A\n"})
    entry = sources.TrackedPath("a/b/README-A.md", "100644")
    st, reason = sources.lstat_entry(repo, entry)
    assert reason == "" and st is not None
    # A repository reached through a linked folder is fine: only components inside it count.
    os.symlink(repo, tmp_path / "link-to-repo")
    assert sources.lstat_entry(tmp_path / "link-to-repo", entry)[1] == ""


def test_each_folder_is_resolved_once_per_listing_and_a_read_checks_again(tmp_path):
    repo = make_repo(tmp_path / "r", {"Guides/README-A.md": "# A\n", "Guides/README-B.md": "# B\n",
                                      "Real/README-C.md": "# C\n"})
    folders: dict[str, str] = {}
    entries = [sources.TrackedPath(p, "100644")
               for p in ("Guides/README-A.md", "Guides/README-B.md", "Real/README-C.md")]
    assert [sources.lstat_entry(repo, e, folders)[1] for e in entries] == ["", "", ""]
    assert folders == {"Guides": "", "Real": ""}
    (tmp_path / "outside").mkdir()
    for name in ("README-A.md", "README-B.md"):
        (tmp_path / "outside" / name).write_text(HIDDEN)
    shutil.rmtree(repo / "Guides")
    os.symlink(tmp_path / "outside", repo / "Guides")
    fresh: dict[str, str] = {}
    assert [sources.lstat_entry(repo, e, fresh)[1] for e in entries] == \
        [sources.REASON_PARENT_LINK_OUT, sources.REASON_PARENT_LINK_OUT, ""]
    with pytest.raises(OSError):  # the read never trusts a listing's folder verdicts
        sources.open_tracked(repo, "Guides/README-A.md")
