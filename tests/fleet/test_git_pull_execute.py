"""git-pull-execute against a real bare remote in a temporary folder."""

from __future__ import annotations


import pytest

from tests.support.environ import write_master_conf
from tests.support.repos import git, make_repo
from varaverk.config import Settings
from varaverk_tools import git_pull_execute as gpe


@pytest.fixture
def remote(tmp_path):
    """(upstream work tree that pushes, bare remote, local clone the job pulls)."""
    upstream = make_repo(tmp_path / "upstream", {
        "README.md": "# Lab\n\nBackups run nightly.\n",
        "Backup/rsync_mirror.sh": "#!/bin/sh\n# PURPOSE\n#   Mirror shares.\n",
    })
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(bare))
    git(upstream, "remote", "add", "origin", str(bare))
    git(upstream, "fetch", "-q", "origin")
    git(upstream, "branch", "-q", "--set-upstream-to=origin/main", "main")
    local = tmp_path / "local"
    git(tmp_path, "clone", "-q", str(bare), str(local))
    return upstream, bare, local


def _push(upstream, files: dict[str, str], message="change"):
    for rel, text in files.items():
        path = upstream / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "--allow-empty", "-m", message)
    git(upstream, "push", "-q", "origin", "main")


def _settings(tmp_path, local, **changes) -> Settings:
    base = Settings(ai_enabled=True, ai_index_on_pull=True, ai_repo_root=local,
                    ai_data_dir=tmp_path / "data", ai_log_dir=tmp_path / "log")
    return base.replace(**changes)


class Recorder:
    """An injected indexer: records each call and returns a fixed exit code."""

    def __init__(self, code=0):
        self.code, self.calls = code, []

    def __call__(self, config_path):
        self.calls.append(config_path)
        return self.code


def test_changes_trigger_a_reindex(tmp_path, remote):
    upstream, _, local = remote
    _push(upstream, {"README.md": "# Lab\n\nBackups run at 02:00.\n", "docs/new.md": "# New\n"})
    indexer = Recorder()
    run = gpe.pull_and_index(_settings(tmp_path, local), config_path="/x/master.conf",
                             indexer=indexer)
    assert run.pull.ok and run.indexed and run.skipped_by is None
    assert sorted(run.pull.changed) == ["README.md", "docs/new.md"]
    assert indexer.calls == ["/x/master.conf"]
    assert (local / "docs/new.md").read_text() == "# New\n"
    assert run.pull.after == git(upstream, "rev-parse", "HEAD").strip() != run.pull.before


def test_no_tracked_changes_no_index(tmp_path, remote):
    upstream, _, local = remote
    indexer = Recorder()
    run = gpe.pull_and_index(_settings(tmp_path, local), indexer=indexer)
    assert run.pull.ok and run.pull.before == run.pull.after
    assert run.skipped_by == "the pull changed no tracked file" and indexer.calls == []
    _push(upstream, {}, message="empty commit")  # HEAD moves, no file changes
    run = gpe.pull_and_index(_settings(tmp_path, local), indexer=indexer)
    assert run.pull.ok and run.pull.before != run.pull.after and run.pull.changed == []
    assert run.skipped_by == "the pull changed no tracked file" and indexer.calls == []


@pytest.mark.parametrize("changes, gate", [
    ({"ai_index_on_pull": False}, "AI_INDEX_ON_PULL=false"),
    ({"ai_enabled": False}, "AI_ENABLED=false"),
])
def test_gates_stop_the_index_but_not_the_pull(tmp_path, remote, changes, gate, caplog,
                                               monkeypatch):
    import logging
    monkeypatch.setattr(logging.getLogger("varaverk"), "propagate", True)
    caplog.set_level(logging.INFO, logger="varaverk.git_pull_execute")
    upstream, _, local = remote
    _push(upstream, {"README.md": "changed\n"})
    indexer = Recorder()
    run = gpe.pull_and_index(_settings(tmp_path, local, **changes), indexer=indexer)
    assert run.pull.ok and run.pull.changed == ["README.md"]
    assert (local / "README.md").read_text() == "changed\n"
    assert run.skipped_by == gate and indexer.calls == []
    assert any(f"re-index skipped: {gate}" in r.getMessage() for r in caplog.records)


def test_index_failure_is_not_fatal_and_the_old_index_stays(tmp_path, remote):
    upstream, _, local = remote
    settings = _settings(tmp_path, local)
    settings.index_path.parent.mkdir(parents=True)
    settings.index_path.write_bytes(b"previous index")
    _push(upstream, {"README.md": "changed\n"})

    def failing(config_path):
        raise RuntimeError("embedding server down")

    run = gpe.pull_and_index(settings, indexer=failing)
    assert run.pull.ok and not run.indexed and run.index_exit == 1
    assert settings.index_path.read_bytes() == b"previous index"
    _push(upstream, {"README.md": "changed again\n"})
    run = gpe.pull_and_index(settings, indexer=Recorder(code=69))
    assert run.pull.ok and not run.indexed and run.index_exit == 69


def test_failed_pull_is_reported_and_does_not_index(tmp_path, remote):
    upstream, _, local = remote
    _push(upstream, {"README.md": "theirs\n"})
    (local / "README.md").write_text("ours\n")
    git(local, "commit", "-q", "-am", "diverge")
    indexer = Recorder()
    run = gpe.pull_and_index(_settings(tmp_path, local), indexer=indexer)
    assert not run.pull.ok and "git pull failed" in run.pull.message
    assert run.skipped_by == "the pull failed" and indexer.calls == []
    assert (local / "README.md").read_text() == "ours\n"  # no merge commit, nothing rewritten


def test_no_upstream_and_not_a_repo(tmp_path):
    lone = make_repo(tmp_path / "lone", {"README.md": "x\n"})
    assert "no upstream" in gpe.pull(lone).message
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "not a git work tree" in gpe.pull(plain).message


def _conf(tmp_path, local, **extra) -> str:
    values = {"AI_ENABLED": "true", "AI_INDEX_ON_PULL": "true", "AI_REPO_ROOT": local,
              "AI_DATA_DIR": tmp_path / "data", "AI_LOG_DIR": tmp_path / "log", **extra}
    return str(write_master_conf(tmp_path / "master.conf", values))


def test_main_exit_codes(tmp_path, remote, clean_env):
    import filelock
    upstream, _, local = remote
    conf = _conf(tmp_path, local)
    _push(upstream, {"README.md": "changed\n"})
    indexer = Recorder(code=1)
    assert gpe.main(["--config", conf], indexer=indexer) == 0  # index failed, pull succeeded
    assert indexer.calls == [conf]
    assert (tmp_path / "log" / "git-pull-execute.log").is_file()
    _push(upstream, {"README.md": "changed again\n"})
    assert gpe.main(["--config", conf, "--no-index"], indexer=indexer) == 0
    assert indexer.calls == [conf]
    with filelock.FileLock(str(tmp_path / "data" / gpe.LOCK_NAME)):
        assert gpe.main(["--config", conf], indexer=indexer) == 75
    bad = _conf(tmp_path, tmp_path / "nowhere")
    assert gpe.main(["--config", bad], indexer=indexer) == 1
    assert gpe.main(["--config", str(tmp_path / "missing.conf")]) == 78


def test_index_command_runs_ai_index_with_the_same_config():
    import sys
    assert gpe.index_command("/etc/m.conf") == [sys.executable, "-m", "varaverk_tools.ai_index",
                                                "--config", "/etc/m.conf"]
    assert gpe.index_command(None) == [sys.executable, "-m", "varaverk_tools.ai_index"]


# ── with the real ai-index (offline embedder) ───────────────────────────────────────────────

def _answers(settings, query: str) -> list[str]:
    """Paths of the chunks the index returns for ``query`` (the retrieval library, for real)."""
    from varaverk.retrieval.search import Retriever
    return [hit.chunk.path for hit in Retriever(settings).search(query, k=3)]


def _meta(settings) -> dict:
    from varaverk.index.store.index import Index
    index = Index.open(settings.index_path, readonly=True)
    try:
        return index.meta()
    finally:
        getattr(index, "close", lambda: None)()


def test_real_index_follows_the_pull_and_a_failed_reindex_keeps_the_old_one(
        tmp_path, remote, clean_env):
    pytest.importorskip("varaverk_tools.ai_index")
    upstream, _, local = remote
    conf = _conf(tmp_path, local)
    settings = _settings(tmp_path, local)
    assert gpe.run_index(conf) == 0  # the first index, before any pull
    assert "docs/zfs.md" not in _answers(settings, "zfs scrub schedule")

    _push(upstream, {"docs/zfs.md": "# ZFS\n\nThe zfs scrub schedule is the first Sunday.\n"})
    run = gpe.pull_and_index(settings, config_path=conf)
    assert run.indexed and run.index_exit == 0
    assert _answers(settings, "zfs scrub schedule")[0] == "docs/zfs.md"

    # The next re-index fails for real: the configured embedder no longer matches the index.
    broken = _conf(tmp_path, local, AI_EMBED_BACKEND="ollama",
                   AI_OLLAMA_HOSTS="http://127.0.0.1:9")
    _push(upstream, {"docs/ups.md": "# UPS\n\nThe UPS battery test runs monthly.\n"})
    before = _meta(settings)
    assert gpe.main(["--config", broken]) == 0  # the pull still succeeds
    assert (local / "docs/ups.md").is_file()
    assert _meta(settings) == before  # same build: same HEAD, generation, files, chunks
    assert _answers(settings, "zfs scrub schedule")[0] == "docs/zfs.md"  # old index answers
    log = (tmp_path / "log" / "git-pull-execute.log").read_text()
    assert "re-index failed with exit code 65" in log
