"""A fleet of docks on loopback ports: each the real dock app (create_app) served by a real
HTTP server in a thread."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from varaverk.config import Settings
from varaverk_dock.app import create_app

FLEET_TOKEN = "fleet-read-token-for-tests"


@pytest.fixture
def clean_env(monkeypatch):
    """No AI_* key of the developer's environment reaches an entry point run in-process."""
    for key in list(os.environ):
        if key.startswith("AI_"):
            monkeypatch.delenv(key)


@dataclass
class Dock:
    """One host of the test fleet: its settings, its server and the statuses it answered."""

    name: str
    settings: Settings
    statuses: list[int] = field(default_factory=list)
    server: object = None
    thread: threading.Thread | None = None

    @property
    def ledger(self) -> Path:
        return self.settings.token_db_path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def start(self, port: int = 0) -> None:
        app = create_app(self.settings)
        app.after_request(self._record)
        self.server = make_server("127.0.0.1", port, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=10)
            self.thread = None

    def _record(self, response):
        self.statuses.append(response.status_code)
        return response


@pytest.fixture
def fleet(tmp_path):
    """Three docks (hostA, hostB, hostC) on their own loopback ports sharing one hosts conf.

    Each host has its own data folder and cache folder; the hosts conf lists all three (each
    skips its own slot) plus ``hostD``, a partner that has never been reachable.
    """
    hosts_conf = tmp_path / "hosts.conf"
    docks: dict[str, Dock] = {}
    for name in ("hostA", "hostB", "hostC"):
        settings = Settings(ai_enabled=True, ai_repo_root=tmp_path, ai_data_dir=tmp_path / name,
                            ai_log_dir=tmp_path / name / "log", ai_host_name=name,
                            ai_fleet_token=FLEET_TOKEN, ai_hosts_conf=hosts_conf,
                            ai_token_cache_dir=tmp_path / name / "cache", ai_http_timeout=10.0)
        dock = Dock(name, settings)
        dock.start()
        docks[name] = dock
    lines = [f'{name}="{dock.url}"' for name, dock in docks.items()]
    lines.append('hostD="http://127.0.0.1:9"')  # discard port: nothing listens there
    hosts_conf.write_text("\n".join(lines) + "\n")
    yield docks
    for dock in docks.values():
        dock.stop()
