"""The page and memory, in a real headless Chromium against a real gunicorn dock: a fact told
in one chat comes back in a new one as a "remembered from" badge, still there after a reload;
deleting the first chat asks whether to forget its memories, and yes forgets them."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from tests.dock.conftest import (app, client, data_dir, dock_index, model, settings,
                                 start_dock)
from tests.dock.test_browser import ARGS, CHROMIUM

__all__ = ["app", "client", "data_dir", "dock_index", "model", "settings"]  # fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"{CHROMIUM} is missing: apt-get install -y chromium"),
]


def _ask(page, question: str) -> None:
    from playwright.sync_api import expect

    page.fill("#question", question)
    page.click("#ask")
    expect(page.locator(".msg.assistant .answer").last).not_to_have_class(
        "answer streaming", timeout=20_000)


def test_the_page_shows_saves_and_forgets_memories(settings, tmp_path):
    playwright_api = pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import expect

    dock = start_dock(settings.replace(ai_memory_enabled=True, ai_memory_digest="extractive"),
                      tmp_path)
    try:
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
            page.goto(dock.url + "/")
            page.select_option("#profile", "chat")
            _ask(page, "Remember this: my NAS is the Synology DS923 at 192.168.1.20.")
            deadline = time.monotonic() + 30
            while not httpx.get(dock.url + "/api/memory").json()["conversations"]:
                assert time.monotonic() < deadline, "the turn was not remembered"
                time.sleep(0.2)
            [first] = httpx.get(dock.url + "/api/memory").json()["conversations"]

            page.click("#new-chat")
            page.select_option("#profile", "chat")
            _ask(page, "Which Synology DS923 is my NAS?")
            badge = page.locator(".msg.assistant .badge.memory").last
            expect(badge).to_contain_text("remembered from ")
            expect(badge).to_contain_text("my NAS is the Synology DS923")
            page.reload()
            expect(page.locator(".msg.assistant .badge.memory").last) \
                .to_contain_text("my NAS is the Synology DS923")

            told = page.locator(".chat-list li").last  # newest first: the chat that told it
            told.hover()  # the delete button shows on hover
            told.locator(".chat-delete").click()
            expect(page.locator(".chat-list li")).to_have_count(1)
            assert dialogs[-1] == "Also forget what long-term memory kept from it?"
            kept = [c["id"] for c in httpx.get(dock.url + "/api/memory").json()["conversations"]]
            assert first["id"] not in kept  # the second chat's own memory may stay
            browser.close()
            assert errors == [], errors
    finally:
        dock.stop()
