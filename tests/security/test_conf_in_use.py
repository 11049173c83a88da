"""The conf the capabilities read is the conf in use: --config X with AI_REPO_ROOT set makes
known_secrets() and conf lookup read X, not Configurations/master.conf of the repository."""

from __future__ import annotations

from varaverk.answering.capabilities import conf_lookup, scrub
from varaverk.host_secrets import known_secrets
from varaverk.config import load_settings
from varaverk.answering.profiles import get_profile


def _setup(tmp_path):
    repo = tmp_path / "repo"
    (repo / "Configurations").mkdir(parents=True)
    (repo / "Configurations" / "master.conf").write_text(
        'MIRROR_MAX_DELETE_PCT="9"\nOTHER_TOKEN="repo-conf-token-000"\n')
    conf = tmp_path / "elsewhere" / "x.conf"
    conf.parent.mkdir()
    conf.write_text('AI_ENABLED="true"\nAI_CONF_READ_KEYS="MIRROR_MAX_DELETE_PCT"\n'
                    'MIRROR_MAX_DELETE_PCT="5"\nNOTIFY_API_TOKEN="CANARY-x-conf-7f3a9c"\n')
    return repo, conf


def test_config_flag_is_the_conf_capabilities_read(tmp_path):
    repo, conf = _setup(tmp_path)
    settings = load_settings(conf, environ={"AI_REPO_ROOT": str(repo)})
    assert settings.conf_file == conf.resolve()
    assert "CANARY-x-conf-7f3a9c" in known_secrets(settings)
    assert "CANARY-x-conf-7f3a9c" not in scrub("notify failed: token CANARY-x-conf-7f3a9c",
                                               known_secrets(settings))
    got = conf_lookup(get_profile("troubleshoot"), settings, "MIRROR_MAX_DELETE_PCT")
    assert got.value == "5"


def test_ai_config_in_the_environment_is_resolved_once(tmp_path, monkeypatch):
    repo, conf = _setup(tmp_path)
    monkeypatch.chdir(conf.parent)
    settings = load_settings(environ={"AI_CONFIG": "x.conf", "AI_REPO_ROOT": str(repo)})
    monkeypatch.chdir(tmp_path)  # a later chdir changes nothing: the path is absolute
    assert settings.conf_file == conf.resolve()
    assert "CANARY-x-conf-7f3a9c" in known_secrets(settings)


def test_default_conf_is_the_repository_one_when_nothing_is_given(tmp_path):
    repo, _ = _setup(tmp_path)
    settings = load_settings(environ={"AI_REPO_ROOT": str(repo)})
    # load_settings read the tool's own default; capabilities read that same file.
    from varaverk.config import default_config_path
    assert settings.conf_file == default_config_path().resolve()
