"""The dock's fleet endpoint: only this host's ledger, behind the fleet token, conditional."""

from __future__ import annotations

import os

import pytest

from varaverk.ledger.fleet import cache_path
from varaverk.ledger.rows import LedgerRow
from varaverk.ledger.storage import append_row
from varaverk.config import Settings
from varaverk_dock.app import create_app
from varaverk_dock.fleet_api import LEDGER_PATH

TOKEN = "fleet-secret-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROW = LedgerRow("2025-01-02", "10:15:00", "hostA", "varaverk", "webgui", 812, 45, 22.5)


@pytest.fixture
def make_client(tmp_path):
    def make(token: str = TOKEN):
        settings = Settings(ai_enabled=True, ai_repo_root=tmp_path, ai_data_dir=tmp_path / "data",
                            ai_log_dir=tmp_path / "log", ai_host_name="hostA",
                            ai_fleet_token=token, ai_token_cache_dir=tmp_path / "cache")
        return create_app(settings).test_client(), settings
    return make


def test_serves_the_ledger_byte_for_byte(make_client):
    client, settings = make_client()
    append_row(settings.token_db_path, ROW)
    # A partner's cached ledger on this host is never what the endpoint serves.
    cache = cache_path(settings.ai_token_cache_dir, "hostB")
    cache.parent.mkdir(parents=True)
    cache.write_text("2025-01-02|10:15:00|hostB|chat|cli|1|1|1.0\n")
    response = client.get(LEDGER_PATH, headers=AUTH)
    assert response.status_code == 200
    assert response.data == settings.token_db_path.read_bytes()
    assert response.mimetype == "text/plain" and response.headers["ETag"]
    assert response.headers["Last-Modified"]


def test_no_ledger_yet_is_an_empty_200(make_client):
    client, _ = make_client()
    response = client.get(LEDGER_PATH, headers=AUTH)
    assert (response.status_code, response.data) == (200, b"")


def test_etag_and_if_modified_since_give_304_until_the_ledger_changes(make_client):
    client, settings = make_client()
    append_row(settings.token_db_path, ROW)
    first = client.get(LEDGER_PATH, headers=AUTH)
    etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
    again = client.get(LEDGER_PATH, headers={**AUTH, "If-None-Match": etag})
    assert (again.status_code, again.data) == (304, b"")
    again = client.get(LEDGER_PATH, headers={**AUTH, "If-Modified-Since": modified})
    assert again.status_code == 304
    append_row(settings.token_db_path, ROW)
    changed = client.get(LEDGER_PATH, headers={**AUTH, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.data.count(b"\n") == 2
    # Only a date in the past: the file is newer, so it is sent.
    stat = settings.token_db_path.stat()
    os.utime(settings.token_db_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5 * 10**9))
    newer = client.get(LEDGER_PATH, headers={**AUTH, "If-Modified-Since": modified})
    assert newer.status_code == 200


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
    {"X-Varaverk-Fleet-Token": "wrong"},
])
def test_missing_or_wrong_token_is_401(make_client, headers):
    client, settings = make_client()
    append_row(settings.token_db_path, ROW)
    response = client.get(LEDGER_PATH, headers=headers)
    assert response.status_code == 401 and b"hostA" not in response.data


def test_token_header_alternative_is_accepted(make_client):
    client, _ = make_client()
    assert client.get(LEDGER_PATH, headers={"X-Varaverk-Fleet-Token": TOKEN}).status_code == 200


def test_fleet_sharing_off_without_a_token(make_client):
    client, settings = make_client(token="")
    append_row(settings.token_db_path, ROW)
    for headers in ({}, {"Authorization": "Bearer "}):
        response = client.get(LEDGER_PATH, headers=headers)
        assert response.status_code == 404 and b"hostA" not in response.data


def test_only_get(make_client):
    client, _ = make_client()
    assert client.post(LEDGER_PATH, headers=AUTH).status_code in (403, 405)


def test_a_dock_serving_the_network_lets_partners_in_with_the_fleet_token_only(tmp_path):
    settings = Settings(ai_enabled=True, ai_repo_root=tmp_path, ai_data_dir=tmp_path / "data",
                        ai_log_dir=tmp_path / "log", ai_host_name="hostA",
                        ai_dock_bind="0.0.0.0:8470", ai_dock_token="dock-token-456",
                        ai_fleet_token=TOKEN)
    append_row(settings.token_db_path, ROW)
    client = create_app(settings).test_client()
    base = "http://192.0.2.10:8470"
    ok = client.get(LEDGER_PATH, base_url=base, headers=AUTH)
    assert ok.status_code == 200 and ok.data == settings.token_db_path.read_bytes()
    # The dock's browser token is not the fleet token: it does not open the ledger.
    dock_only = client.get(LEDGER_PATH, base_url=base,
                           headers={"Authorization": "Bearer dock-token-456"})
    assert dock_only.status_code == 401
    # And the fleet token opens nothing but the ledger.
    assert client.get("/api/tokens", base_url=base, headers=AUTH).status_code in (401, 403)
