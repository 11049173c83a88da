"""Settings are validated when they are loaded: numbers in range, the local embedder's one
model, unknown AI_* keys and shell variables in the conf warned about."""

from __future__ import annotations

import logging

import pytest

from varaverk import exitcodes
from varaverk.config import RANGES, ConfigError, Settings, load_settings


@pytest.fixture(autouse=True)
def _records_reach_caplog(monkeypatch):
    # setup_logging (run by other tests in this process) stops "varaverk" propagating.
    monkeypatch.setattr(logging.getLogger("varaverk"), "propagate", True)


def _conf(tmp_path, text: str):
    path = tmp_path / "master.conf"
    path.write_text(text)
    return path


@pytest.mark.parametrize("key, value, allowed", [
    ("AI_TOP_K", "0", "between 1 and 1000"),                # silently meant 5 before
    ("AI_INDEX_LOCK_TIMEOUT", "-5", "between 0 and 86400"),  # "waited -5 s" before
    ("AI_MIN_SCORE", "1.5", "between 0 and 1"),
    ("AI_HTTP_TIMEOUT", "0", "between 0.1 and 86400"),
    ("AI_EMBED_BATCH", "0", "between 1 and 4096"),
    ("AI_DOCK_WORKERS", "0", "between 1 and 256"),
])
def test_a_value_out_of_range_names_the_key_and_the_range(tmp_path, key, value, allowed):
    with pytest.raises(ConfigError) as caught:
        load_settings(_conf(tmp_path, ""), environ={key: value})
    assert str(caught.value).startswith(f"{key}: must be {allowed}, got ")
    assert caught.value.exit_code == exitcodes.CONFIG


def test_the_defaults_are_inside_their_ranges(tmp_path):
    defaults = Settings()
    for name, (low, high) in RANGES.items():
        assert low <= getattr(defaults, name) <= high, name
    assert load_settings(_conf(tmp_path, ""), environ={"AI_TOP_K": "1"}).ai_top_k == 1


def test_a_local_model_that_is_not_shipped_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match="AI_EMBED_MODEL: the local backend ships only"):
        load_settings(_conf(tmp_path, ""), environ={"AI_EMBED_MODEL": "bge-small"})
    # the same name is fine for a server, which may well have it
    s = load_settings(_conf(tmp_path, ""), environ={"AI_EMBED_MODEL": "bge-small",
                                                    "AI_EMBED_BACKEND": "ollama"})
    assert s.ai_embed_model == "bge-small"


def test_an_unknown_key_is_warned_with_the_nearest_name(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="varaverk.config"):
        s = load_settings(_conf(tmp_path, 'AI_TOPK="3"\nAI_COMPLETELY_OTHER="x"\n'),
                          environ={"AI_EMBED_BATCHES": "8"})
    assert s.ai_top_k == 5  # ignored, as warned
    messages = [r.getMessage() for r in caplog.records]
    assert any("AI_TOPK" in m and "did you mean AI_TOP_K?" in m for m in messages), messages
    assert any("AI_EMBED_BATCHES (in the environment)" in m and "AI_EMBED_BATCH?" in m
               for m in messages), messages
    assert any("AI_COMPLETELY_OTHER" in m and "did you mean" not in m for m in messages)


def test_a_shell_variable_in_the_conf_is_warned(tmp_path, caplog):
    conf = _conf(tmp_path, 'AI_DATA_DIR=$HOME/data\nAI_LOG_DIR="${HOME}/log"\nAI_TOP_K=4\n')
    with caplog.at_level(logging.WARNING, logger="varaverk.config"):
        s = load_settings(conf, environ={"AI_REPO_ROOT": str(tmp_path)})
    assert s.ai_data_dir == tmp_path / "$HOME" / "data"  # literal, as the warning says
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"AI_DATA_DIR in {conf} holds $HOME, which is kept literally")
               for m in messages), messages
    assert any(m.startswith(f"AI_LOG_DIR in {conf} holds ${{HOME}}") for m in messages)
    assert not any("AI_TOP_K" in m for m in messages)


def test_settings_warnings_read_like_every_other_warning_of_the_command(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.environ import environ_without_ai
    conf = _conf(tmp_path, f'AI_ENABLED=true\nAI_TOPK="3"\nAI_DATA_DIR="{tmp_path}/data"\n')
    entry = Path(__file__).resolve().parents[2] / "Tools" / "varaverk_tools" / "ai_index.py"
    done = subprocess.run([sys.executable, str(entry), "--status", "--config", str(conf)],
                          env=environ_without_ai(), capture_output=True, text=True, timeout=120)
    assert f"ai-index: warning: AI_TOPK (in {conf}) is not a Varaverk setting and is ignored; " \
           "did you mean AI_TOP_K?" in done.stderr.splitlines(), done.stderr
