"""Logging: file under AI_LOG_DIR plus stderr; secrets never written."""

from __future__ import annotations

import logging

from varaverk.config import Settings
from varaverk.logs import setup_logging


def test_log_file_and_stderr_and_secrets_masked(tmp_path, capsys):
    settings = Settings(ai_repo_root=tmp_path, ai_log_dir=tmp_path / "log",
                        ai_openai_api_key="sk-very-secret-123", ai_dock_token="dock-token-456")
    log = setup_logging(settings, "ai-index")
    log.info("connecting with key %s", "sk-very-secret-123")
    log.warning("token dock-token-456 refused")
    for handler in logging.getLogger("varaverk").handlers:
        handler.flush()
    text = (tmp_path / "log" / "ai-index.log").read_text()
    err = capsys.readouterr().err
    for out in (text, err):
        assert "sk-very-secret-123" not in out and "dock-token-456" not in out
        assert "connecting with key <redacted>" in out
    assert "ai-index: warning: token <redacted> refused" in err
    assert " ai-index[" in text and " INFO " in text


def test_quiet_and_no_file(tmp_path, capsys):
    settings = Settings(ai_repo_root=tmp_path, ai_log_dir=tmp_path / "log")
    log = setup_logging(settings, "ai-index", quiet=True, to_file=False)
    log.info("hidden")
    log.error("shown")
    assert capsys.readouterr().err == "ai-index: error: shown\n"
    assert not (tmp_path / "log").exists()


def test_a_grown_log_is_rotated_when_the_next_run_starts(tmp_path):
    from varaverk.logs import rotate_at_start

    log_file = tmp_path / "ai-index.log"
    log_file.write_bytes(b"x" * 200)
    (tmp_path / "ai-index.log.1").write_bytes(b"older")
    rotate_at_start(log_file, max_bytes=100, backups=3)
    assert not log_file.exists()
    assert (tmp_path / "ai-index.log.1").read_bytes() == b"x" * 200
    assert (tmp_path / "ai-index.log.2").read_bytes() == b"older"
    small = tmp_path / "small.log"
    small.write_bytes(b"tiny")
    rotate_at_start(small, max_bytes=100)
    assert small.read_bytes() == b"tiny" and not (tmp_path / "small.log.1").exists()
    rotate_at_start(tmp_path / "missing.log")  # no file yet: nothing to do, no error


def test_a_line_appended_without_logging_reads_as_a_logged_one(tmp_path):
    """log_files.append_line (the no-op shortcut's log line) against the same record through
    setup_logging: same layout, secrets redacted, control characters escaped."""
    from varaverk.log_files import append_line

    settings = Settings(ai_repo_root=tmp_path, ai_log_dir=tmp_path / "log",
                        ai_openai_api_key="sk-very-secret-123")
    message = "index up to date: key sk-very-secret-123, name \x1b[31mred"
    setup_logging(settings, "ai-index").info("%s", message)
    for handler in logging.getLogger("varaverk").handlers:
        handler.flush()
    append_line(tmp_path / "log", "ai-index", "INFO", message, ["sk-very-secret-123", ""])
    logged, appended = (tmp_path / "log" / "ai-index.log").read_text().splitlines()
    assert logged.split(" ", 2)[2] == appended.split(" ", 2)[2]  # all but date and time
    assert appended.endswith("INFO varaverk.ai_index: index up to date: key <redacted>, name "
                             "\\x1b[31mred")
    assert len(logged.split(" ", 2)[1]) == len(appended.split(" ", 2)[1]) == len("09:29:23,353")
