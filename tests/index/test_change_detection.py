"""Change detection as git does it: size, mtime, ctime, inode and device recorded per file, any
difference re-hashes, an equal hash costs no embedding. Each case below kept the size and the
mtime a file had when it was indexed, so that the size-and-mtime rule missed the edit. Real git
repositories, real SQLite, the fake model server over HTTP."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tarfile
import time

import pytest

from tests.index.conftest import embed_inputs, make_settings
from tests.support.repos import make_repo
from varaverk.index.refresh import refresh
from varaverk.index.status import status as index_status
from varaverk.index.store.index import Index

OLD = "# Lab\n\nThe backup runs at 02:00 nightly.\n"
NEW = "# Lab\n\nThe backup runs at 03:00 nightly.\n"
assert len(OLD) == len(NEW)
FILES = {"README.md": OLD, "docs/README.md": "# Docs\n\nRestore with restore.sh.\n"}


@pytest.fixture
def lab(tmp_path, model_server):
    """A repository whose files are stamped well before the build (so the racy rule, which
    re-hashes files stamped at or after a build's start, never applies), indexed once."""
    repo = make_repo(tmp_path / "lab", FILES)
    past = time.time_ns() - 100_000_000_000
    for rel in FILES:
        os.utime(repo / rel, ns=(past, past))
    settings = make_settings(repo, tmp_path, model_server)
    refresh(settings, progress=False)
    model_server.requests.clear()
    return repo, settings, model_server, past


def _text(settings) -> str:
    with Index.open(settings.index_path, readonly=True) as idx:
        return "\n".join(c.text for c in idx.chunks_for_path("README.md"))


def _assert_found(settings, server) -> None:
    """The edit is behind in --status, re-indexed by the next run, and settled after it."""
    behind = index_status(settings)["behind"]
    assert behind["changed"] == ["README.md"], behind
    report = refresh(settings, progress=False)
    assert report.indexed == 1 and "03:00" in _text(settings) and "02:00" not in _text(settings)
    assert embed_inputs(server)  # the new text was embedded
    again = refresh(settings, progress=False)
    assert again.files_read == 0 and not again.wrote


def _same_stamp(path, stamp: int) -> None:
    os.utime(path, ns=(stamp, stamp))
    assert os.stat(path).st_mtime_ns == stamp


def test_an_edit_with_touch_r_putting_the_mtime_back(lab, tmp_path):
    repo, settings, server, past = lab
    reference = tmp_path / "reference"
    reference.write_text("")
    _same_stamp(reference, past)
    (repo / "README.md").write_text(NEW)
    subprocess.run(["touch", "-r", str(reference), str(repo / "README.md")], check=True)
    assert os.stat(repo / "README.md").st_mtime_ns == past
    _assert_found(settings, server)


def test_cp_p_of_a_copy_with_the_same_size_and_mtime(lab, tmp_path):
    repo, settings, server, past = lab
    other = tmp_path / "other-README.md"
    other.write_text(NEW)
    _same_stamp(other, past)
    inode = os.stat(repo / "README.md").st_ino
    subprocess.run(["cp", "-p", str(other), str(repo / "README.md")], check=True)
    assert os.stat(repo / "README.md").st_ino == inode  # written in place
    _assert_found(settings, server)


def test_a_restored_backup_of_an_older_version(tmp_path, model_server):
    # The backup holds the older text under the same size and mtime as the indexed one.
    repo = make_repo(tmp_path / "lab", FILES)
    past = time.time_ns() - 100_000_000_000
    (repo / "README.md").write_text(NEW)
    _same_stamp(repo / "README.md", past)
    backup = tmp_path / "backup.tar"
    with tarfile.open(backup, "w") as tar:
        tar.add(repo / "README.md", arcname="README.md")
    (repo / "README.md").write_text(OLD)
    for rel in FILES:
        _same_stamp(repo / rel, past)
    settings = make_settings(repo, tmp_path, model_server)
    refresh(settings, progress=False)
    assert "02:00" in _text(settings)
    model_server.requests.clear()
    subprocess.run(["tar", "-xf", str(backup), "-C", str(repo)], check=True)
    assert os.stat(repo / "README.md").st_mtime_ns // 10**9 == past // 10**9
    os.utime(repo / "README.md", ns=(past, past))  # tar keeps whole seconds only
    _assert_found(settings, model_server)


def test_a_file_replaced_by_a_rename(lab):
    repo, settings, server, past = lab
    fresh = repo / "README.md.new"
    fresh.write_text(NEW)
    _same_stamp(fresh, past)
    os.replace(fresh, repo / "README.md")  # mv README.md.new README.md
    _assert_found(settings, server)


def test_cp_a_of_the_same_content_costs_a_hash_and_no_embedding(lab, tmp_path):
    repo, settings, server, past = lab
    copy = tmp_path / "copy.md"
    shutil.copy2(repo / "README.md", copy)
    os.unlink(repo / "README.md")
    subprocess.run(["cp", "-a", str(copy), str(repo / "README.md")], check=True)
    report = refresh(settings, progress=False)
    assert report.files_read == 1 and report.rehashed == 1 and report.indexed == 0
    assert embed_inputs(server) == [] and report.wrote
    assert refresh(settings, progress=False).files_read == 0


def test_an_index_of_the_previous_schema_upgrades_in_place_without_embedding(lab):
    repo, settings, server, past = lab
    ids = _ids(settings)
    conn = sqlite3.connect(settings.index_path)  # what schema version 2 held
    with conn:
        for statement in ("DROP TRIGGER labels_ai", "DROP TRIGGER labels_ad",
                          "DROP TABLE labels_fts", "ALTER TABLE chunks DROP COLUMN label"):
            conn.execute(statement)
        for column in ("ctime_ns", "inode", "device"):
            conn.execute(f"ALTER TABLE files DROP COLUMN {column}")
        conn.execute("DROP TABLE summaries")  # migration 5
        for statement in ("DROP TRIGGER numbers_ai", "DROP TRIGGER numbers_ad",  # migration 6
                          "DROP TRIGGER numbers_au", "DROP TABLE chunk_numbers",
                          "DROP TABLE row_strings"):
            conn.execute(statement)
        conn.execute("DELETE FROM schema_migrations WHERE version > 2")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    report = refresh(settings, progress=False)
    assert embed_inputs(server) == [] and report.indexed == 0
    assert report.rehashed == len(FILES) and report.wrote
    assert _ids(settings) == ids  # chunks and vectors kept
    with Index.open(settings.index_path, readonly=True) as idx:
        assert idx.meta()["schema_version"] == "6"
    settled = refresh(settings, progress=False)
    assert settled.files_read == 0 and not settled.wrote
    (repo / "README.md").write_text(NEW)
    _same_stamp(repo / "README.md", past)
    _assert_found(settings, server)


def _ids(settings) -> list[int]:
    conn = sqlite3.connect(settings.index_path)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")]
    finally:
        conn.close()
