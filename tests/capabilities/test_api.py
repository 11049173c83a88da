"""The capabilities' HTTP routes through the dock's real app (Flask test client)."""

from __future__ import annotations

import pytest

from tests.capabilities.conftest import assert_no_canary
from tests.capabilities.test_scoped_log import FAILING_JOB

SAME = {"Origin": "http://localhost"}


@pytest.fixture
def client(settings):
    from varaverk_dock.app import create_app
    from varaverk_dock.capabilities_api import bp

    app = create_app(settings)
    if "capabilities" not in app.blueprints:  # until create_app registers it itself
        app.register_blueprint(bp)
    return app.test_client()


def test_log_picker_lists_logs_for_troubleshoot_only(client, log_dir, tmp_path):
    (log_dir / "rsync_mirror.log").write_text(FAILING_JOB, encoding="utf-8")
    (tmp_path / "elsewhere.log").write_text("x\n", encoding="utf-8")
    (log_dir / "escape.log").symlink_to(tmp_path / "elsewhere.log")
    resp = client.get("/api/logs")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["dirs"] == [str(log_dir)]
    assert [item["name"] for item in body["logs"]] == ["rsync_mirror.log"]
    assert client.get("/api/logs?profile=chat").status_code == 403
    assert client.get("/api/logs?profile=nope").status_code == 400


def test_bug_report_needs_confirm_and_same_origin(client, settings, log_dir):
    (log_dir / "rsync_mirror.log").write_text(FAILING_JOB, encoding="utf-8")
    resp = client.post("/api/bug-reports/draft", headers=SAME, json={
        "profile": "troubleshoot", "title": "Mirror skipped photos",
        "what_happened": "token CANARY-7f3a9c-SECRET was in my paste",
        "log_path": "rsync_mirror.log"})
    assert resp.status_code == 200, resp.get_json()
    draft = resp.get_json()["draft"]
    assert draft["log_source"] == f"log lines 1-6 of {log_dir / 'rsync_mirror.log'}"
    assert "4: 2026-11-29 02:00:40 rsync_mirror: ERROR share photos" in draft["log_excerpt"]
    assert_no_canary(resp.get_data(as_text=True))
    folder = settings.ai_data_dir / "bug_reports"
    assert not folder.exists()

    unconfirmed = client.post("/api/bug-reports", headers=SAME,
                              json={"profile": "troubleshoot", "draft": draft})
    assert unconfirmed.status_code == 400 and not folder.exists()
    cross = client.post("/api/bug-reports", headers={"Origin": "http://evil.example"},
                        json={"profile": "troubleshoot", "draft": draft, "confirm": True})
    assert cross.status_code == 403 and not folder.exists()
    as_chat = client.post("/api/bug-reports", headers=SAME,
                          json={"profile": "chat", "draft": draft, "confirm": True})
    assert as_chat.status_code == 403 and not folder.exists()

    saved = client.post("/api/bug-reports", headers=SAME,
                        json={"profile": "troubleshoot", "draft": draft, "confirm": True})
    assert saved.status_code == 201
    name = saved.get_json()["file"]
    assert [p.name for p in folder.iterdir()] == [name]
    assert "Mirror skipped photos" in (folder / name).read_text(encoding="utf-8")


def test_bad_bodies_and_refused_logs(client, log_dir):
    assert client.post("/api/bug-reports", headers=SAME, data="nope",
                       content_type="application/json").status_code == 400
    assert client.post("/api/bug-reports", headers=SAME, json={
        "profile": "troubleshoot", "draft": {"title": 5}, "confirm": True}).status_code == 400
    refused = client.post("/api/bug-reports/draft", headers=SAME, json={
        "profile": "troubleshoot", "title": "t", "what_happened": "w",
        "log_path": "../../etc/passwd"})
    assert refused.status_code == 403


def test_disabled_host_answers_503(settings):
    from varaverk_dock.app import create_app
    from varaverk_dock.capabilities_api import bp

    app = create_app(settings.replace(ai_enabled=False))
    if "capabilities" not in app.blueprints:
        app.register_blueprint(bp)
    assert app.test_client().get("/api/logs").status_code == 503
