"""A real headless Chromium (Debian's ``chromium``, driven by Playwright) against a real
gunicorn dock: ask, watch the answer stream, see the sources, reload, switch profile."""

from __future__ import annotations

import re

import pytest

from tests.dock.conftest import ARTIFACTS, EXPECTED_ANSWER, QUESTION
from tests.support.browser import ARGS, BROWSER_TESTS, CHROMIUM, browser_page
from tests.support.repos import git

pytestmark = BROWSER_TESTS


@pytest.fixture
def page(running_dock):
    with browser_page(running_dock.url) as page:
        yield page


def test_browser_asks_streams_shows_sources_reloads_and_switches_profile(page, running_dock,
                                                                         model):
    from playwright.sync_api import expect

    expect(page.locator("#index-status")).to_contain_text("56")
    model.delta_delay = 0.12  # slow enough to watch the text arrive
    page.fill("#question", QUESTION)
    page.click("#ask")

    answer = page.locator(".msg.assistant .answer").last
    # Streaming: part of the answer is visible while the stream is still open.
    expect(answer).to_have_class(re.compile("streaming"))
    expect(answer).to_contain_text("According to")
    partial = answer.inner_text()
    assert "covered." not in partial, "the whole answer arrived at once"
    expect(answer).not_to_have_class(re.compile("streaming"), timeout=20_000)
    expect(answer).to_have_text(EXPECTED_ANSWER)
    sources = page.locator(".msg.assistant .source-label")
    expect(sources.first).to_have_text(
        "Backup/rsync_mirror.sh › CONFIGURATION › MIRROR_MAX_DELETE_PCT")
    page.locator(".msg.assistant .source summary").first.click()
    expect(page.locator(".msg.assistant .source-text").first).to_contain_text(
        "MIRROR_MAX_DELETE_PCT")
    expect(page.locator(".msg.assistant .meta")).to_contain_text("completion 10")
    expect(page.locator("#chat-list li[data-id]")).to_have_count(1)
    expect(page.locator("#token-table tbody")).to_contain_text("hostA")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dock-answer.png"), full_page=False)

    # Reload: the conversation is in the list and reopens as plain turns.
    page.reload()
    item = page.locator("#chat-list li[data-id] .chat-name")
    expect(item).to_have_text(QUESTION)
    page.locator("#chat-list li[data-id] .chat-open").click()
    expect(page.locator(".msg.user .bubble")).to_have_text(QUESTION)
    expect(page.locator(".msg.assistant .answer")).to_have_text(EXPECTED_ANSWER)
    # ...with the sources it cited, marked as those of the index it was answered from.
    head = git(running_dock.settings.ai_repo_root, "rev-parse", "HEAD").strip()
    expect(page.locator(".msg.assistant .sources-title")).to_have_text(
        f"Sources at the time (index at {head[:12]})")
    expect(page.locator(".msg.assistant .source-label").first).to_have_text(
        "Backup/rsync_mirror.sh › CONFIGURATION › MIRROR_MAX_DELETE_PCT")
    expect(page.locator(".msg.assistant .source-lines").first).to_contain_text("lines ")

    # Switch profile: chat escalates to varaverk for a question the documentation answers.
    model.delta_delay = 0.0
    page.click("#new-chat")
    page.select_option("#profile", "troubleshoot")
    expect(page.locator("#log-path")).to_be_visible()  # only scoped_log profiles read logs
    page.select_option("#profile", "chat")
    expect(page.locator("#log-path")).to_be_hidden()
    page.fill("#question", "Which setting caps deletions, MIRROR_MAX_DELETE_PCT?")
    page.keyboard.press("Enter")
    expect(page.locator(".badge.escalated")).to_contain_text("escalated to varaverk")
    expect(page.locator(".msg.assistant .answer").last).not_to_have_class(
        re.compile("streaming"), timeout=20_000)
    expect(page.locator("#chat-list li[data-id]")).to_have_count(2)
    assert page.locator("#profile").input_value() == "chat"
    page.screenshot(path=str(ARTIFACTS / "dock-escalated.png"), full_page=False)


def test_browser_never_runs_model_html(page, model):
    from playwright.sync_api import expect

    model.script(content=["<img src=x onerror=\"document.title='pwned'\"> ",
                          "<script>document.title='pwned'</script> **safe**"])
    page.select_option("#profile", "code")
    page.fill("#question", "show me html")
    page.click("#ask")
    answer = page.locator(".msg.assistant .answer").last
    expect(answer).not_to_have_class(re.compile("streaming"), timeout=20_000)
    expect(answer.locator("strong")).to_have_text("safe")
    assert answer.locator("img, script").count() == 0
    assert page.title() != "pwned"
    expect(answer).to_contain_text("<script>")


def test_browser_troubleshoot_reads_a_picked_log_and_files_a_bug_report(settings, tmp_path,
                                                                        model):
    from playwright.sync_api import expect, sync_playwright

    from tests.dock.conftest import start_dock

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rsync_mirror.log").write_text(
        "2026-11-29 02:00:01 start mirror run\n"
        "2026-11-29 02:00:09 ERROR share photos: delete ratio 41% above MIRROR_MAX_DELETE_PCT=5,"
        " skipped\n")
    run = tmp_path / "run"
    run.mkdir()
    dock = start_dock(settings.replace(ai_troubleshoot_log_dirs=(str(logs),)), run, workers=1)
    reports = settings.ai_data_dir / "bug_reports"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(dock.url + "/")
            page.select_option("#profile", "troubleshoot")
            expect(page.locator("#log-path")).to_be_visible()
            expect(page.locator("#log-options option")).to_have_count(1)
            assert page.locator("#log-options option").get_attribute("value") == str(
                logs / "rsync_mirror.log")
            page.fill("#log-path", str(logs / "rsync_mirror.log"))
            page.fill("#question", "Why was the photos share skipped last night?")
            page.click("#ask")
            answer = page.locator(".msg.assistant .answer").last
            expect(answer).not_to_have_class(re.compile("streaming"), timeout=20_000)
            expect(page.locator(".msg.assistant .capabilities")).to_contain_text("log")
            prompt = json_of_last_chat(model)
            assert "delete ratio 41%" in prompt

            page.click("#bug-report")
            expect(page.locator("#bug-dialog")).to_be_visible()
            expect(page.locator("#bug-title")).to_have_value(
                "Why was the photos share skipped last night?")
            page.click("#bug-draft")
            expect(page.locator("#bug-preview")).to_contain_text("delete ratio 41%")
            assert not reports.exists() or list(reports.iterdir()) == []  # drafted, not filed
            page.screenshot(path=str(ARTIFACTS / "dock-troubleshoot.png"))
            page.click("#bug-file")
            expect(page.locator("#bug-status")).to_contain_text("Filed as")
            assert len(list(reports.iterdir())) == 1
            browser.close()
    finally:
        dock.stop()


def json_of_last_chat(model) -> str:
    import json

    return json.dumps(model.requests_to("/api/chat")[-1].json["messages"])


def _stored_chats(settings) -> dict[str, list[str]]:
    """Chat id -> the contents of its messages, as stored on disk."""
    import json

    folder = settings.ai_data_dir / "ai_chats"
    return {p.stem: [m["content"] for m in json.loads(p.read_text())["messages"]]
            for p in sorted(folder.glob("*.json"))}


def _finish(page):
    from playwright.sync_api import expect

    expect(page.locator(".msg.assistant .answer").last).not_to_have_class(
        re.compile("streaming"), timeout=20_000)
    expect(page.locator("#ask")).to_be_enabled()


def test_browser_new_chat_switch_and_delete_during_a_stream_never_mix_conversations(
        page, running_dock, model):
    """A turn belongs to the conversation it was asked in and lives on the server: leaving
    that conversation detaches the page (the answer goes on and is saved where it belongs),
    deleting it stops the answer first."""
    from playwright.sync_api import expect

    asks: list[dict] = []
    page.on("request", lambda r: asks.append(r.post_data_json)
            if r.url.endswith("/api/turns") and r.method == "POST" else None)
    page.on("dialog", lambda d: d.accept())
    # Every reply streams for about two seconds (the knob is read per delta, so it stays set).
    slow = ["According ", "to ", "the ", "docs, ", "this ", "is ", "slow."]
    model.script(content=slow)
    model.delta_delay = 0.25
    stream_seconds = len(slow) * model.delta_delay

    def ask(question: str, wait: bool = True):
        page.fill("#question", question)
        page.click("#ask")
        if wait:
            _finish(page)

    def start_slow(question: str):
        ask(question, wait=False)
        expect(page.locator(".msg.assistant .answer").last).to_contain_text("According")

    # New chat while an answer streams: Ask works again, the next question starts a new chat
    # with no history, and the first answer is finished and saved in a conversation of its own.
    start_slow("first question, left streaming")
    page.click("#new-chat")
    expect(page.locator("#ask")).to_be_enabled()
    expect(page.locator(".msg")).to_have_count(0)
    ask("second question")
    assert "chat_id" not in asks[-1]
    assert "left streaming" not in json_of_last_chat(model)
    page.wait_for_timeout(stream_seconds * 1000 + 500)
    ask("third question")
    chats = _stored_chats(running_dock.settings)
    second = [cid for cid, msgs in chats.items() if "second question" in msgs]
    assert len(second) == 1 and asks[-1]["chat_id"] == second[0]
    assert [m for m in chats[second[0]] if m.endswith("question")] == [
        "second question", "third question"]
    first = [msgs for msgs in chats.values() if "first question, left streaming" in msgs]
    assert first == [["first question, left streaming", "".join(slow)]]
    expect(page.locator(".msg.user")).to_have_count(2)

    # Switching to another conversation while an answer streams.
    page.click("#new-chat")
    ask("other chat question")
    other = [cid for cid, msgs in _stored_chats(running_dock.settings).items()
             if "other chat question" in msgs][0]
    page.locator(f"#chat-list li[data-id='{second[0]}'] .chat-open").click()
    expect(page.locator(".msg.user")).to_have_count(2)
    start_slow("switched away from")
    page.locator(f"#chat-list li[data-id='{other}'] .chat-open").click()
    expect(page.locator("#ask")).to_be_enabled()
    expect(page.locator(".msg.user .bubble")).to_have_text(["other chat question"])
    page.wait_for_timeout(stream_seconds * 1000 + 500)
    expect(page.locator(".msg.user")).to_have_count(1)
    ask("follow-up in the other chat")
    assert asks[-1]["chat_id"] == other
    chats = _stored_chats(running_dock.settings)
    assert [m for m in chats[other] if m.endswith(("question", "chat"))] == [
        "other chat question", "follow-up in the other chat"]
    assert chats[second[0]][-2:] == ["switched away from", "".join(slow)]

    # Deleting the conversation an answer streams into stops the answer: nothing is saved.
    start_slow("asked, then deleted")
    page.locator(f"#chat-list li[data-id='{other}']").hover()  # the × shows on hover
    page.locator(f"#chat-list li[data-id='{other}'] .chat-delete").click()
    expect(page.locator("#ask")).to_be_enabled()
    expect(page.locator(".msg")).to_have_count(0)
    expect(page.locator(f"#chat-list li[data-id='{other}']")).to_have_count(0)
    page.wait_for_timeout(stream_seconds * 1000 + 500)
    ask("after the delete")
    assert "chat_id" not in asks[-1]
    chats = _stored_chats(running_dock.settings)
    assert other not in chats
    assert not any("asked, then deleted" in msgs for msgs in chats.values())


def test_browser_similar_lists_the_nearest_sections_of_other_files(page, running_dock, model):
    from playwright.sync_api import expect

    page.fill("#question", QUESTION)
    page.click("#ask")
    expect(page.locator(".msg.assistant .answer").last).not_to_have_class(
        re.compile("streaming"), timeout=20_000)
    source = page.locator(".msg.assistant .source").first
    source.locator(".similar-btn").click()
    items = source.locator(".similar-item")
    expect(items.first).to_be_visible()
    # The list is what /api/similar answers for that source, in its order, with its scores.
    target = "Backup/rsync_mirror.sh#MIRROR_MAX_DELETE_PCT"
    api = page.request.get(running_dock.url + "/api/similar",
                           params={"k": "5", "target": target}).json()
    assert api["results"], api
    expect(items).to_have_count(len(api["results"]))
    shown = [(items.nth(i).get_attribute("title"), items.nth(i).inner_text())
             for i in range(len(api["results"]))]
    assert shown == [(h["text"], h["citation"]) for h in api["results"]]
    # Cosine scores are on another scale than the sources' fused ones: neither is shown.
    assert page.locator(".msg.assistant .score").count() == 0
    assert not any(h["path"] == "Backup/rsync_mirror.sh" for h in api["results"])
