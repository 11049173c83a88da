"""A source's document summary in the dock: ``GET /api/summary`` and the "summary" entry under
each source (real gunicorn, headless Chromium)."""

from __future__ import annotations

import os
import re

import pytest

from tests.dock.conftest import QUESTION, base_settings
from tests.support.browser import ARGS, CHROMIUM
from varaverk.summaries.summary_pass import summarise

SOURCE = "Backup/rsync_mirror.sh"


@pytest.fixture
def settings(dock_index, data_dir, model):
    """Dock settings with extractive summaries on, made for every file of the index."""
    on = base_settings(dock_index.repo, data_dir, model, ai_summaries="extractive")
    assert summarise(on).made > 10
    return on


def test_the_summary_api_answers_a_stored_summary_and_says_when_there_is_none(client, settings,
                                                                               app):
    assert client.get("/api/summary").get_json() == {"enabled": True}
    body = client.get("/api/summary", query_string={"path": SOURCE}).get_json()
    assert body["path"] == SOURCE and body["model"] == "extractive" and not body["stale"]
    assert body["summary"].splitlines()[0] == "rsync_mirror.sh"
    missing = client.get("/api/summary", query_string={"path": "nope.md"})
    assert missing.status_code == 404 and "no summary of nope.md" in missing.get_json()["error"]


def test_with_summaries_off_the_api_says_so(dock_index, data_dir, model):
    from varaverk_dock.app import create_app
    client = create_app(base_settings(dock_index.repo, data_dir, model)).test_client()
    assert client.get("/api/summary").get_json() == {"enabled": False}
    off = client.get("/api/summary", query_string={"path": SOURCE})
    assert off.status_code == 404 and "AI_SUMMARIES" in off.get_json()["error"]


@pytest.mark.browser
def test_browser_shows_a_sources_summary(running_dock):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing")
    from playwright.sync_api import expect
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(running_dock.url + "/")
        page.fill("#question", QUESTION)
        page.click("#ask")
        expect(page.locator(".msg.assistant .answer").last).not_to_have_class(
            re.compile("streaming"), timeout=20_000)
        source = page.locator(".msg.assistant .source").first
        source.locator(".summary-btn").click()
        text = source.locator(".summary-text")
        expect(text).to_be_visible()
        api = page.request.get(running_dock.url + "/api/summary",
                               params={"path": SOURCE}).json()
        assert text.inner_text() == api["summary"]
        expect(source.locator(".doc-summary .muted")).to_contain_text("extractive, 20")
        browser.close()
    assert errors == []
