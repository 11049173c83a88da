"""Configuration: conf file, environment overrides, types, secrets, and the documented schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from varaverk.config import ConfigError, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]


def write_conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "master.conf"
    path.write_text(text)
    return path


def test_defaults_are_off_and_local(tmp_path):
    settings = load_settings(write_conf(tmp_path, ""), environ={})
    assert settings.ai_enabled is False
    assert settings.ai_embed_backend == "local"
    assert settings.ai_top_k == 5
    assert settings.ai_dock_bind == "127.0.0.1:8470"


def test_conf_values_are_typed_and_literal(tmp_path):
    conf = write_conf(tmp_path, '\n'.join([
        '# a comment', 'AI_ENABLED="yes"', "AI_TOP_K=9",
        'AI_OLLAMA_HOSTS="http://gpu-box:11434, http://127.0.0.1:11434"',
        'AI_GEN_MODEL="$(rm -rf /)"',            # taken literally, never executed
        'AI_DATA_DIR="state/data"',               # relative: against the repository root
        'OTHER_SCRIPT_KEY="ignored"',
    ]))
    s = load_settings(conf, environ={"AI_REPO_ROOT": str(tmp_path)})
    assert s.ai_enabled is True and s.ai_top_k == 9
    assert s.ai_ollama_hosts == ("http://gpu-box:11434", "http://127.0.0.1:11434")
    assert s.ai_gen_model == "$(rm -rf /)"
    assert s.ai_data_dir == tmp_path.resolve() / "state" / "data"
    assert s.index_path.parent == s.ai_data_dir / "indexes"  # one index per repository
    assert s.index_path.name.startswith(tmp_path.resolve().name + "-")


def test_environment_overrides_the_file(tmp_path):
    conf = write_conf(tmp_path, 'AI_TOP_K="9"\nAI_EMBED_BACKEND="ollama"\n')
    s = load_settings(conf, environ={"AI_TOP_K": "3"})
    assert s.ai_top_k == 3 and s.ai_embed_backend == "ollama"


@pytest.mark.parametrize("line, key", [
    ('AI_TOP_K="many"', "AI_TOP_K"),
    ('AI_ENABLED="perhaps"', "AI_ENABLED"),
    ('AI_EMBED_BACKEND="word2vec"', "AI_EMBED_BACKEND"),
    ('AI_INDEX_LOCK_TIMEOUT="soon"', "AI_INDEX_LOCK_TIMEOUT"),
])
def test_bad_values_name_their_key(tmp_path, line, key):
    with pytest.raises(ConfigError, match=key):
        load_settings(write_conf(tmp_path, line + "\n"), environ={})


def test_explicit_missing_conf_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.conf", environ={})


def test_secrets_never_in_repr_or_redacted_view(tmp_path):
    conf = write_conf(tmp_path, 'AI_OPENAI_API_KEY="sk-live-123456"\nAI_DOCK_TOKEN="dock-secret"\n')
    s = load_settings(conf, environ={})
    assert s.ai_openai_api_key == "sk-live-123456"
    assert "sk-live-123456" not in repr(s) and "dock-secret" not in repr(s)
    shown = s.redacted()
    assert shown["AI_OPENAI_API_KEY"] == "<set>" and shown["AI_FLEET_TOKEN"] == "<unset>"
    assert "sk-live-123456" not in str(shown)


def test_template_documents_every_setting():
    template = (ROOT / "Deployment" / "master.conf.template").read_text()
    documented = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", template, re.M))
    keys = {name.upper() for name in Settings._fields}
    assert keys - documented == set(), "undocumented settings"
    assert documented - keys == set(), "template documents settings that do not exist"


def test_example_conf_parses_with_only_known_keys():
    example = ROOT / "Configurations.example" / "master.conf"
    keys = {name.upper() for name in Settings._fields}
    used = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", example.read_text(), re.M))
    assert used <= keys
    s = load_settings(example, environ={})
    assert s.ai_enabled is True and s.ai_embed_backend == "ollama"


def test_entry_points_report_a_bad_conf_in_one_format(tmp_path, capsys):
    from varaverk.config import load_settings_or_report

    assert load_settings_or_report("ai-index", write_conf(tmp_path, 'AI_TOP_K="many"\n')) is None
    assert capsys.readouterr().err.startswith("ai-index: configuration error: AI_TOP_K")
    good = load_settings_or_report("ai-index", write_conf(tmp_path, 'AI_TOP_K="4"\n'))
    assert good is not None and good.ai_top_k == 4


def test_an_empty_folder_setting_means_its_documented_default(tmp_path):
    """The shipped template says AI_DATA_DIR="" is ~/.local/share/varaverk and AI_LOG_DIR=""
    ~/.local/state/varaverk/log; an empty value once put the index and the logs in the
    repository root instead."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "none").mkdir()
    conf = write_conf(tmp_path / "empty", 'AI_DATA_DIR=""\nAI_LOG_DIR=""\nAI_REPO_ROOT=""\n')
    settings = load_settings(conf, environ={})
    default = load_settings(write_conf(tmp_path / "none", ""), environ={})
    assert settings.ai_data_dir == default.ai_data_dir != settings.ai_repo_root
    assert settings.ai_log_dir == default.ai_log_dir
    assert settings.ai_repo_root == default.ai_repo_root
