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


def _damage(path) -> bytes:
    """Garbage over every page but the first (which holds the schema): the file still opens
    as SQLite, and any read of a table fails as a malformed database image."""
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 3 * page
    data[page:] = bytes((i * 7 + 3) % 251 for i in range(len(data) - page))
    path.write_bytes(bytes(data))
    return bytes(data)


def _query(settings, *args):
    import subprocess
    import sys

    from tests.index.conftest import cli_env
    from tests.query.test_cli import ENTRY as QUERY
    return subprocess.run([sys.executable, str(QUERY), *args], env=cli_env(settings),
                          capture_output=True, text=True, timeout=300)


def _dock_status(settings) -> dict:
    from varaverk_dock.app import create_app
    response = create_app(settings).test_client().get("/api/status")
    assert response.status_code == 200
    return response.get_json()


def test_a_damaged_index_is_exit_66_and_force_moves_it_aside_and_rebuilds(tmp_path,
                                                                        model_server):
    from varaverk import exitcodes

    settings = make_settings(make_repo(tmp_path / "a", A_FILES), tmp_path, model_server)
    assert run_index(settings).returncode == 0
    damaged = _damage(settings.index_path)
    for proc in (run_index(settings), run_index(settings, "--status"),
                 _query(settings, "--search", "backups"),
                 _query(settings, "--search", "--json", "backups")):
        assert proc.returncode == exitcodes.NO_INDEX, proc.stderr
        assert "damaged" in proc.stderr and "ai-index --force" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    body = _dock_status(settings)
    assert body["present"] is False and "ai-index --force" in body["message"]
    rebuilt = run_index(settings, "--force")
    assert rebuilt.returncode == 0, rebuilt.stderr
    aside = list(settings.index_path.parent.glob(settings.index_path.name + ".damaged-*"))
    assert [p.name for p in aside if not p.name.endswith(("-wal", "-shm"))] == \
        [p.name for p in aside if p.read_bytes() == damaged]
    assert len([p for p in aside if p.read_bytes() == damaged]) == 1
    moved = next(p for p in aside if p.read_bytes() == damaged)
    assert f"moved the damaged index aside to {moved}" in rebuilt.stderr + rebuilt.stdout
    found = _query(settings, "--search", "backups")
    assert found.returncode == 0 and "README.md" in found.stdout, found.stderr


def test_a_failed_first_build_leaves_no_index_and_a_query_says_so(tmp_path, model_server):
    from varaverk import exitcodes

    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    (not_a_repo / "README.md").write_text("# Plain\n\nNot in git.\n")
    settings = make_settings(not_a_repo, tmp_path, model_server)
    failed = run_index(settings)
    assert failed.returncode != 0
    assert not settings.index_path.exists()
    # Only the lock file stays (removing a lock file another run may hold is never safe).
    assert [p.name for p in settings.ai_data_dir.rglob("*.sqlite*")
            if not p.name.endswith((".lock", ".lock.holder"))] == []
    for proc in (_query(settings, "--search", "plain"),
                 _query(settings, "--search", "--json", "plain"),
                 _query(settings, "what is plain")):
        assert proc.returncode == exitcodes.NO_INDEX, (proc.stdout, proc.stderr)
        assert "no index yet" in proc.stderr and "run ai-index" in proc.stderr
        assert "No matching documentation" not in proc.stdout
    body = _dock_status(settings)
    assert body["present"] is False and "no index yet" in body["message"]


def test_an_index_that_was_never_written_counts_as_no_index(tmp_path, model_server):
    # What a failed first build of an earlier version left behind: the tables, no run's meta.
    from varaverk import exitcodes

    settings = make_settings(make_repo(tmp_path / "a", A_FILES), tmp_path, model_server)
    Index.open(settings.index_path).close()
    proc = _query(settings, "--search", "backups")
    assert proc.returncode == exitcodes.NO_INDEX and "no index yet" in proc.stderr
    assert run_index(settings).returncode == 0
    assert _query(settings, "--search", "backups").returncode == 0


def test_a_read_that_meets_a_damaged_page_is_index_damaged(tmp_path, model_server):
    from varaverk.index.store.errors import IndexDamaged

    settings = make_settings(make_repo(tmp_path / "a", A_FILES), tmp_path, model_server)
    refresh(settings, progress=False)
    conn = sqlite3.connect(settings.index_path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'chunks'").fetchone()[0]
    conn.close()
    with open(settings.index_path, "r+b") as f:  # only the chunks table's root page
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)
    with Index.open(settings.index_path, readonly=True) as idx:
        assert idx.meta()["repo_root"] == str(settings.ai_repo_root)  # opens; meta is whole
        try:
            idx.all_chunks()
        except IndexDamaged as exc:
            assert "is damaged" in str(exc) and "ai-index --force" in exc.one_line()
        else:
            raise AssertionError("a damaged page read as chunks")
