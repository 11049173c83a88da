"""Request checks of the dock: bind address, token, same-origin, Host, chat ids; and the
``ai-dock`` entry point's refusal to start unsafely."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.dock.conftest import ROOT
from varaverk import exitcodes
from varaverk.config import ConfigError
from varaverk_dock import security
from varaverk_dock.ai_dock import main


@pytest.mark.parametrize("bind, expected", [
    ("127.0.0.1:8470", ("127.0.0.1", 8470)), ("[::1]:9000", ("::1", 9000)),
    ("localhost:80", ("localhost", 80)), ("0.0.0.0:8470", ("0.0.0.0", 8470)),
])
def test_parse_bind(bind, expected):
    assert security.parse_bind(bind) == expected


@pytest.mark.parametrize("bind", ["8470", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", ":80",
                                  "host:http"])
def test_parse_bind_rejects(bind):
    with pytest.raises(ConfigError, match="AI_DOCK_BIND"):
        security.parse_bind(bind)


@pytest.mark.parametrize("bind", ["127.0.0.1:8470", "127.5.5.5:1", "[::1]:8470", "localhost:8470"])
def test_loopback_binds_need_no_token(bind):
    assert security.check_bind(bind, "") is True


@pytest.mark.parametrize("bind", ["0.0.0.0:8470", "[::]:8470", "192.168.1.5:8470",
                                  "harbor01.lan:8470"])
def test_network_binds_need_a_token(bind):
    with pytest.raises(ConfigError, match="AI_DOCK_TOKEN"):
        security.check_bind(bind, "")
    assert security.check_bind(bind, "tok") is False


def test_token_comparison():
    assert security.token_ok("abc", "abc")
    assert not security.token_ok("abd", "abc")
    assert not security.token_ok("", "abc") and not security.token_ok(None, "abc")
    assert not security.token_ok("abc", "")  # no token configured: nothing matches
    assert security.token_ok("päss", "päss")


def test_cookie_is_a_keyed_hash_not_the_token():
    value = security.session_cookie_value("tok-123")
    assert "tok-123" not in value and len(value) == 64
    assert security.cookie_ok(value, "tok-123")
    assert not security.cookie_ok(value, "tok-124")
    assert not security.cookie_ok("tok-123", "tok-123")


HOST = "http://127.0.0.1:8470/"


@pytest.mark.parametrize("headers, allowed", [
    ({"Sec-Fetch-Site": "same-origin"}, True),
    ({"Sec-Fetch-Site": "none"}, True),
    ({"Sec-Fetch-Site": "same-site"}, False),
    ({"Sec-Fetch-Site": "cross-site", "Origin": "http://127.0.0.1:8470"}, False),
    ({"Origin": "http://127.0.0.1:8470"}, True),
    ({"Origin": "HTTP://127.0.0.1:8470"}, True),
    ({"Origin": "http://127.0.0.1:8471"}, False),
    ({"Origin": "https://127.0.0.1:8470"}, False),
    ({"Origin": "null"}, False),
    ({"Referer": "http://127.0.0.1:8470/?x=1"}, True),
    ({"Referer": "http://127.0.0.1.evil.example/"}, False),
    ({}, False),
])
def test_same_origin(headers, allowed):
    assert security.same_origin(headers, HOST)[0] is allowed


@pytest.mark.parametrize("host, allowed", [
    ("127.0.0.1:8470", True), ("localhost:8470", True), ("[::1]:8470", True), ("localhost", True),
    ("evil.example:8470", False), ("127.0.0.1.nip.io:8470", False), ("", False), (None, False),
])
def test_host_allowed(host, allowed):
    assert security.host_allowed(host) is allowed


@pytest.mark.parametrize("chat_id, ok", [
    ("2026-11-29T22-40-00-hostA-3f9c1a", True), ("c1", True), ("a_b-c", True),
    ("../etc", False), ("a/b", False), ("a.json", False), ("", False), (None, False),
    ("-x", False), ("x" * 128, True), ("x" * 129, False), ("ä", False),
])
def test_valid_chat_id(chat_id, ok):
    assert security.valid_chat_id(chat_id) is ok


# ── the entry point ─────────────────────────────────────────────────────────────────────────

def test_ai_dock_refuses_a_network_bind_without_token(tmp_path, capsys, monkeypatch):
    for key in ("AI_DOCK_TOKEN", "AI_DOCK_BIND"):
        monkeypatch.delenv(key, raising=False)
    conf = tmp_path / "master.conf"
    conf.write_text('AI_ENABLED="true"\nAI_DOCK_BIND="0.0.0.0:8470"\n'
                    f'AI_DATA_DIR="{tmp_path}"\nAI_LOG_DIR="{tmp_path}/log"\n')
    assert main(["--config", str(conf), "--check"]) == exitcodes.CONFIG
    assert "AI_DOCK_TOKEN" in capsys.readouterr().err
    assert main(["--config", str(conf), "--bind", "127.0.0.1:8470", "--check"]) == exitcodes.OK


def test_ai_dock_check_never_prints_the_token(tmp_path, monkeypatch):
    conf = tmp_path / "master.conf"
    conf.write_text('AI_DOCK_BIND="0.0.0.0:8470"\nAI_DOCK_TOKEN="very-secret-token-value"\n'
                    f'AI_DATA_DIR="{tmp_path}"\nAI_LOG_DIR="{tmp_path}/log"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, str(ROOT / "Plugin" / "varaverk_dock" / "ai_dock.py"), "--config",
                          str(conf), "--check", "-v"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "http://0.0.0.0:8470/" in out.stdout
    assert "very-secret-token-value" not in out.stdout + out.stderr


def test_gunicorn_refuses_a_network_bind_without_token(tmp_path):
    conf = tmp_path / "master.conf"
    conf.write_text(f'AI_DOCK_BIND="0.0.0.0:8470"\nAI_DATA_DIR="{tmp_path}"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AI_CONFIG": str(conf)}
    out = subprocess.run([sys.executable, "-m", "gunicorn", "--config",
                          str(ROOT / "Deployment" / "gunicorn.conf.py"), "--check-config"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode != 0
    assert "AI_DOCK_TOKEN" in out.stderr + out.stdout
