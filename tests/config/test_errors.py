"""One error hierarchy, one exit-code table, one wrapper around every entry point.

The table in ``varaverk.exitcodes`` is what README.md shows and what each ``--help`` lists; the
errors carry their own codes and kinds; ``varaverk.cli.run`` turns them (and BrokenPipe, Ctrl-C
and unexpected failures) into exit codes and one-line messages.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from varaverk import exitcodes
from varaverk.cli import run
from varaverk.errors import VaraverkError, exit_code_for_kind

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = {  # command -> file with its __main__
    "ai-index": "Tools/varaverk_tools/ai_index.py", "ai-query": "Tools/varaverk_tools/ai_query.py", "ai-dock": "Plugin/varaverk_dock/ai_dock.py",
    "ai-token-sync": "Tools/varaverk_tools/ai_token_sync.py", "git-pull-execute": "Tools/varaverk_tools/git_pull_execute.py",
    "ai-scan-shell": "Tools/varaverk_tools/ai_scan_shell.py", "ai-eval": "Tools/varaverk_tools/ai_eval.py",
    "ai-chat-worker": "Tools/varaverk_tools/ai_chat_worker.py",
}


def _readme_table() -> list[tuple[int, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    return [(int(m.group(1)), m.group(2).strip())
            for m in re.finditer(r"^\| (\d+) \| (.+?) \|$", section, re.M)]


def test_readme_exit_code_table_is_the_codes_table():
    assert _readme_table() == [(row.code, row.meaning) for row in exitcodes.TABLE]


def test_every_named_code_is_in_the_table():
    named = {v for k, v in vars(exitcodes).items() if k.isupper() and isinstance(v, int)}
    assert named == {row.code for row in exitcodes.TABLE}


@pytest.mark.parametrize("command", ["ai-index", "ai-query", "ai-dock", "ai-token-sync",
                                     "git-pull-execute", "ai-eval", "ai-chat-worker"])
def test_help_epilog_lists_codes_from_the_table(command):
    out = subprocess.run([sys.executable, str(ROOT / ENTRY_POINTS[command]), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed = re.findall(r"^  (\d+) +(\S.*)$", out.stdout.split("exit codes:", 1)[1], re.M)
    assert listed, out.stdout
    for code, start in listed:
        meaning = exitcodes.meaning(int(code)).replace("`", "")
        assert meaning.startswith(start.strip()), (code, start)


def test_entry_points_return_no_bare_exit_numbers():
    # A literal such as `return 130` is a code the table cannot vouch for.
    for command, rel in ENTRY_POINTS.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        literals = [node.lineno for node in ast.walk(tree)
                    if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, int) and not isinstance(node.value.value, bool)]
        assert literals == [], f"{rel}: bare exit codes on lines {literals}"


def test_entry_points_run_inside_the_one_wrapper():
    for command, rel in ENTRY_POINTS.items():
        source = (ROOT / rel).read_text(encoding="utf-8")
        assert re.search(r"return (cli\.)?run\(", source), rel
        assert re.search(r"from varaverk(\.cli)? import (cli|run)$", source, re.M), rel


def test_library_errors_share_one_base_with_their_codes_and_kinds():
    from varaverk.config import ConfigError
    from varaverk.embedding import EmbeddingError, EmbeddingUnavailable
    from varaverk.answering.generation.events import GenerationError, GenerationUnavailable
    from varaverk.locking import LockBusy
    from varaverk.answering.profiles import UnknownProfile
    from varaverk.documents.tracked_files import SourcesError
    from varaverk.index.store.errors import IndexCorrupt, IndexMismatch, IndexMissing

    expected = {
        ConfigError: (exitcodes.CONFIG, "config"), SourcesError: (exitcodes.CONFIG, "repository"),
        IndexMissing: (exitcodes.NO_INDEX, "no_index"), IndexCorrupt: (exitcodes.NO_INDEX, "corrupt"),
        IndexMismatch: (exitcodes.MISMATCH, "mismatch"), LockBusy: (exitcodes.LOCKED, "locked"),
        EmbeddingError: (exitcodes.FAILURE, "embedding"),
        EmbeddingUnavailable: (exitcodes.UNAVAILABLE, "unavailable"),
        GenerationError: (exitcodes.FAILURE, "generation"),
        GenerationUnavailable: (exitcodes.UNAVAILABLE, "unavailable"),
        UnknownProfile: (exitcodes.USAGE, "profile"),
    }
    for cls, (code, kind) in expected.items():
        assert issubclass(cls, VaraverkError), cls
        assert (cls.exit_code, cls.kind) == (code, kind), cls
        assert exit_code_for_kind(kind) == code
    assert exit_code_for_kind("something new") == exitcodes.FAILURE
    # Callers that caught the builtin bases still do.
    assert issubclass(ConfigError, ValueError) and issubclass(UnknownProfile, KeyError)
    assert str(UnknownProfile("unknown profile 'x'")) == "unknown profile 'x'"


def test_turn_failed_takes_kind_and_code_from_the_error():
    from varaverk.answering.answer import TurnFailed
    from varaverk.index.store.errors import IndexMismatch

    failed = TurnFailed.of(IndexMismatch("built with local/a, settings name ollama/b"))
    assert failed.kind == "mismatch" and failed.exit_code == exitcodes.MISMATCH
    assert "ai-index --force" in failed.message
    assert TurnFailed.of(RuntimeError("boom"), "retrieval failed").event().data == {
        "message": "retrieval failed: boom", "kind": "failure"}


# ── varaverk.cli.run ──

def _fresh_logging(tmp_path: Path):
    """Point the log machinery at tmp_path as setup_logging would (no file handler)."""
    from varaverk.config import Settings
    from varaverk.logs import setup_logging
    setup_logging(Settings(ai_log_dir=tmp_path / "log"), "ai-test", to_file=False)


def test_run_maps_an_error_to_its_code_and_one_line(tmp_path, capsys):
    from varaverk.index.store.errors import IndexMissing
    _fresh_logging(tmp_path)

    def main(argv):
        raise IndexMissing("no index at /x/index.sqlite")

    assert run("ai-test", main, []) == exitcodes.NO_INDEX
    err = capsys.readouterr().err
    assert err == "ai-test: no index at /x/index.sqlite (run ai-index)\n"
    logged = (tmp_path / "log" / "ai-test.log").read_text()
    assert "no index at /x/index.sqlite" in logged and "Traceback" in logged


def test_run_writes_an_unexpected_failure_to_the_log_not_the_terminal(tmp_path, capsys):
    _fresh_logging(tmp_path)

    def main(argv):
        raise ZeroDivisionError("deep inside")

    assert run("ai-test", main, []) == exitcodes.FAILURE
    err = capsys.readouterr().err
    log_file = tmp_path / "log" / "ai-test.log"
    assert "Traceback" not in err and "ZeroDivisionError: deep inside" in err
    assert str(log_file) in err
    logged = log_file.read_text()
    assert "Traceback (most recent call last)" in logged and "deep inside" in logged


def test_run_ctrl_c_is_130_and_usage_errors_pass_through(tmp_path, capsys):
    _fresh_logging(tmp_path)

    def interrupted(argv):
        raise KeyboardInterrupt

    assert run("ai-test", interrupted, []) == exitcodes.INTERRUPTED
    assert "interrupted" in capsys.readouterr().err

    def usage(argv):
        raise SystemExit(2)

    with pytest.raises(SystemExit):
        run("ai-test", usage, [])


def test_a_closed_pipe_is_a_quiet_exit(tmp_path):
    # More output than a pipe holds, read 400 bytes of: the writer meets a closed pipe.
    script = tmp_path / "many.sh"
    script.write_text("rm -rf /\n" * 3000, encoding="utf-8")
    shell = (f"{sys.executable} {ROOT / 'Tools' / 'varaverk_tools' / 'ai_scan_shell.py'} --json {script} "
             f"| head -c 400 > /dev/null")
    out = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "AI_LOG_DIR": str(tmp_path / "log")})
    assert out.stderr == ""  # not a BrokenPipeError traceback
