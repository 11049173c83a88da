"""The index never silently loses or lies: one index per repository, a damaged index file
reported and rebuilt, no index left by a failed first build. Real git repositories, real
SQLite files, the fake model server over HTTP."""

from __future__ import annotations

import shutil
import sqlite3

from tests.index.conftest import make_settings, run_index
from tests.support.repos import make_repo
from varaverk.index.refresh import refresh
from varaverk.index.store.index import Index

A_FILES = {"README.md": "# Alpha\n\nThe alpha lab runs backups at 02:00.\n",
           "docs/README.md": "# Alpha docs\n\nRestore with restore.sh.\n"}
B_FILES = {"README.md": "# Beta\n\nThe beta lab has a printer.\n"}


def _paths(settings) -> set[str]:
    with Index.open(settings.index_path, readonly=True) as idx:
        return {c.path for c in idx.all_chunks()}


def test_switching_the_repository_back_and_forth_loses_no_index(tmp_path, model_server):
    a = make_settings(make_repo(tmp_path / "a", A_FILES), tmp_path, model_server)
    b = a.replace(ai_repo_root=make_repo(tmp_path / "b", B_FILES))
    assert refresh(a, progress=False).indexed == 2
    report_b = refresh(b, progress=False)
    assert report_b.deleted == [] and report_b.indexed == 1
    assert a.index_path != b.index_path
    model_server.requests.clear()
    back = refresh(a, progress=False)
    assert back.deleted == [] and back.files_read == 0 and not back.wrote
    assert model_server.requests == []
    assert _paths(a) == {"README.md", "docs/README.md"} and _paths(b) == {"README.md"}
    with Index.open(b.index_path, readonly=True) as idx:
        assert idx.meta()["repo_root"] == str(b.ai_repo_root)


def test_an_older_layout_index_serves_its_repository_and_no_other(tmp_path, model_server):
    a = make_settings(make_repo(tmp_path / "a", A_FILES), tmp_path, model_server)
    refresh(a, progress=False)
    legacy, keyed = a.ai_data_dir / "index.sqlite", a.index_path
    shutil.move(keyed, legacy)  # closed: no -wal or -shm beside it
    shutil.rmtree(keyed.parent)
    assert a.index_path == legacy  # adopted: it records repository a
    model_server.requests.clear()
    assert refresh(a, progress=False).files_read == 0 and model_server.requests == []
    b = a.replace(ai_repo_root=make_repo(tmp_path / "b", B_FILES))
    assert b.index_path != legacy
    report_b = refresh(b, progress=False)
    assert report_b.deleted == [] and report_b.indexed == 1
    assert _paths(a) == {"README.md", "docs/README.md"} and a.index_path == legacy


def test_status_names_the_repository_the_index_belongs_to(tmp_path, model_server):
    a = make_settings(make_repo(tmp_path / "a", A_FILES), tmp_path, model_server)
    assert run_index(a).returncode == 0
    out = run_index(a, "--status")
    assert out.returncode == 0, out.stderr
    assert f"index: {a.index_path} of repository {a.ai_repo_root} (" in out.stdout
