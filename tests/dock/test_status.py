"""The dock's /api/status is ai-index --status: one computation in the library
(``varaverk.index.status.status``), so both say the same thing about the same index."""

from __future__ import annotations

import os

from tests.dock.conftest import base_settings
from tests.support.repos import git, make_repo


def _client(settings):
    from varaverk_dock.app import create_app
    return create_app(settings).test_client()


def test_status_is_behind_for_a_changed_file_as_ai_index_says(tmp_path, model_server):
    from varaverk.index.refresh import refresh
    from varaverk.index.status import status

    repo = make_repo(tmp_path / "r", {"README.md": "# R\nThe mover runs nightly.\n",
                                      "Docs/README-Backup.md": "# Backup\nRestic at 02:00.\n"})
    settings = base_settings(repo, tmp_path / "data", model_server)
    refresh(settings, progress=False)
    body = _client(settings).get("/api/status").get_json()
    assert body["present"] is True and body["behind"] is False
    assert body["head"] == body["repo_head"] == git(repo, "rev-parse", "HEAD").strip()

    # Edited, not committed: HEAD is where it was, yet the index no longer matches the files
    # (the dock compared HEADs only and said "up to date").
    doc = repo / "Docs" / "README-Backup.md"
    doc.write_text("# Backup\nRestic at 03:00 now.\n")
    os.utime(doc, ns=(doc.stat().st_atime_ns, doc.stat().st_mtime_ns + 5_000_000_000))
    body = _client(settings).get("/api/status").get_json()
    library = status(settings)["behind"]
    assert library["behind"] is True and library["changed"] == ["Docs/README-Backup.md"]
    assert body["behind"] is True
    assert body["changed"] == {"changed": 1, "added": 0, "removed": 0}
    assert body["head"] == body["repo_head"]


def test_status_of_a_broken_index_names_the_fix(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n"})
    settings = base_settings(repo, tmp_path / "data", model_server)
    settings.index_path.parent.mkdir(parents=True)
    settings.index_path.write_bytes(b"not a database" * 100)
    body = _client(settings).get("/api/status").get_json()
    assert body["present"] is False
    assert "is damaged" in body["message"] and "ai-index --force" in body["message"]
