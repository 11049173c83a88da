"""Turns in a real headless Chromium against a real gunicorn dock with two workers, the test
model server streaming slowly: a reload resumes the answer, two tabs see the same tokens, Stop
in one tab stops both, Retry keeps the question, Regenerate and Edit replace the last answer."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.browser import ARGS, BROWSER_TESTS, CHROMIUM

pytestmark = BROWSER_TESTS

SLOW = ["According ", "to ", "the ", "docs, ", "this ", "is ", "slow."]
FULL = "".join(SLOW)
STREAMING = re.compile("streaming")


@pytest.fixture
def browser_context(running_dock):
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        errors: list[str] = []
        context.on("weberror", lambda e: errors.append(str(e.error)))
        yield context, errors
        context.close()
        browser.close()
        assert errors == [], errors


def open_page(context, url):
    page = context.new_page()
    page.goto(url)
    return page


def ask(page, question, profile="code"):
    page.select_option("#profile", profile)
    page.fill("#question", question)
    page.click("#ask")


def finished(page, count=None):
    from playwright.sync_api import expect

    answer = page.locator(".msg.assistant .answer").last
    expect(answer).not_to_have_class(STREAMING, timeout=20_000)
    expect(page.locator("#ask")).to_be_enabled()
    if count is not None:
        expect(page.locator(".msg.assistant")).to_have_count(count)
    return answer


def stored_chats(settings) -> list[dict]:
    folder = settings.ai_data_dir / "ai_chats"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_a_reload_mid_stream_resumes_the_same_answer(browser_context, running_dock, model):
    from playwright.sync_api import expect

    context, _ = browser_context
    page = open_page(context, running_dock.url + "/")
    model.script(content=SLOW)
    model.delta_delay = 0.3
    ask(page, "tell me slowly")
    answer = page.locator(".msg.assistant .answer").last
    expect(answer).to_contain_text("According to")
    assert re.fullmatch(r"#turn=[0-9a-f]{32}", page.evaluate("location.hash"))
    expect(page.locator("#stop")).to_be_visible()
    page.reload()
    expect(page.locator(".msg.user .bubble")).to_have_text(["tell me slowly"])
    expect(page.locator("#stop")).to_be_visible()  # still streaming after the reload
    answer = finished(page, count=1)
    expect(answer).to_have_text(FULL)  # every token once: none lost, none repeated
    expect(page.locator("#stop")).to_be_hidden()
    chats = stored_chats(running_dock.settings)
    assert [m["content"] for m in chats[0]["messages"]] == ["tell me slowly", FULL]
    assert page.evaluate("location.hash") == "#chat=" + chats[0]["id"]


def test_two_tabs_see_the_same_tokens_and_stop_in_one_stops_both(browser_context,
                                                                 running_dock, model):
    from playwright.sync_api import expect

    context, _ = browser_context
    first = open_page(context, running_dock.url + "/")
    ask(first, "the first question")
    finished(first, count=1)
    chat_id = stored_chats(running_dock.settings)[0]["id"]
    second = open_page(context, running_dock.url + f"/#chat={chat_id}")
    expect(second.locator(".msg.user")).to_have_count(1)

    model.script(content=SLOW)
    model.delta_delay = 0.4
    ask(first, "the second question")
    # The second tab picks the turn up by itself and streams it too.
    expect(second.locator(".msg.user .bubble").last).to_have_text("the second question")
    expect(second.locator(".msg.assistant .answer").last).to_have_class(STREAMING)
    expect(second.locator(".msg.assistant .answer").last).to_contain_text("According")
    for page in (first, second):
        expect(finished(page, count=2)).to_have_text(FULL)

    model.delta_delay = 0.6
    ask(first, "the third question")
    expect(second.locator(".msg.user")).to_have_count(3)
    expect(second.locator(".msg.assistant .answer").last).to_contain_text("According")
    expect(second.locator("#stop")).to_be_visible()
    second.bring_to_front()
    second.keyboard.press("Escape")  # Stop, in the tab that did not ask
    for page in (first, second):
        expect(page.locator(".msg.assistant").last.locator(".badge")).to_contain_text("stopped")
        expect(page.locator("#stop")).to_be_hidden()
    partial = [finished(p, count=3).inner_text() for p in (first, second)]
    assert partial[0] == partial[1] and FULL.startswith(partial[0]) and partial[0] != FULL
    last = stored_chats(running_dock.settings)[0]["messages"][-1]
    assert last["stopped"] is True and last["content"].strip() == partial[0]  # HTML trims
    # Reopened later, the stopped answer still says so.
    first.reload()
    expect(first.locator(".msg.assistant").last.locator(".badge")).to_contain_text("stopped")


def test_retry_after_an_error_keeps_the_question(browser_context, running_dock, model):
    from playwright.sync_api import expect

    context, _ = browser_context
    page = open_page(context, running_dock.url + "/")
    model.fail_next("/api/chat", 500, {"error": "model crashed"})
    ask(page, "a question worth keeping")
    error = page.locator(".msg.assistant .error")
    expect(error).to_be_visible()
    expect(page.locator("#question")).to_have_value("a question worth keeping")
    expect(page.locator("#ask")).to_be_enabled()
    assert stored_chats(running_dock.settings) == []  # a failed turn is never stored
    page.locator(".msg.assistant .retry").click()
    answer = finished(page, count=1)  # the failed attempt gave way to the retried one
    expect(answer).to_have_text("The context does not cover this.")
    expect(page.locator(".msg.user .bubble")).to_have_text(["a question worth keeping"])
    expect(page.locator("#question")).to_have_value("")
    chats = stored_chats(running_dock.settings)
    assert [m["content"] for m in chats[0]["messages"]][0] == "a question worth keeping"


def test_regenerate_and_edit_and_resend_replace_the_last_answer(browser_context, running_dock,
                                                                model):
    from playwright.sync_api import expect

    context, _ = browser_context
    page = open_page(context, running_dock.url + "/")
    ask(page, "the question")
    finished(page, count=1)
    model.script(content=["A ", "regenerated ", "answer."])
    page.locator(".msg.assistant .regenerate").click()
    expect(finished(page, count=1)).to_have_text("A regenerated answer.")
    expect(page.locator(".msg.user .bubble")).to_have_text(["the question"])

    page.locator(".msg.assistant .edit-last").click()
    expect(page.locator("#question")).to_have_value("the question")
    expect(page.locator("#edit-note")).to_be_visible()
    model.script(content=["An ", "edited ", "answer."])
    page.fill("#question", "the edited question")
    page.keyboard.press("Enter")
    expect(finished(page, count=1)).to_have_text("An edited answer.")
    expect(page.locator(".msg.user .bubble")).to_have_text(["the edited question"])
    expect(page.locator("#edit-note")).to_be_hidden()
    messages = stored_chats(running_dock.settings)[0]["messages"]
    assert [m["content"] for m in messages] == ["the edited question", "An edited answer."]
