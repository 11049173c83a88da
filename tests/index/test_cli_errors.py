"""ai-index's honest errors: every exit code says what happened, and a failure's traceback
lands in the log file, never on the terminal."""

from __future__ import annotations

from tests.index.conftest import make_settings, run_index
from tests.support.repos import make_repo
from varaverk import exitcodes


def test_a_run_where_every_chunk_failed_to_embed_is_not_a_success(tmp_path, model_server):
    # Every request is "too long" for this server, even each half: no chunk gets a vector.
    model_server.max_input_chars = 1
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nSome text about the mover.\n"})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == exitcodes.EMBED_FAILED, proc.stderr
    assert "no chunk got a vector" in proc.stderr
    assert "README.md" in (settings.ai_log_dir / "ai-index.log").read_text()
    # Once the server embeds again, the recorded file is retried and the run succeeds.
    model_server.max_input_chars = None
    proc = run_index(settings)
    assert proc.returncode == exitcodes.OK, proc.stderr
    assert "1 indexed" in proc.stderr


def test_status_with_an_unusable_model_setting_names_the_key_not_force(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n"})
    settings = make_settings(repo, tmp_path)  # built with the local embedder
    assert run_index(settings).returncode == exitcodes.OK
    proc = run_index(settings, "--status", env_extra={"AI_EMBED_MODEL": "bge-small"})
    assert proc.returncode == exitcodes.CONFIG
    assert "AI_EMBED_MODEL" in proc.stderr and "--force" not in proc.stdout + proc.stderr
    assert run_index(settings, "--force", env_extra={"AI_EMBED_MODEL": "bge-small"}
                     ).returncode == exitcodes.CONFIG


def test_a_broken_index_file_exits_66_from_every_command(tmp_path):
    import subprocess
    import sys

    from tests.index.conftest import cli_env
    from tests.query.test_cli import ENTRY as QUERY

    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n"})
    settings = make_settings(repo, tmp_path)
    settings.index_path.parent.mkdir(parents=True)
    settings.index_path.write_bytes(b"not a database at all" * 100)
    for proc in (run_index(settings), run_index(settings, "--status"),
                 subprocess.run([sys.executable, str(QUERY), "--search", "x"],
                                env=cli_env(settings), capture_output=True, text=True,
                                timeout=120)):
        assert proc.returncode == exitcodes.NO_INDEX, proc.stderr
        assert "is damaged" in proc.stderr and "ai-index --force" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_an_unexpected_failure_leaves_its_traceback_in_the_log(tmp_path):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\nText.\n"})
    settings = make_settings(repo, tmp_path)
    # A folder where the index file should be: SQLite fails in a way nothing anticipates.
    settings.index_path.mkdir(parents=True)
    proc = run_index(settings)
    assert proc.returncode == exitcodes.FAILURE, proc.stderr
    log_file = settings.ai_log_dir / "ai-index.log"
    assert "Traceback" not in proc.stderr
    assert "unexpected error: OperationalError" in proc.stderr and str(log_file) in proc.stderr
    logged = log_file.read_text()
    assert "Traceback (most recent call last)" in logged and "OperationalError" in logged
