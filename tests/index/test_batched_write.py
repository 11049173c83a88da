"""An index run written batch by batch (``AI_INDEX_BATCH``) inside one transaction: the same
index as one batch, the memory of a batch, and all or nothing when a late batch fails (real git
repositories, real SQLite, the real test model server)."""

from __future__ import annotations

import gc
import sqlite3

import pytest

from tests.index.conftest import make_settings
from tests.support.repos import git, make_repo
from varaverk.documents.chunks import Chunk
from varaverk.embedding import EmbeddingUnavailable, make_embedder
from varaverk.index.refresh import refresh
from varaverk.index.store.errors import IndexMismatch
from varaverk.index.store.index import Index

FILES = 60  # notes of one to three chunks each; a batch of 4 chunks makes some 20 batches


def _note(i: int, version: str = "one") -> str:
    body = f"# Note {i}\n\nHost h{i} keeps the {version} backup of pool {i} at 02:{i % 60:02d}.\n"
    for section in range(i % 3):
        body += f"\n## Part {section}\n\nStep {section} of note {i} restarts service s{i}.\n"
    return body


def _repo(tmp_path, version: str = "one"):
    files = {f"Docs/d{i // 10}/note-{i}.md": _note(i, version) for i in range(FILES)}
    files["Docs/tags.md"] = "---\ntags: [backup, pool]\naliases: [Tags]\n---\n# Tags\n\nBody.\n"
    return make_repo(tmp_path / "repo", files)


def _stored(settings) -> dict:
    """Everything an index holds that a run writes, without the time stamps and ids."""
    conn = sqlite3.connect(settings.index_path)
    try:
        chunks = sorted(conn.execute(
            "SELECT path, kind, section, title, start_line, end_line, part, text, context,"
            " meta, vec, source, keywords, label FROM chunks"))
        files = sorted(conn.execute(
            "SELECT path, kind, size, sha256, status, reason, chunk_count, encoding, source"
            " FROM files"))
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key NOT IN"
                                 " ('built_at', 'build_seconds', 'scan_started_ns')"))
        fts = sorted(conn.execute(
            "SELECT c.path, c.part, c.start_line, bm25(chunks_fts) FROM chunks_fts"
            " JOIN chunks c ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH 'restarts'"))
        labels = sorted(conn.execute(
            "SELECT c.path, c.start_line, l.sz FROM labels_fts_docsize l"
            " JOIN chunks c ON c.id = l.id"))
    finally:
        conn.close()
    return {"chunks": chunks, "files": files, "meta": meta, "fts": fts, "labels": labels}


@pytest.mark.parametrize("force", [True, False])
def test_a_run_in_tiny_batches_stores_exactly_what_one_batch_stores(tmp_path, model_server,
                                                                    force):
    repo = _repo(tmp_path)
    one = make_settings(repo, tmp_path / "one", model_server, ai_index_batch=1_000_000)
    tiny = make_settings(repo, tmp_path / "tiny", model_server, ai_index_batch=4)
    for settings in (one, tiny):
        report = refresh(settings, force=force, progress=False)
        assert report.indexed == FILES + 1 and report.chunks_embedded > 2 * FILES
    assert _stored(one) == _stored(tiny)
    # An incremental run in tiny batches: changed files, one deleted, the rest unchanged.
    for i in range(0, FILES, 7):
        (repo / f"Docs/d{i // 10}/note-{i}.md").write_text(_note(i, "two"))
    git(repo, "rm", "-q", "Docs/d5/note-59.md")
    git(repo, "commit", "-qam", "two")
    reports = [refresh(s, progress=False) for s in (one, tiny)]
    assert [r.indexed for r in reports] == [9, 9] and [r.deleted for r in reports] == [
        ["Docs/d5/note-59.md"]] * 2
    assert reports[0].chunks_reused == reports[1].chunks_reused > 0
    assert reports[0].chunks_embedded == reports[1].chunks_embedded
    assert _stored(one) == _stored(tiny)
    assert refresh(tiny, progress=False).files_read == 0


def _chunks_alive() -> int:
    gc.collect()
    return sum(isinstance(o, Chunk) for o in gc.get_objects())


class _Watching:
    """The real embedder, counting the chunk records alive at each call beyond those alive
    when it was made (what the run holds, not what earlier tests' caches keep) and failing as
    told."""

    def __init__(self, emb, fail_at: int | None = None, other_width_at: int | None = None):
        self._emb, self.fail_at, self.other_width_at = emb, fail_at, other_width_at
        self.backend, self.model, self.batch_size = emb.backend, emb.model, emb.batch_size
        self.max_tokens, self.count_tokens = emb.max_tokens, emb.count_tokens
        self.calls, self.alive = 0, []
        self._before = _chunks_alive()

    def embed(self, texts):
        self.calls += 1
        if self.calls == self.fail_at:
            raise EmbeddingUnavailable("the server went away mid-run")
        self.alive.append(_chunks_alive() - self._before)
        result = self._emb.embed(texts)
        if self.calls == self.other_width_at:
            result.vectors[:] = [v[:-1] if v is not None else v for v in result.vectors]
        return result


def test_a_run_holds_one_batch_of_chunks_not_the_repository(tmp_path, model_server):
    repo = _repo(tmp_path)
    settings = make_settings(repo, tmp_path, model_server, ai_index_batch=4)
    emb = _Watching(make_embedder(settings))
    report = refresh(settings, emb, force=True, progress=False)
    assert report.chunks_embedded > 2 * FILES and emb.calls >= 20
    # A batch closes once it holds 4 chunks or more; a note has at most 3 (and no more than
    # 6 are ever queued at once): one batch, not the 120-odd chunks of the repository.
    assert max(emb.alive) <= 6, emb.alive


def _two_versions(tmp_path, model_server):
    repo = _repo(tmp_path)
    settings = make_settings(repo, tmp_path, model_server, ai_index_batch=4)
    refresh(settings, progress=False)
    for i in range(FILES):
        (repo / f"Docs/d{i // 10}/note-{i}.md").write_text(_note(i, "two"))
    git(repo, "rm", "-q", "Docs/tags.md")
    git(repo, "commit", "-qam", "two")
    return settings, _stored(settings)


def test_a_late_batch_that_fails_leaves_the_previous_index_untouched(tmp_path, model_server):
    settings, before = _two_versions(tmp_path, model_server)
    emb = _Watching(make_embedder(settings), fail_at=15)
    with pytest.raises(EmbeddingUnavailable):
        refresh(settings, emb, progress=False)
    assert emb.calls == 15  # some 14 batches were written into the transaction before
    assert _stored(settings) == before
    with Index.open(settings.index_path, readonly=True) as idx:
        texts = [c.text for c in idx.get_chunks(idx.vector_table().ids)]
    assert any("one backup" in t for t in texts) and not any("two backup" in t for t in texts)
    report = refresh(settings, progress=False)  # the next run does the whole job
    assert report.indexed == FILES and report.deleted == ["Docs/tags.md"]
    assert not any("one backup" in t for (*_, t, _c, _m, _v, _s, _k, _l) in
                   _stored(settings)["chunks"])


def test_vectors_of_another_length_in_a_late_batch_write_nothing(tmp_path, model_server):
    settings, before = _two_versions(tmp_path, model_server)
    emb = _Watching(make_embedder(settings), other_width_at=12)
    with pytest.raises(IndexMismatch, match="two lengths"):
        refresh(settings, emb, force=True, progress=False)
    assert _stored(settings) == before
