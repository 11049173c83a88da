"""Secret shapes in log lines never reach the troubleshoot prompt or a bug draft, and conf
lookup with a wide whitelist never returns a secret; ``*`` is no whitelist."""

from __future__ import annotations

import pytest

from tests.capabilities.conftest import turn
from varaverk.answering.capabilities import (ConfKeyNotAllowed, conf_lookup, draft_bug_report,
                                             gather_context, scrub)
from varaverk.host_secrets import known_secrets
from varaverk.config import ConfigError, Settings, load_settings
from varaverk.answering.profiles import get_profile

LOG_SHAPES = {
    'job: posting {"password": "Pw-json-7731"} to the relay': "Pw-json-7731",
    'job: config {"secret":"Sec-json-8842","user":"bob"}': "Sec-json-8842",
    "job: running mysql -uroot -pMyPw-cli-9953 -h db.lan harbor": "MyPw-cli-9953",
    "job: env DB_PASS='two words-1164' exported": "two words-1164",
    'job: env DB_PASS="dq words-2275" exported': "dq words-2275",
    "job: api_key: Ak-yaml-3386 accepted": "Ak-yaml-3386",
    "job: sshpass -p Ssh-pw-4497 ssh nas": "Ssh-pw-4497",
    "job: --password=Flag-pw-5508 given": "Flag-pw-5508",
    "job: got ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8" + " from env": "ghp_A1b2C3",
    "job: slack xoxb-123456789012-abcdefABCDEF123 posted": "xoxb-123456789012",
    "job: stripe sk_live_" + "a" * 12 + "B" * 12 + " charged": "sk_live_",
}

CONF = """\
MQTT_HOST="mqtt.lan"
MQTT_PW="Mq-pw-canary-1"
WIFI_PSK="wifi-psk-canary-2"
SMB_CRED="smb-cred-canary-3"
ALARM_PIN="4711"
NAS_LOGIN="admin:nas-login-canary-4"
RCLONE_OBSCURED="rclone-obscured-canary-5"
BACKUP_ENC="backup-enc-canary-6"
MIRROR_MAX_DELETE_PCT="5"
"""
CONF_SECRETS = ("Mq-pw-canary-1", "wifi-psk-canary-2", "smb-cred-canary-3", "4711",
                "nas-login-canary-4", "rclone-obscured-canary-5", "backup-enc-canary-6")


@pytest.fixture
def conf_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("AI_CONFIG", raising=False)
    conf = tmp_path / "master.conf"
    conf.write_text(CONF)
    logs = tmp_path / "logs"
    logs.mkdir()
    return Settings(ai_enabled=True, ai_config=conf, ai_repo_root=tmp_path,
                    ai_data_dir=tmp_path / "data", ai_troubleshoot_log_dirs=(str(logs),),
                    ai_conf_read_keys=("MQTT_*", "WIFI_*", "SMB_*", "ALARM_*", "NAS_*",
                                       "RCLONE_*", "BACKUP_*", "MIRROR_*"))


@pytest.mark.parametrize("line, secret", LOG_SHAPES.items())
def test_log_shapes_are_scrubbed(line, secret):
    out = scrub(line)
    assert secret not in out and "[redacted]" in out, out
    assert out.startswith("job:")


@pytest.mark.parametrize("line", ["auth: failed for user bob", "token: 3 failures",
                                  "password prompt timed out", "session: started",
                                  "ssh -p 2222 nas", "PIN_CODE_LENGTH=4 digits"])
def test_prose_is_left_alone(line):
    assert scrub(line) == line


def test_log_shapes_reach_neither_the_prompt_nor_the_bug_draft(conf_settings):
    log = conf_settings.ai_troubleshoot_log_dirs[0] + "/job.log"
    lines = [f"2026-11-29 02:00:{i:02d} ERROR {line}" for i, line in enumerate(LOG_SHAPES)]
    with open(log, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    ctx = gather_context(get_profile("troubleshoot"), turn("why did job fail?", "job.log"),
                         conf_settings)
    prompt = "\n".join(ctx.blocks + ctx.queries)
    assert "ERROR job:" in prompt
    draft = draft_bug_report(get_profile("troubleshoot"), conf_settings, title="job fails",
                             what_happened="see log", log_excerpt="\n".join(lines))
    for secret in LOG_SHAPES.values():
        assert secret not in prompt
        assert secret not in str(draft)


@pytest.mark.parametrize("key", ["MQTT_PW", "WIFI_PSK", "SMB_CRED", "ALARM_PIN", "NAS_LOGIN",
                                 "RCLONE_OBSCURED", "BACKUP_ENC"])
def test_wide_whitelist_never_returns_a_secret(conf_settings, key):
    got = conf_lookup(get_profile("troubleshoot"), conf_settings, key)
    assert got.value == "[redacted]" and got.redacted
    assert not any(s in got.line() for s in CONF_SECRETS)


def test_wide_whitelist_still_reads_plain_values(conf_settings):
    assert conf_lookup(get_profile("troubleshoot"), conf_settings, "MQTT_HOST").value == "mqtt.lan"


def test_star_is_no_whitelist(conf_settings, tmp_path):
    star = conf_settings.replace(ai_conf_read_keys=("*",))
    with pytest.raises(ConfKeyNotAllowed):
        conf_lookup(get_profile("troubleshoot"), star, "MQTT_HOST")
    conf = tmp_path / "star.conf"
    conf.write_text('AI_CONF_READ_KEYS="*"\n')
    with pytest.raises(ConfigError, match="AI_CONF_READ_KEYS"):
        load_settings(conf, environ={})


def test_values_of_keys_off_the_whitelist_are_scrubbed_as_secrets(conf_settings, tmp_path):
    conf_settings.ai_config.write_text(CONF + 'HOMELAB_ODD_THING="odd-value-canary-7"\n')
    narrow = conf_settings.replace(ai_conf_read_keys=("MIRROR_*",))
    known = known_secrets(narrow)
    assert "odd-value-canary-7" in known and "mqtt.lan" in known
    assert "5" not in known  # plain short values are no credential
    out = scrub("relay said odd-value-canary-7 and Mq-pw-canary-1", known)
    assert "canary" not in out
