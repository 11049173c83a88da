"""Terminal escapes in a tracked document or in model output never reach the terminal raw:
ai-query's human output (also on a tty) shows them as \\x1b; --json stays JSON."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from tests.index.conftest import ENTRY, cli_env, make_settings, run_index
from tests.support.repos import make_repo
from varaverk.terminal import neutralise

QUERY = ENTRY.parent / "ai_query.py"
OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
TITLE = "\x1b]0;pwned\x07"
CSI = "\x1b[2J\x1b[1A\x9b2J\r"
DOC = f"# Walrus guide\n\nFeed the walrus at noon {OSC52} then rest {TITLE} walrus {CSI}done.\n"


def _env(settings):
    return {**cli_env(settings), "AI_GEN_BACKEND": "ollama", "AI_GEN_MODEL": "fake-chat",
            "AI_HTTP_TIMEOUT": "10", "AI_MIN_SCORE": "0.0001"}


def _on_tty(args, env) -> str:
    """Run ai-query with stdout and stderr on a pseudo-terminal; everything it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(QUERY), *args], stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def indexed(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"Docs/README-Walrus.md": DOC})
    settings = make_settings(repo, tmp_path, model_server)
    assert run_index(settings).returncode == 0
    return settings


def _assert_neutral(text: str) -> None:
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in text, repr(text[:300])
    assert "\\x1b]52;c;" in text and "\\x07" in text


def test_search_shows_escapes_visibly_on_a_tty_and_in_a_pipe(indexed):
    env = _env(indexed)
    _assert_neutral(_on_tty(["--search", "walrus noon"], env))
    piped = subprocess.run([sys.executable, str(QUERY), "--search", "walrus noon"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    _assert_neutral(piped.stdout)


def test_model_output_escapes_are_neutralised(indexed, model_server):
    model_server.script(content=["The walrus eats ", OSC52, " at noon", TITLE, "."],
                        thinking=["think ", TITLE])
    out = _on_tty(["--show-reasoning", "when is the walrus fed?"], _env(indexed))
    assert "\x1b[2m" in out  # ai-query's own dim style for reasoning is kept
    _assert_neutral(out.replace("\x1b[2m", "").replace("\x1b[0m", ""))
    assert "The walrus eats \\x1b]52;c;" in out


def test_json_output_escapes_them_as_json(indexed):
    out = subprocess.run([sys.executable, str(QUERY), "--search", "--json", "walrus noon"],
                         env=_env(indexed), capture_output=True, text=True, timeout=120)
    assert "\x1b" not in out.stdout
    data = json.loads(out.stdout)
    # Stored as written (its high-entropy payload masked): JSON carries the escape escaped.
    assert "\x1b]52;c;" in data["results"][0]["text"] and TITLE in data["results"][0]["text"]


def test_neutralise_keeps_text_tabs_and_newlines():
    assert neutralise("a\tb\nc é ✓") == "a\tb\nc é ✓"
    assert neutralise("\x1b[31mred\u202e") == "\\x1b[31mred\\u202e"


def test_tracked_file_names_with_escapes_are_shown_escaped(tmp_path, model_server):
    name = f"Docs/README-{TITLE}x.md"
    repo = make_repo(tmp_path / "r", {name: "# T\nText.\n", "Media/evil\x1b[2J.png": b"\x00"})
    settings = make_settings(repo, tmp_path, model_server)
    indexed = run_index(settings, "-v")
    assert indexed.returncode == 0, indexed.stderr
    status = run_index(settings, "--status")
    dry = run_index(settings, "--dry-run")
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    for text in (indexed.stdout + indexed.stderr, status.stdout, dry.stdout, log):
        assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b[2J.png" in status.stdout
    json_status = run_index(settings, "--status", "--json")
    assert "\x1b" not in json_status.stdout and "evil\\u001b[2J.png" in json_status.stdout
