"""Incremental refresh against real git repositories, real SQLite and the real fake model server."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.index.conftest import cli_env, embed_inputs, make_settings
from tests.support.repos import git, make_repo
from varaverk.index.refresh import refresh
from varaverk.index.plan import plan
from varaverk.index.status import status as index_status
from varaverk.documents.chunking import chunk_document
from varaverk.embedding import EmbeddingUnavailable, make_embedder
from varaverk.locking import LockBusy, index_lock
from varaverk.index.store.errors import IndexMismatch
from varaverk.index.store.index import Index

HEADER = """#!/bin/sh
# PURPOSE
#   {purpose}
#
# CONFIGURATION
#   MOVER_STOP_TIMEOUT
#     Seconds to wait for the mover to finish before killing it (default: {timeout})
#   MOVER_LOG
#     Where the mover log goes (default: /var/log/mover.log)
echo body never indexed
"""

FILES = {
    "Tools/mover_stop.sh": HEADER.format(purpose="Stops the mover before backups.", timeout=300),
    "Tools/other.sh": HEADER.format(purpose="Does another thing entirely.", timeout=60),
    "Docs/README-Backup.md": "# Backup\n\nNightly at 02:00.\n\n## Restore\n\nUse restore.sh.\n",
    "README.md": "# Lab\n\nThe homelab.\n",
    "Media/logo.png": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
}


def _rows(settings, sql: str, *args):
    conn = sqlite3.connect(settings.index_path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _chunk_texts(settings) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path, text in _rows(settings, "SELECT path, text FROM chunks ORDER BY id"):
        out.setdefault(path, []).append(text)
    return out


@pytest.fixture
def lab(tmp_path, model_server):
    repo = make_repo(tmp_path / "lab", FILES)
    settings = make_settings(repo, tmp_path, model_server)
    return repo, settings, model_server


def test_first_run_indexes_documents_and_accounts_for_everything(lab):
    repo, settings, server = lab
    report = refresh(settings, progress=False)
    assert report.tracked == 5 and report.documents == 4 and report.indexed == 4
    assert report.skipped == [("Media/logo.png", "not a documentation kind")]
    assert report.wrote and report.locked and report.failures == []
    texts = _chunk_texts(settings)
    assert set(texts) == {"Tools/mover_stop.sh", "Tools/other.sh", "Docs/README-Backup.md",
                          "README.md"}
    assert not any("echo body" in t for ts in texts.values() for t in ts)  # header only
    assert report.chunks_embedded == sum(len(t) for t in texts.values())
    assert len(embed_inputs(server)) == report.chunks_embedded
    meta = Index.open(settings.index_path, readonly=True).meta()
    assert (meta["embed_backend"], meta["embed_model"], meta["embed_dimension"]) == \
        ("ollama", "all-minilm", "64")
    assert meta["head"] == git(repo, "rev-parse", "HEAD").strip()
    assert _rows(settings, "SELECT count(*) FROM files") == [(5,)]


def test_an_index_file_another_run_has_just_created_is_not_an_error(lab):
    # A concurrent first run creates the SQLite file before its tables: the optimistic,
    # lock-free check must hand over to the locked pass instead of failing.
    repo, settings, server = lab
    settings.index_path.parent.mkdir(parents=True, exist_ok=True)
    for content in (b"", None):
        if content is None:
            sqlite3.connect(settings.index_path).close()  # a SQLite file with no tables
        else:
            settings.index_path.write_bytes(content)
        report = refresh(settings, progress=False)
        assert report.locked and report.indexed == 4, report.summary()
        settings.index_path.unlink()
        for side in ("-wal", "-shm"):
            settings.index_path.with_name(settings.index_path.name + side).unlink(missing_ok=True)


def test_unchanged_second_run_reads_nothing_and_embeds_nothing(lab):
    repo, settings, server = lab
    refresh(settings, progress=False)
    generation = Index.open(settings.index_path, readonly=True).generation()
    server.requests.clear()
    report = refresh(settings, progress=False)
    assert report.files_read == 0 and report.chunks_embedded == 0 and report.embed_calls == 0
    assert report.unchanged == 4 and not report.wrote and not report.locked
    assert server.requests == []  # not even a health check
    assert Index.open(settings.index_path, readonly=True).generation() == generation


def test_a_no_op_run_takes_kinds_from_the_index_until_the_globs_change(lab):
    """A no-op run compiles no glob (nor loads wcmatch): stored kinds stand while the globs
    that decided them are the same; a changed glob is applied to every path at once."""
    repo, settings, server = lab
    refresh(settings, progress=False)
    probe = ("import sys\nfrom varaverk.index.refresh import refresh\n"
             "from varaverk.config import load_settings\n"
             "report = refresh(load_settings(None), progress=False)\n"
             "print(report.unchanged, report.wrote, 'wcmatch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=cli_env(settings), cwd=repo)
    assert out.stdout.split() == ["4", "False", "False"], out.stderr
    moved = settings.replace(ai_globs_exclude=("Docs/**",))
    report = refresh(moved, progress=False)
    assert report.wrote and ("Docs/README-Backup.md", "not a documentation kind") in report.skipped
    assert "Docs/README-Backup.md" not in _chunk_texts(moved)
    assert refresh(moved, progress=False).wrote is False
    back = refresh(settings, progress=False)  # and back: the readme is indexed again
    assert back.wrote and back.indexed == 1 and "Docs/README-Backup.md" in _chunk_texts(settings)


def test_recorded_glob_verdicts_decide_script_candidates_as_the_globs_would(tmp_path,
                                                                         model_server):
    """Extensionless, excluded and executable files keep their globs' verdicts on a no-op run
    (no glob compiled), and an executable that loses its mode is no script any more."""
    script = "#!/usr/bin/env ruby\n# Rotates the logs nightly.\nputs 1\n"
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nOne.\n", "bin/rotate": script,
                                      "Configurations/hosts": script, "tools/run.rb": script})
    git(repo, "update-index", "--chmod=+x", "tools/run.rb")
    (repo / "tools/run.rb").chmod(0o755)
    git(repo, "commit", "-q", "-m", "exec")
    settings = make_settings(repo, tmp_path, model_server)
    refresh(settings, progress=False)
    kinds = dict(_rows(settings, "SELECT path, kind FROM files"))
    assert (kinds["bin/rotate"], kinds["tools/run.rb"], kinds["Configurations/hosts"]) == \
        ("header", "header", "")
    probe = ("import sys\nfrom varaverk.index.refresh import refresh\n"
             "from varaverk.config import load_settings\n"
             "report = refresh(load_settings(None), progress=False)\n"
             "print(report.wrote, 'wcmatch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=cli_env(settings), cwd=repo)
    assert out.stdout.split() == ["False", "False"], out.stderr
    git(repo, "update-index", "--chmod=-x", "tools/run.rb")
    (repo / "tools/run.rb").chmod(0o644)
    git(repo, "commit", "-q", "-m", "not exec")
    report = refresh(settings, progress=False)
    assert ("tools/run.rb", "not a documentation kind") in report.skipped
    assert dict(_rows(settings, "SELECT path, kind FROM files"))["tools/run.rb"] == ""


def test_changing_one_file_re_embeds_only_its_chunks(lab):
    repo, settings, server = lab
    refresh(settings, progress=False)
    server.requests.clear()
    new = HEADER.format(purpose="Stops the mover before backups and scrubs.", timeout=600)
    (repo / "Tools/mover_stop.sh").write_text(new)
    old = chunk_document("Tools/mover_stop.sh", "header", FILES["Tools/mover_stop.sh"],
                         max_tokens=256, count_tokens=len)
    report = refresh(settings, progress=False)
    assert report.files_read == 1 and report.indexed == 1 and report.unchanged == 3
    embedded = embed_inputs(server)
    expected = chunk_document("Tools/mover_stop.sh", "header", new, max_tokens=256,
                              count_tokens=len)
    changed = [c.embed_text for c in expected if c.embed_text not in {o.embed_text for o in old}]
    # Only the chunks whose text changed are embedded (PURPOSE and MOVER_STOP_TIMEOUT); the
    # unchanged MOVER_LOG paragraph keeps its stored vector.
    assert sorted(embedded) == sorted(changed) and len(changed) == 2
    assert report.chunks_embedded == 2 and report.chunks_reused == len(expected) - 2
    texts = _chunk_texts(settings)["Tools/mover_stop.sh"]
    assert len(texts) == len(expected)
    assert any("(default: 600)" in t for t in texts) and not any("(default: 300)" in t for t in texts)
    with Index.open(settings.index_path, readonly=True) as idx:  # reused vectors are intact
        table = idx.vector_table()
        by_id = {c.id: c for c in idx.get_chunks(table.ids)}
        from tests.support.model_server import embed_vector
        import numpy as np
        for row, cid in enumerate(table.ids):
            want = np.asarray(embed_vector(by_id[int(cid)].embed_text, 64))
            np.testing.assert_allclose(table.matrix[row], want / np.linalg.norm(want),
                                       rtol=1e-5, atol=1e-6)


def test_same_content_new_mtime_costs_a_hash_not_an_embedding(lab):
    repo, settings, server = lab
    refresh(settings, progress=False)
    ids_before = _rows(settings, "SELECT id FROM chunks ORDER BY id")
    server.requests.clear()
    st = os.stat(repo / "README.md")
    os.utime(repo / "README.md", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    report = refresh(settings, progress=False)
    assert report.files_read == 1 and report.rehashed == 1 and report.indexed == 0
    assert embed_inputs(server) == []
    assert _rows(settings, "SELECT id FROM chunks ORDER BY id") == ids_before
    assert _rows(settings, "SELECT mtime_ns FROM files WHERE path = 'README.md'") == \
        [(st.st_mtime_ns + 5_000_000_000,)]
    server.requests.clear()
    assert refresh(settings, progress=False).files_read == 0  # and now it is settled


def test_a_same_size_edit_with_its_mtime_restored_is_found_by_the_racy_rule(lab, tmp_path):
    # The file is stamped within the tick of the build (here: a little ahead, as a checkout
    # or a sync tool may leave it), then edited to the same size and given its mtime back.
    repo, settings, server = lab
    path = repo / "README.md"
    ahead = time.time_ns() + 3_000_000_000
    os.utime(path, ns=(ahead, ahead))
    refresh(settings, progress=False)
    before = path.read_bytes()
    after = before.replace(b"The homelab.", b"The datalab.")
    assert len(after) == len(before)
    reference = tmp_path / "reference"
    reference.write_bytes(b"")
    os.utime(reference, ns=(ahead, ahead))
    path.write_bytes(after)
    subprocess.run(["touch", "-r", str(reference), str(path)], check=True)
    assert os.stat(path).st_mtime_ns == ahead and os.stat(path).st_size == len(before)
    behind = index_status(settings)["behind"]
    assert behind["behind"] and behind["changed"] == ["README.md"]
    report = refresh(settings, progress=False)
    assert report.indexed == 1 and report.files_read >= 1
    assert any("The datalab." in t for t in _chunk_texts(settings)["README.md"])


def test_files_older_than_the_last_build_are_not_read_again(lab):
    # The racy rule costs nothing for files stamped before the build that stored them.
    repo, settings, server = lab
    past = os.stat(repo / "README.md").st_mtime_ns - 60_000_000_000
    for rel in FILES:
        os.utime(repo / rel, ns=(past, past))
    refresh(settings, progress=False)
    (repo / "Tools/other.sh").write_text(FILES["Tools/other.sh"] + "# changed\n")
    report = refresh(settings, progress=False)
    assert report.files_read == 1 and report.unchanged == 3
    assert index_status(settings)["behind"]["behind"] is False


def test_b05_deleted_and_renamed_files_lose_their_chunks(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"docs/README.md": b"# Intro\nHello\n",
                                      "docs/Manual-old.md": b"# Setup\nRun setup.sh\n"})
    settings = make_settings(repo, tmp_path, model_server,
                             ai_globs_doc=("docs/**/*.md",))
    refresh(settings, progress=False)
    assert {p for (p,) in _rows(settings, "SELECT DISTINCT path FROM chunks")} == \
        {"docs/README.md", "docs/Manual-old.md"}
    git(repo, "mv", "docs/Manual-old.md", "docs/Manual-install.md")
    git(repo, "rm", "-q", "docs/README.md")
    git(repo, "commit", "-q", "-m", "rename and delete")
    report = refresh(settings, progress=False)
    assert sorted(report.deleted) == ["docs/Manual-old.md", "docs/README.md"]
    assert _rows(settings, "SELECT DISTINCT path FROM chunks") == [("docs/Manual-install.md",)]
    with Index.open(settings.index_path, readonly=True) as idx:
        hits = idx.fts_search("setup", 10)
        assert len(hits) == 1
        assert idx.get_chunks([hits[0][0]])[0].path == "docs/Manual-install.md"


def test_b02_submodule_and_rm_file_run_completes(tmp_path, model_server):
    sub = make_repo(tmp_path / "theme", {"README.md": b"# Theme\n"})
    repo = make_repo(tmp_path / "super", {"README.md": b"# Super\nText\n",
                                          "Manual-old.md": b"# Old\nOld text\n"})
    settings = make_settings(repo, tmp_path, model_server, ai_globs_manual=("Manual-*.md",))
    refresh(settings, progress=False)
    assert ("Manual-old.md",) in _rows(settings, "SELECT DISTINCT path FROM chunks")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "docs/theme")
    git(repo, "commit", "-q", "-m", "submodule")
    (repo / "Manual-old.md").unlink()
    report = refresh(settings, progress=False)
    assert _rows(settings, "SELECT DISTINCT path FROM chunks") == [("README.md",)]
    skipped = dict(report.skipped)
    assert skipped["docs/theme"] == "submodule (gitlink, mode 160000)"
    assert skipped["Manual-old.md"] == "deleted from the work tree (not yet committed)"
    assert skipped[".gitmodules"] == "not a documentation kind"


def test_b04_staged_files_indexed_and_detached_head_sha_stored(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {})
    settings = make_settings(repo, tmp_path, model_server)
    report = refresh(settings, progress=False)
    assert report.tracked == 0 and report.head is None
    (repo / "README.md").write_bytes(b"# R\nStaged only.\n")
    # Stamped well before the build, so the racy rule has no reason to read it again below.
    past = os.stat(repo / "README.md").st_mtime_ns - 60_000_000_000
    os.utime(repo / "README.md", ns=(past, past))
    git(repo, "add", "README.md")
    report = refresh(settings, progress=False)
    assert report.indexed == 1 and _rows(settings, "SELECT DISTINCT path FROM chunks") == [("README.md",)]
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "checkout", "-q", "--detach")
    sha = git(repo, "rev-parse", "HEAD").strip()
    report = refresh(settings, progress=False)
    assert report.wrote and report.files_read == 0  # only HEAD moved
    assert Index.open(settings.index_path, readonly=True).meta()["head"] == sha


def test_b08_legacy_encoding_is_indexed_with_a_warning(tmp_path, model_server, caplog):
    repo = make_repo(tmp_path / "r", {"README.md": b"# Ok\nfine\n",
                                      "notes/inbox.org": b"* Prices\nCoffee costs 2\xa2 here\n"})
    settings = make_settings(repo, tmp_path, model_server,
                             ai_globs_doc=("README.md", "notes/*.org"))
    with caplog.at_level("WARNING", logger="varaverk"):
        report = refresh(settings, progress=False)
    assert report.indexed == 2 and report.failures == []
    texts = _chunk_texts(settings)
    assert any("Coffee costs 2\u00a2 here" in t for t in texts["notes/inbox.org"])
    assert not any("Coffee costs 2 here" in t for t in texts["notes/inbox.org"])
    assert any("notes/inbox.org" in r.getMessage() and "cp1252" in r.getMessage()
               for r in caplog.records)
    assert _rows(settings, "SELECT encoding FROM files WHERE path = 'notes/inbox.org'") == [("cp1252",)]


def test_binary_document_is_skipped_with_a_warning(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": b"# Ok\nfine\n",
                                      "Docs/README-bin.md": b"# x\n\0\0binary"})
    settings = make_settings(repo, tmp_path, model_server)
    report = refresh(settings, progress=False)
    assert dict(report.skipped)["Docs/README-bin.md"] == "binary file (NUL byte in the first 8 KiB)"
    report = refresh(settings, progress=False)  # recorded: not read again
    assert report.files_read == 0
    assert dict(report.skipped)["Docs/README-bin.md"].startswith("binary")


def test_symlink_to_outside_is_never_read(tmp_path, model_server):
    secret = tmp_path / "outside.md"
    secret.write_text("# Secret\nCANARY-symlink\n")
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nok\n"})
    os.symlink(secret, repo / "README-link.md")
    git(repo, "add", "-A")
    settings = make_settings(repo, tmp_path, model_server, ai_globs_readme=("README-*.md",))
    report = refresh(settings, progress=False)
    assert dict(report.skipped)["README-link.md"].startswith("symbolic link resolving outside")
    assert not any("CANARY" in t for t in embed_inputs(model_server))
    assert b"CANARY" not in settings.index_path.read_bytes()


def _two_version_repo(tmp_path, server, n=6):
    files = {f"Tools/job{i}.sh": HEADER.format(purpose=f"Job {i} version one.", timeout=i)
             for i in range(n)}
    repo = make_repo(tmp_path / "r", files)
    settings = make_settings(repo, tmp_path, server, ai_embed_batch=2)
    refresh(settings, progress=False)
    for i in range(n):
        (repo / f"Tools/job{i}.sh").write_text(HEADER.format(purpose=f"Job {i} version two.",
                                                             timeout=i))
    return repo, settings


def _assert_version_one_intact(settings):
    with Index.open(settings.index_path, readonly=True) as idx:
        texts = [c.text for c in idx.get_chunks(idx.vector_table().ids)]
        assert any("version one" in t for t in texts)
        assert not any("version two" in t for t in texts)
        assert idx.fts_search("version", 5)
        assert idx.status()["files"] == {"indexed": 6}


def test_interrupted_run_leaves_the_previous_index_whole(tmp_path, model_server):
    repo, settings = _two_version_repo(tmp_path, model_server)
    before = _rows(settings, "SELECT id, path, text, vec FROM chunks ORDER BY id")
    calls = []

    def interrupt(done, total):
        calls.append(done)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        refresh(settings, progress=interrupt)
    assert calls and calls[0] < 20  # interrupted after the first batch of many
    assert _rows(settings, "SELECT id, path, text, vec FROM chunks ORDER BY id") == before
    _assert_version_one_intact(settings)
    report = refresh(settings, progress=False)  # the next run does the whole job
    assert report.indexed == 6
    assert not any("version one" in t for ts in _chunk_texts(settings).values() for t in ts)


def test_server_gone_mid_run_leaves_the_previous_index_whole(tmp_path, model_server):
    repo, settings = _two_version_repo(tmp_path, model_server)
    before = _rows(settings, "SELECT id, path, text, vec FROM chunks ORDER BY id")

    def stop_server(done, total):
        model_server.stop()

    with pytest.raises(EmbeddingUnavailable):
        refresh(settings, progress=stop_server)
    assert _rows(settings, "SELECT id, path, text, vec FROM chunks ORDER BY id") == before
    _assert_version_one_intact(settings)


def test_b19a_one_bad_chunk_costs_one_chunk_and_is_retried_next_run(tmp_path, model_server):
    bad = HEADER.format(purpose="Poisoned NaN! paragraph.", timeout=1)
    repo = make_repo(tmp_path / "r", {"Tools/bad.sh": bad, "Tools/good.sh": FILES["Tools/other.sh"]})
    settings = make_settings(repo, tmp_path, model_server)
    report = refresh(settings, progress=False)
    assert report.indexed == 1 and report.chunks_failed == 1
    (path, message), = report.failures
    assert path == "Tools/bad.sh" and "NaN" in message
    texts = _chunk_texts(settings)
    assert len(texts["Tools/bad.sh"]) == 2  # the other chunks of the file are stored
    assert not any("NaN!" in t for t in texts["Tools/bad.sh"])
    status, reason = _rows(settings, "SELECT status, reason FROM files WHERE path = 'Tools/bad.sh'")[0]
    assert status == "partial" and reason.startswith("1 of 3 chunks failed to embed")
    model_server.nan_marker = None  # the server is fixed: the next run retries that file only
    model_server.requests.clear()
    report = refresh(settings, progress=False)
    assert report.files_read == 1 and report.indexed == 1 and report.failures == []
    assert len(_chunk_texts(settings)["Tools/bad.sh"]) == 3


def test_b18_chunk_refused_as_too_long_is_halved_and_retried(tmp_path, model_server):
    long_para = " ".join(f"word{i}" for i in range(40))  # ~280 characters in one paragraph
    text = f"# Guide\n\n{long_para}\n\nDeploys the app.\n"
    repo = make_repo(tmp_path / "r", {"README.md": text})
    settings = make_settings(repo, tmp_path, model_server)
    model_server.max_input_chars = 120
    report = refresh(settings, progress=False)
    assert report.failures == [] and report.indexed == 1
    stored = " ".join(_chunk_texts(settings)["README.md"])
    for word in ("word0", "word39", "Deploys the app."):
        assert word in stored
    assert max(len(t) for t in embed_inputs(model_server)) > 120  # the refused chunk was sent
    accepted = _rows(settings, "SELECT context, text FROM chunks")
    assert all(len(f"{c}\n{t}") <= 120 for c, t in accepted)


def test_b20_switching_model_without_force_is_refused(tmp_path, model_server):
    model_server.dims = {"all-minilm": 384, "nomic-embed-text": 768}
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nOne.\n", "Docs/README-x.md": "# X\nTwo.\n"})
    settings = make_settings(repo, tmp_path, model_server)
    refresh(settings, progress=False)
    assert _rows(settings, "SELECT DISTINCT length(vec) FROM chunks") == [(1536,)]
    (repo / "README.md").write_text("# R\nOne changed.\n")
    switched = settings.replace(ai_embed_model="nomic-embed-text")
    model_server.requests.clear()
    with pytest.raises(IndexMismatch) as err:
        refresh(switched, progress=False)
    assert str(err.value).startswith("index built with ollama/all-minilm (384 dims); this run uses "
                                     "ollama/nomic-embed-text")
    assert str(err.value).endswith("run ai-index --force to rebuild")
    assert embed_inputs(model_server) == []  # refused before any embedding
    assert _rows(settings, "SELECT DISTINCT length(vec) FROM chunks") == [(1536,)]
    report = refresh(switched, force=True, progress=False)
    assert report.indexed == 2
    assert _rows(settings, "SELECT DISTINCT length(vec) FROM chunks") == [(3072,)]
    meta = Index.open(settings.index_path, readonly=True).meta()
    assert (meta["embed_model"], meta["embed_dimension"]) == ("nomic-embed-text", "768")
    with pytest.raises(IndexMismatch):  # and back again needs --force too, even with no change
        refresh(settings, progress=False)


def test_lock_held_by_another_run_gives_lock_busy_naming_it(lab):
    repo, settings, server = lab
    settings = settings.replace(ai_index_lock_timeout=0.3)
    with index_lock(settings.index_path, 1, command="ai-index --force (test holder)"):
        with pytest.raises(LockBusy) as err:
            refresh(settings, progress=False)
    assert "ai-index --force (test holder)" in str(err.value)
    assert f"pid {os.getpid()}" in str(err.value)
    assert err.value.holder["command"] == "ai-index --force (test holder)"
    assert not settings.index_path.exists() or \
        _rows(settings, "SELECT count(*) FROM chunks") == [(0,)]
    assert refresh(settings, progress=False).indexed == 4  # free again


def test_plan_counts_chunks_per_kind_and_writes_nothing(lab):
    repo, settings, server = lab
    emb = make_embedder(settings)
    result = plan(settings, emb.count_tokens, emb.max_tokens)
    assert server.requests == []
    assert not settings.ai_data_dir.exists() and not settings.ai_log_dir.exists()
    assert result["kinds"]["header"]["files"] == 2 and result["kinds"]["readme"]["files"] == 1
    assert result["kinds"]["doc"] == {"files": 1, "chunks": 1}
    report = refresh(settings, progress=False)
    assert result["chunks"] == report.chunks_embedded
    assert result["skipped"] == [{"path": "Media/logo.png", "kind": "",
                                  "reason": "not a documentation kind"}]


def test_status_reports_behind_by_stat_and_head(lab):
    repo, settings, server = lab
    refresh(settings, progress=False)
    info = index_status(settings)
    assert info["behind"]["behind"] is False and info["tracked"] == 5
    assert info["files_by_kind"] == {"header": 2, "readme": 1, "doc": 1}
    (repo / "README.md").write_text("# Lab\n\nChanged.\n")
    (repo / "Docs/README-New.md").write_text("# New\n")
    git(repo, "add", "Docs/README-New.md")
    git(repo, "commit", "-q", "-m", "new")
    behind = index_status(settings)["behind"]
    assert behind["head_moved"] and behind["changed"] == ["README.md"]
    assert behind["added"] == ["Docs/README-New.md"] and behind["behind"]


def test_b10_b11_bom_and_crlf_never_reach_the_index(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {
        "README.md": b"\xef\xbb\xbf---\ntitle: Tool\n---\n# Install\nRun make.\n",
        "Manual.md": b"# Manual\r\n\r\nIntro text.\r\n\r\n## Backup\r\nRun backup.sh nightly.\r\n",
        "tools/backup.sh": b"#!/bin/sh\r\n# PURPOSE:\r\n#   Nightly backup.\r\n# CONFIGURATION:\r\n"
                           b"#   BACKUP_DIR=/srv/bak\r\n",
    })
    settings = make_settings(repo, tmp_path, model_server)
    refresh(settings, progress=False)
    rows = _rows(settings, "SELECT path, section, title, text, context FROM chunks ORDER BY id")
    assert rows, "nothing indexed"
    for row in rows:
        assert not any("\ufeff" in field or "\r" in field for field in row[1:]), row
    assert not any("title: Tool" in f for r in rows for f in r[1:3])
    titles = {r[0]: [] for r in rows}
    for r in rows:
        titles[r[0]].append(r[2] or r[1])
    assert titles["README.md"] == ["Install"]
    assert set(titles["Manual.md"]) == {"Manual", "Backup"}
    encodings = dict(_rows(settings, "SELECT path, encoding FROM files"))
    assert encodings == {"README.md": "utf-8-sig", "Manual.md": "utf-8", "tools/backup.sh": "utf-8"}


def test_every_skip_is_logged_once_with_its_reason(lab, caplog):
    repo, settings, server = lab
    with caplog.at_level("INFO", logger="varaverk"):
        refresh(settings, progress=False)
    assert "Media/logo.png: skipped: not a documentation kind" in caplog.messages
    caplog.clear()
    (repo / "README.md").unlink()
    with caplog.at_level("INFO", logger="varaverk"):
        refresh(settings, progress=False)
    assert caplog.messages.count("README.md: skipped: deleted from the work tree "
                                 "(not yet committed); its chunks are removed") == 1
    assert not any("logo.png" in m for m in caplog.messages)  # unchanged: not repeated
    assert ("README.md",) not in _rows(settings, "SELECT DISTINCT path FROM chunks")


def test_status_says_when_the_settings_name_another_embedder(lab):
    repo, settings, server = lab
    refresh(settings, progress=False)
    behind = index_status(settings.replace(ai_embed_model="nomic-embed-text"))["behind"]
    assert behind["embedder_changed"] and behind["behind"] and not behind["changed"]
    assert behind["configured_embedder"] == "ollama/nomic-embed-text"
    assert index_status(settings)["behind"]["embedder_changed"] is False


def test_a_zero_or_nan_vector_is_never_stored_even_if_an_embedder_returns_one(tmp_path):
    """Defence in depth behind the embedders' own checks (B19): a double that misbehaves."""
    import numpy as np

    from varaverk.embedding import EmbedResult

    class Broken:
        backend, model, max_tokens, batch_size, dimension = "test", "broken", 256, 8, 4

        def count_tokens(self, text):
            return len(text)

        def embed(self, texts):
            vecs = []
            for t in texts:
                if "zero" in t:
                    vecs.append(np.zeros(4, dtype=np.float32))
                elif "nan" in t:
                    vecs.append(np.array([np.nan, 1, 0, 0], dtype=np.float32))
                else:
                    vecs.append(np.array([3, 4, 0, 0], dtype=np.float32))  # not unit length
            return EmbedResult(vectors=vecs)

    repo = make_repo(tmp_path / "r", {"README.md": "# A\nzero\n\n# B\nnan\n\n# C\nfine\n"})
    settings = make_settings(repo, tmp_path, None)
    report = refresh(settings, Broken(), progress=False)
    assert report.chunks_failed == 2 and report.chunks_embedded == 1
    assert all("zero or non-finite" in m for _, m in report.failures)
    (blob,), = _rows(settings, "SELECT vec FROM chunks")
    np.testing.assert_allclose(np.frombuffer(blob, "<f4"), [0.6, 0.8, 0, 0], rtol=1e-6)


def test_changed_chunkers_re_chunk_everything_but_embed_only_new_texts(lab, monkeypatch):
    repo, settings, server = lab
    refresh(settings, progress=False)
    server.requests.clear()
    monkeypatch.setattr("varaverk.index.refresh.chunker_stamp", lambda: "new-rules")
    report = refresh(settings, progress=False)
    assert report.files_read == 4 and report.indexed == 4 and report.wrote
    assert report.chunks_embedded == 0 and report.chunks_reused > 0
    assert embed_inputs(server) == []  # same chunk texts: every vector reused
    assert Index.open(settings.index_path, readonly=True).meta()["chunker"] == "new-rules"
    assert refresh(settings, progress=False).files_read == 0  # settled again


def test_a_file_that_gains_a_shebang_is_indexed_without_force(lab):
    repo, settings, server = lab
    (repo / "Tools/rotate").write_text("rotate the recordings, one day at a time\n")
    git(repo, "add", "Tools/rotate")
    refresh(settings, progress=False)
    assert "Tools/rotate" not in _chunk_texts(settings)
    quiet = refresh(settings, progress=False)
    assert quiet.files_read == 0 and not quiet.wrote  # an unchanged verdict opens nothing
    script = "#!/bin/sh\n# PURPOSE\n#   Rotates the camera recordings every night.\necho body\n"
    (repo / "Tools/rotate").write_text(script)
    st = os.stat(repo / "Tools/rotate")
    os.utime(repo / "Tools/rotate", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    report = refresh(settings, progress=False)
    assert report.indexed == 1
    assert any("Rotates the camera recordings" in t for t in _chunk_texts(settings)["Tools/rotate"])
    (repo / "Tools/rotate").write_text("no longer a script\n")
    os.utime(repo / "Tools/rotate", ns=(st.st_atime_ns, st.st_mtime_ns + 9_000_000_000))
    refresh(settings, progress=False)
    assert "Tools/rotate" not in _chunk_texts(settings)  # and losing it drops its chunks
    assert refresh(settings, progress=False).files_read == 0
