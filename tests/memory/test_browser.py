"""The page and memory, in a real headless Chromium against a real gunicorn dock: a fact told
in one chat comes back in a new one as a "remembered from" badge, still there after a reload;
deleting the first chat asks whether to forget its memories, and yes forgets them. The memory
view (memory.js) lists, shows and forgets, shows memory text as text, fits a phone's width, and
is not there when memory is off."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import pytest

from tests.dock.conftest import (app, client, data_dir, dock_index, model, settings,
                                 start_dock)
from tests.dock.test_browser_page import shot
from tests.support.browser import ARGS, BROWSER_TESTS, CHROMIUM, browser_page
from tests.support.environ import environ_without_ai

__all__ = ["app", "client", "data_dir", "dock_index", "model", "settings"]  # fixtures

pytestmark = BROWSER_TESTS


def _ask(page, question: str) -> None:
    from playwright.sync_api import expect

    page.fill("#question", question)
    page.click("#ask")
    expect(page.locator(".msg.assistant .answer").last).not_to_have_class(
        "answer streaming", timeout=20_000)


@contextmanager
def _told_a_fact(settings, tmp_path):
    """``(dock, page, dialogs, errors)``: a dock with memory on (extractive digest) and its
    page in a new headless Chromium, every dialog's message collected and accepted, every page
    error collected, after one turn of the chat profile told it a fact about the NAS; the
    browser closed and the dock stopped on leaving."""
    playwright_api = pytest.importorskip("playwright.sync_api")
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
            yield dock, page, dialogs, errors
            browser.close()
    finally:
        dock.stop()


def test_the_page_shows_saves_and_forgets_memories(settings, tmp_path):
    with _told_a_fact(settings, tmp_path) as (dock, page, dialogs, errors):
        from playwright.sync_api import expect     # there once _told_a_fact did not skip
        [first] = _wait_remembered(dock.url)

        page.click("#new-chat")
        page.select_option("#profile", "chat")
        _ask(page, "Which Synology DS923 is my NAS?")
        badge = page.locator(".msg.assistant .badge.memory").last
        expect(badge).to_contain_text("remembered from ")
        expect(badge).to_contain_text("my NAS is the Synology DS923")
        page.reload()
        expect(page.locator(".msg.assistant .badge.memory").last) \
            .to_contain_text("my NAS is the Synology DS923")

        # By its title: two chats updated in the same second may list in either order.
        told = page.locator(".chat-list li", has_text="Remember this")
        told.hover()  # the delete button shows on hover
        told.locator(".chat-delete").click()
        expect(page.locator(".chat-list li")).to_have_count(1)
        assert dialogs[-1] == "Also forget what long-term memory kept from it?"
        kept = [c["id"] for c in httpx.get(dock.url + "/api/memory").json()["conversations"]]
        assert first["id"] not in kept  # the second chat's own memory may stay
        assert errors == [], errors


def test_a_delete_before_the_memory_status_arrives_still_asks_to_forget(settings, tmp_path):
    # The page learns whether memory is on from /api/memory after loading; a chat deleted
    # before that answer came skipped the "also forget" question (flaky under load).
    with _told_a_fact(settings, tmp_path) as (dock, page, dialogs, errors):
        from playwright.sync_api import expect
        _wait_remembered(dock.url)
        held: list = []         # the status requests, answered only after the delete
        released: list = []     # not empty once they are answered

        def hold(route):
            (route.continue_ if released else held.append)(route)
        page.route("**/api/memory", hold)
        page.reload()
        told = page.locator(".chat-list li", has_text="Remember this")
        told.hover()
        told.locator(".chat-delete").click()
        expect(page.locator(".chat-list li", has_text="Remember this")).to_have_count(1)
        assert dialogs == ["Delete the conversation “Remember this: my NAS is the "
                           "Synology DS923 at 192.168.1.20.”?"]
        assert held, "the page did not ask /api/memory"
        released.append(True)
        for route in held:
            route.continue_()
        expect(page.locator(".chat-list li", has_text="Remember this")).to_have_count(0)
        assert dialogs[-1] == "Also forget what long-term memory kept from it?"
        assert httpx.get(dock.url + "/api/memory").json()["conversations"] == []
        assert errors == [], errors


# Memory text is untrusted: markup in what was said must show as text, never become elements.
HOSTILE = "<img src=x onerror=alert(1)><b>bold</b>"


def _wait_remembered(url: str) -> list[dict]:
    deadline = time.monotonic() + 30
    while not (listed := httpx.get(url + "/api/memory").json()["conversations"]):
        assert time.monotonic() < deadline, "the turn was not remembered"
        time.sleep(0.2)
    return listed


def _ai_memory_list(dock) -> str:
    conf = dock.log_file.parent / "master.conf"  # start_dock's configuration file
    return subprocess.run([sys.executable, "-m", "varaverk_tools.ai_memory", "--config",
                           str(conf), "list"], env=environ_without_ai(), capture_output=True,
                          text=True, check=True, timeout=60).stdout


def test_the_memory_view_lists_shows_and_forgets(settings, tmp_path):
    from playwright.sync_api import expect

    dock = start_dock(settings.replace(ai_memory_enabled=True, ai_memory_digest="extractive"),
                      tmp_path)
    try:
        with browser_page(dock.url) as page:
            alerts: list[str] = []
            page.on("dialog", lambda d: (alerts.append(d.type), d.accept()))
            page.select_option("#profile", "chat")
            _ask(page, "Remember this: my NAS is the Synology DS923 at 192.168.1.20. " + HOSTILE)
            [told] = _wait_remembered(dock.url)
            assert told["id"] in _ai_memory_list(dock)

            expect(page.locator("#memory-panel")).to_be_visible()
            page.click("#memory-open")
            dialog = page.locator("#memory-dialog")
            item = dialog.locator(f"#memory-list li[data-id='{told['id']}']")
            expect(item).to_contain_text("Remember this: my NAS is the Synology DS923")
            expect(item).to_contain_text(f"{told['triplets']} triplet")
            item.locator(".chat-open").click()
            card = dialog.locator(".memory-triplet").first
            expect(card.locator(".memory-facts")).to_contain_text(
                "my NAS is the Synology DS923 at 192.168.1.20")
            expect(dialog.locator("#memory-detail")).to_contain_text(HOSTILE)
            assert dialog.locator("#memory-detail img, #memory-detail b").count() == 0
            shot(page, "memory-view.png")

            page.set_viewport_size({"width": 360, "height": 740})  # a phone: nothing sticks out
            wide = page.evaluate("Math.max(...[...document.querySelectorAll('#memory-dialog *')]"
                                 ".map(e => e.getBoundingClientRect().right))")
            assert wide <= 360.5, wide
            page.emulate_media(color_scheme="dark")
            shot(page, "memory-view-phone-dark.png")
            page.emulate_media(color_scheme="light")
            page.set_viewport_size({"width": 1280, "height": 860})

            cards = dialog.locator(".memory-triplet").count()
            card.locator(".memory-forget").click()
            expect(dialog.locator(".memory-triplet")).to_have_count(cards - 1)
            expect(dialog.locator("#memory-status")).to_have_text("Forgotten.")
            assert alerts and set(alerts) == {"confirm"}  # asked first; no alert(1) ever ran
            if cards > 1:  # the rest of the conversation: forget it whole
                dialog.locator("#memory-forget-conversation").click()
            dialog.locator("#memory-back").click()
            expect(dialog.locator(f"#memory-list li[data-id='{told['id']}']")).to_have_count(0)
            assert told["id"] not in _ai_memory_list(dock)
    finally:
        dock.stop()


def test_the_memory_view_is_hidden_when_memory_is_off(settings, tmp_path):
    from playwright.sync_api import expect

    dock = start_dock(settings, tmp_path)
    try:
        with browser_page(dock.url) as page:
            expect(page.locator("#brand, .brand")).to_be_visible()
            page.wait_for_function("document.querySelector('#chat-list li:not(.muted)') || "
                                   "document.querySelector('#chat-list').textContent"
                                   ".includes('No conversations')")
            page.wait_for_load_state("networkidle")
            expect(page.locator("#memory-panel")).to_be_hidden()
    finally:
        dock.stop()
