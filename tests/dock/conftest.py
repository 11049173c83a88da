"""Dock fixtures: a real index of harborlab built once against the fake model server, per-test
data folders, the Flask test client, and a real gunicorn running ``ai-dock`` on a free port."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.environ import environ_without_ai, write_master_conf
from tests.support.model_server import ModelServer
from varaverk.config import Settings

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
EMBED_MODEL = "fake-embed"
CHAT_MODEL = "fake-chat"
QUESTION = "What does MIRROR_MAX_DELETE_PCT control?"
EXPECTED_ANSWER = ("According to [Backup/rsync_mirror.sh › CONFIGURATION › "
                   "MIRROR_MAX_DELETE_PCT], this is covered.")


@dataclass
class DockIndex:
    """One harborlab repository and its index file (embedded by a fake model server)."""

    repo: Path
    index_file: Path


@pytest.fixture(scope="session")
def dock_index(harborlab_pristine, tmp_path_factory) -> DockIndex:
    """harborlab indexed once per session through the fake Ollama embeddings (2 s, not the
    minutes the real offline embedder would take on two shared cores)."""
    from varaverk.index.refresh import refresh

    data = tmp_path_factory.mktemp("dock-index")
    with ModelServer() as server:
        settings = base_settings(harborlab_pristine, data, server)
        report = refresh(settings, progress=False)
    assert report.chunks_embedded > 100, report
    return DockIndex(repo=harborlab_pristine, index_file=settings.index_path)


def base_settings(repo: Path, data: Path, server: ModelServer, **changes) -> Settings:
    """Settings for a dock on loopback over ``repo`` with everything in ``data``."""
    values = dict(ai_enabled=True, ai_repo_root=repo, ai_data_dir=data, ai_log_dir=data / "log",
                  ai_embed_backend="ollama", ai_embed_model=EMBED_MODEL,
                  ai_ollama_hosts=(server.base_url,), ai_gen_backend="ollama",
                  ai_gen_model=CHAT_MODEL, ai_host_name="hostA",
                  ai_token_cache_dir=data / "token-cache", ai_hosts_conf=data / "hosts.conf",
                  ai_http_timeout=20.0)
    values.update(changes)
    return Settings(**values)


@pytest.fixture
def model(model_server) -> ModelServer:
    """This test's fake model server (the shared ``model_server`` fixture). Its embeddings are
    a deterministic function of the text, so queries match the session index built by another
    instance of the same server."""
    return model_server


@pytest.fixture
def data_dir(dock_index, tmp_path) -> Path:
    """A fresh AI_DATA_DIR holding a copy of the session's index."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy2(dock_index.index_file, data / "index.sqlite")
    return data


@pytest.fixture
def settings(dock_index, data_dir, model) -> Settings:
    """Loopback dock settings over harborlab, AI enabled, the fake model server."""
    return base_settings(dock_index.repo, data_dir, model)


@pytest.fixture
def app(settings):
    from varaverk_dock.app import create_app

    return create_app(settings)


ORIGIN = "http://localhost"


@pytest.fixture
def client(app):
    """Flask test client; ``SAME`` headers make a request same-origin."""
    return app.test_client()


SAME = {"Origin": ORIGIN}


def events_of(body: bytes | str) -> list[dict]:
    """Parse an NDJSON stream body into its events (each ``{"type", "data"}``)."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningDock:
    """A dock started with ``ai-dock`` (gunicorn) as a subprocess."""

    process: subprocess.Popen
    url: str
    settings: Settings
    log_file: Path

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers), as a crash would."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def write_conf(path: Path, settings: Settings) -> Path:
    """A master.conf holding every AI_* value of ``settings`` (secrets included, for tests)."""
    values = settings.redacted()
    for key in ("AI_DOCK_TOKEN", "AI_OPENAI_API_KEY", "AI_FLEET_TOKEN"):
        if key in values:
            values[key] = getattr(settings, key.lower())
    return write_master_conf(path, values)


def start_dock(settings: Settings, tmp_path: Path, workers: int = 2,
               extra_conf: str = "") -> RunningDock:
    """Run ``ai-dock --config CONF`` (which execs gunicorn) and wait until it answers.

    ``extra_conf``: more ``KEY=value`` lines for CONF (the keys a homelab's conf holds for
    other scripts, secrets included, which the capabilities read).
    """
    port = free_port()
    settings = settings.replace(ai_dock_bind=f"127.0.0.1:{port}", ai_dock_workers=workers)
    conf = write_conf(tmp_path / "master.conf", settings)
    if extra_conf:
        with open(conf, "a", encoding="utf-8") as fh:
            fh.write(extra_conf)
    env = environ_without_ai()
    log_file = tmp_path / "dock.out"
    out = open(log_file, "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "varaverk_dock.ai_dock", "--config", str(conf)],
        cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ai-dock exited {process.returncode}:\n{log_file.read_text()}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return RunningDock(process, url, settings, log_file)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    dock = RunningDock(process, url, settings, log_file)
    dock.kill()
    raise RuntimeError(f"ai-dock did not answer within 60 s:\n{log_file.read_text()}")


@pytest.fixture
def running_dock(settings, tmp_path):
    """A real gunicorn dock on a free loopback port in front of the fake model server."""
    dock = start_dock(settings, tmp_path)
    yield dock
    dock.stop()
