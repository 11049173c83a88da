"""gunicorn's own bind override (GUNICORN_CMD_ARGS, --bind on a hand-run gunicorn) obeys the
token rule: refused before a socket opens, exit 78. Only loopback traffic is ever sent."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import httpx
import pytest

from tests.dock.conftest import ROOT, free_port, write_conf
from varaverk import exitcodes
from varaverk.config import ConfigError
from varaverk_dock import security
from varaverk_dock.ai_dock import GUNICORN_CONF
from varaverk_dock.app import create_app


def _env(conf, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AI_", "GUNICORN"))}
    env.update({"AI_CONFIG": str(conf), **extra})
    return env


def _no_listener(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("how", ["ai-dock", "gunicorn"])
def test_network_bind_from_gunicorn_is_refused_before_listening(settings, tmp_path, how):
    port = free_port()
    conf = write_conf(tmp_path / "master.conf",
                      settings.replace(ai_dock_bind=f"127.0.0.1:{port}", ai_dock_token=""))
    if how == "ai-dock":
        cmd = [sys.executable, "-m", "varaverk_dock.ai_dock"]
        env = _env(conf, GUNICORN_CMD_ARGS=f"--bind 0.0.0.0:{port}")
    else:
        cmd = [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF),
               "--bind", f"0.0.0.0:{port}", "varaverk_dock.app:create_app()"]
        env = _env(conf)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == exitcodes.CONFIG, proc.stderr
    assert f"would listen on 0.0.0.0:{port}, which is not a loopback address" in proc.stderr
    assert "set AI_DOCK_TOKEN" in proc.stderr
    assert "Listening at" not in proc.stderr and "Booting worker" not in proc.stderr
    assert _no_listener(port)


def test_loopback_override_still_serves(settings, tmp_path):
    port, other = free_port(), free_port()
    conf = write_conf(tmp_path / "master.conf",
                      settings.replace(ai_dock_bind=f"127.0.0.1:{other}", ai_dock_token=""))
    err = open(tmp_path / "stderr", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "varaverk_dock.ai_dock"], cwd=ROOT,
                            env=_env(conf, GUNICORN_CMD_ARGS=f"--bind 127.0.0.1:{port}"),
                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        for _ in range(300):
            try:
                resp = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None
                import time
                time.sleep(0.2)
        assert resp.status_code == 200
        err.seek(0)
        said = err.read()  # the address it really listens on, never the overridden one
        assert f"ai-dock: open http://127.0.0.1:{port}/" in said and f":{other}" not in said
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        err.close()


def test_check_listeners_on_real_sockets():
    with socket.socket() as loop, socket.socket() as anyaddr:
        loop.bind(("127.0.0.1", 0))
        anyaddr.bind(("0.0.0.0", 0))  # never listens: no traffic can arrive
        assert security.check_listeners([loop.getsockname()], "") is True
        with pytest.raises(ConfigError, match=r"would listen on 0\.0\.0\.0:\d+"):
            security.check_listeners([loop.getsockname(), anyaddr.getsockname()], "")
        assert security.check_listeners([anyaddr.getsockname()], "tok") is False
    assert security.check_listeners(["unix:/run/varaverk.sock", "/run/v.sock"], "") is True
    with pytest.raises(ConfigError):
        security.check_listeners(["[::]:8470"], "")
    with pytest.raises(ConfigError):
        security.check_listeners(["fd://3"], "")


def test_request_arriving_on_a_network_address_without_token_is_refused(settings):
    client = create_app(settings).test_client()
    with socket.socket() as anyaddr, socket.socket() as loop:
        anyaddr.bind(("0.0.0.0", 0))
        loop.bind(("127.0.0.1", 0))
        resp = client.get("/api/chats", environ_overrides={"gunicorn.socket": anyaddr})
        assert resp.status_code == 403
        assert "loopback only" in resp.get_json()["error"]
        ok = client.get("/api/chats", environ_overrides={"gunicorn.socket": loop})
        assert ok.status_code == 200
