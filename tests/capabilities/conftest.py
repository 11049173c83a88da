"""Fixtures for the capabilities: a log folder, a repository with a real master.conf full of
canary secrets, and settings pointing at both."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from varaverk.config import Settings
from varaverk.answering.profiles import get_profile

# Every value below must never appear in a prompt block, a response or a log line.
CANARIES = (
    "CANARY-7f3a9c-SECRET",
    "hunter2-canary-pw",
    "Canary-Url-Pw-991",
    "CanarySmtp77",
    "a8F3kQ9zLm2Xv7Rt5Yp1Wc6Nb4Hd0Gs",
    "canary-word-xyz",
    "ghp_CanaryGithubToken0123456789abcd",
)

MASTER_CONF = """\
# live configuration -- NOT tracked by git
MIRROR_DEST="backup@harbor02.lan:/mnt/backup/mirror"
MIRROR_MAX_DELETE_PCT="5"
MIRROR_SHARES="photos documents music family"
NOTIFY_API_TOKEN="CANARY-7f3a9c-SECRET"
DB_PASSWORD='hunter2-canary-pw'
BACKUP_URL="https://backupuser:Canary-Url-Pw-991@backup.example.lan/repo"
SMTP_RELAY=smtp://mailer:CanarySmtp77@mail.lan:587
WEBHOOK_ID="a8F3kQ9zLm2Xv7Rt5Yp1Wc6Nb4Hd0Gs"
INNOCENT_NOTE="contains my secret canary-word-xyz"
GIT_REMOTE_AUTH="ghp_CanaryGithubToken0123456789abcd"
REF_OTHER="$NOTIFY_API_TOKEN"
PRIVATE_KEY_PATH="/root/.ssh/id_ed25519"
"""

READ_KEYS = ("MIRROR_*", "NOTIFY_API_TOKEN", "DB_PASSWORD", "BACKUP_URL", "SMTP_RELAY",
             "WEBHOOK_ID", "INNOCENT_NOTE", "GIT_REMOTE_AUTH", "REF_OTHER", "PRIVATE_KEY_PATH")


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository folder holding the real (git-ignored) Configurations/master.conf."""
    root = tmp_path / "repo"
    (root / "Configurations").mkdir(parents=True)
    (root / "Configurations" / "master.conf").write_text(MASTER_CONF, encoding="utf-8")
    return root


@pytest.fixture
def log_dir(tmp_path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    return d


@pytest.fixture
def settings(repo, log_dir, tmp_path, monkeypatch) -> Settings:
    monkeypatch.delenv("AI_CONFIG", raising=False)
    return Settings(ai_enabled=True, ai_repo_root=repo, ai_data_dir=tmp_path / "data",
                    ai_log_dir=tmp_path / "varaverk-logs", ai_troubleshoot_log_dirs=(str(log_dir),),
                    ai_conf_read_keys=READ_KEYS, ai_health_mounts=("/",),
                    ai_host_name="testhost")


@pytest.fixture
def troubleshoot():
    return get_profile("troubleshoot")


@pytest.fixture
def chat():
    return get_profile("chat")


def turn(question: str, log_path: str | None = None, profile: str = "troubleshoot"):
    """A stand-in with the fields of the worker's TurnRequest that capabilities read."""
    return SimpleNamespace(profile=profile, question=question, history=[], log_path=log_path,
                           kind=None, section=None, k=None, source="cli")


def assert_no_canary(*texts) -> None:
    for text in texts:
        for canary in CANARIES:
            assert canary not in str(text), f"secret {canary!r} leaked into: {str(text)[:300]}"
