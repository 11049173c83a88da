"""The page as people use it, in a real headless Chromium against a real gunicorn dock (two
workers) and the test model server: Markdown while streaming, code blocks, citations, reopened
chats, a phone's screen, dark mode, the index's progress, the chat list's limit."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.dock.conftest import ARTIFACTS, QUESTION
from tests.support.browser import ARGS, BROWSER_TESTS, CHROMIUM, browser_page
from tests.support.repos import git

pytestmark = BROWSER_TESTS

LABEL = "Backup/rsync_mirror.sh › CONFIGURATION › MIRROR_MAX_DELETE_PCT"
MADE_UP = "Backup/made_up.sh › NOWHERE"


def ask(page, question: str, profile: str | None = None, wait: bool = True):
    from playwright.sync_api import expect

    if profile:
        page.select_option("#profile", profile)
    page.fill("#question", question)
    page.click("#ask")
    answer = page.locator(".msg.assistant .answer").last
    if wait:
        expect(answer).not_to_have_class(re.compile("streaming"), timeout=20_000)
    return answer


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=False)


CODE_ANSWER = ["## What to run\n\n", "> Check the share first.\n\n", "Then:\n\n",
               "```bash\n", "echo start\n", "rm -rf /\n", "```\n"]


def test_markdown_renders_while_streaming_and_code_blocks_are_labelled_highlighted_copied(
        running_dock, model):
    from playwright.sync_api import expect

    model.script(content=CODE_ANSWER)
    model.delta_delay = 0.3
    with browser_page(running_dock.url, permissions=["clipboard-read", "clipboard-write"]) as page:
        answer = ask(page, "how do I clear the share?", profile="code", wait=False)
        # The heading is HTML while the answer still streams (no raw "## " first).
        expect(answer.locator("h2")).to_have_text("What to run")
        assert "streaming" in (answer.get_attribute("class") or "")
        assert "## " not in answer.inner_text()
        expect(answer).not_to_have_class(re.compile("streaming"), timeout=20_000)
        expect(answer.locator("blockquote")).to_have_text("Check the share first.")
        assert answer.locator("blockquote").evaluate(
            "e => getComputedStyle(e).borderLeftStyle") == "solid"
        block = answer.locator(".codeblock")
        expect(block.locator(".codeblock-lang")).to_contain_text("bash")
        assert block.locator("code span[class^='hljs-']").count() > 0
        block.locator(".copy-btn").click()
        expect(block.locator(".copy-btn")).to_have_text("copied")
        assert page.evaluate("navigator.clipboard.readText()") == "echo start\nrm -rf /\n"
        # The scanner's finding counts the code block's lines (rm is its 2nd), not the answer's.
        findings = page.locator(".msg.assistant .findings li")
        expect(findings.first).to_contain_text("line 2:")
        expect(block.locator(".codeblock-lang")).to_contain_text("scanner: line 2")
        page.locator(".msg.assistant .actions .copy-btn").click()
        assert page.evaluate("navigator.clipboard.readText()") == "".join(CODE_ANSWER).strip()
        shot(page, "dock-desktop-code.png")
        # Reopened: the findings come back, placed in their block.
        page.reload()
        page.locator("#chat-list li[data-id] .chat-open").first.click()
        expect(page.locator(".msg.assistant .findings li").first).to_contain_text("line 2:")
        expect(page.locator(".msg.assistant .codeblock-lang")).to_contain_text("scanner: line 2")


def test_citations_link_to_their_source_and_an_unmatched_one_is_marked(running_dock, model):
    from playwright.sync_api import expect

    model.script(content=[f"The cap is set in [{LABEL}]. ", f"Also see [{MADE_UP}]."])
    with browser_page(running_dock.url) as page:
        answer = ask(page, QUESTION)
        cited = answer.locator("a.citation")
        expect(cited).to_have_count(1)
        expect(cited).to_have_text(f"[{LABEL}]")
        unmatched = answer.locator(".citation.unmatched")
        expect(unmatched).to_have_text(f"[{MADE_UP}]")
        assert "no retrieved source" in unmatched.get_attribute("title")
        index = int(cited.get_attribute("data-source"))
        source_text = page.locator(".msg.assistant .source").nth(index).locator(".source-text")
        expect(source_text).to_be_hidden()
        cited.click()
        expect(source_text).to_be_visible()
        expect(source_text).to_contain_text("MIRROR_MAX_DELETE_PCT")
        expect(page.locator(".msg.assistant .source-label").nth(index)).to_have_text(LABEL)


def test_a_reopened_chat_shows_what_the_turn_showed(running_dock, model):
    from playwright.sync_api import expect

    model.script(thinking=["I weigh the cap."], content=[f"The cap: [{LABEL}]."])
    with browser_page(running_dock.url) as page:
        ask(page, QUESTION)
        live_meta = page.locator(".msg.assistant .meta").inner_text()
        page.reload()
        page.locator("#chat-list li[data-id] .chat-open").first.click()
        expect(page.locator(".msg.user .bubble")).to_have_text(QUESTION)
        turn = page.locator(".msg.assistant")
        expect(turn.locator("details.reasoning .reasoning-text")).to_have_text("I weigh the cap.")
        expect(turn.locator(".meta")).to_have_text(live_meta)
        assert re.search(r"completion \d+", live_meta) and "total" in live_meta, live_meta
        expect(turn.locator("a.citation")).to_have_text(f"[{LABEL}]")
        # The sources open to their text as retrieved then.
        turn.locator(".source summary").first.click()
        expect(turn.locator(".source-text").first).to_contain_text("MIRROR_MAX_DELETE_PCT")
        # The commit id as git spells it (the title is upper-cased, the id is not).
        head = git(running_dock.settings.ai_repo_root, "rev-parse", "HEAD").strip()
        assert turn.locator(".sources-title .commit").inner_text() == head[:12]
        shot(page, "dock-desktop-reopened.png")

        # Escalation: the badge comes back with the reopened turn.
        model.script(content=[f"Escalated: [{LABEL}]."])
        page.click("#new-chat")
        ask(page, "Which setting caps deletions, MIRROR_MAX_DELETE_PCT?", profile="chat")
        expect(page.locator(".badge.escalated")).to_contain_text("escalated to varaverk")
        page.reload()
        page.locator("#chat-list li[data-id] .chat-open").first.click()
        expect(page.locator(".msg.assistant .badge.escalated")).to_contain_text(
            "escalated to varaverk")


def test_phone_drawer_question_box_in_view_and_no_horizontal_overflow(running_dock, model):
    from playwright.sync_api import expect

    long_line = "rsync --archive --delete --max-delete=" + "9" * 40 + " /srv/photos/ " + \
        "/mnt/mirror/photos/" * 6
    model.script(content=[f"Run [{LABEL}]:\n\n", f"```sh\n{long_line}\n```\n\n",
                          "A_very_long_unbroken_identifier_" * 8])
    with browser_page(running_dock.url, viewport={"width": 390, "height": 844},
                      is_mobile=True, has_touch=True) as page:
        box = page.locator("#question").bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= 844, box
        expect(page.locator("#sidebar")).not_to_be_in_viewport()  # a closed drawer
        ask(page, QUESTION)
        box = page.locator("#question").bounding_box()
        assert box["y"] + box["height"] <= 844, box  # still pinned after a long answer
        # One scroll area: the page itself does not scroll, the messages do.
        assert page.evaluate("document.scrollingElement.scrollHeight <= innerHeight")
        shot(page, "dock-phone.png")
        page.click("#sidebar-toggle")
        expect(page.locator("#sidebar")).to_be_in_viewport(ratio=1)
        page.wait_for_timeout(300)  # the drawer's slide
        delete = page.locator("#chat-list li[data-id] .chat-delete").first
        assert delete.evaluate("e => getComputedStyle(e).visibility") == "visible"
        assert float(delete.evaluate("e => getComputedStyle(e).opacity")) > 0.3  # no hover
        shot(page, "dock-phone-drawer.png")
        page.locator("#chat-list li[data-id] .chat-open").first.click()
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        page.set_viewport_size({"width": 360, "height": 740})
        page.wait_for_timeout(300)
        assert page.evaluate("document.documentElement.scrollWidth") <= 360
        assert page.evaluate("document.body.scrollWidth") <= 360
        wide = page.evaluate("""() => [...document.querySelectorAll('.layout *')]
            .filter(e => e.getBoundingClientRect().right > 360.5 && !e.closest('pre, .sidebar'))
            .map(e => e.className || e.tagName)""")
        assert wide == []


def test_dark_mode_follows_the_system(running_dock, model):
    model.script(content=CODE_ANSWER)
    with browser_page(running_dock.url, color_scheme="dark") as page:
        ask(page, "how do I clear the share?", profile="code")
        rgb = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert rgb.startswith("rgb("), rgb  # opaque, so the page shows this colour
        channels = [int(c) for c in re.findall(r"\d+", rgb)[:3]]
        assert max(channels) < 60, rgb  # dark, not the light page's #f6f7f9
        panel = page.locator(".msg.assistant").evaluate("e => getComputedStyle(e).color")
        assert min(int(c) for c in re.findall(r"\d+", panel)[:3]) > 180, panel  # light text
        shot(page, "dock-dark.png")
    with browser_page(running_dock.url, color_scheme="light") as page:
        rgb = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert min(int(c) for c in re.findall(r"\d+", rgb)[:3]) > 200, rgb


def test_status_panel_shows_a_running_reindex_and_the_list_its_limit(running_dock):
    from playwright.sync_api import expect

    from varaverk.index.progress_file import progress_path

    path = progress_path(running_dock.settings.index_path)
    now = __import__("time").time()
    path.write_text(json.dumps({"pid": os.getpid(), "phase": "embedding", "done": 40,
                                "total": 120, "started": now, "updated": now}))
    try:
        with browser_page(running_dock.url) as page:
            status = page.locator("#index-status")
            expect(status).to_contain_text("re-indexing: embedding 40 / 120 chunks")
            assert page.locator("#index-status progress").get_attribute("value") == "40"
            path.unlink()
            expect(status).not_to_contain_text("re-indexing", timeout=10_000)  # it polls
            expect(status).to_contain_text("files")
            expect(page.locator("#chat-kept")).to_have_text(
                "The 10 newest conversations are kept; older ones are deleted "
                "(AI_CHAT_HISTORY_MAX).")
            shortcuts = page.locator("#shortcuts")
            shortcuts.locator("summary").click()
            expect(shortcuts).to_contain_text("send the question")
            page.keyboard.press("Alt+s")
            expect(page.locator("#sidebar")).to_be_hidden()
            page.reload()  # a wide screen's choice is remembered
            expect(page.locator("#sidebar")).to_be_hidden()
            page.keyboard.press("Alt+s")
            expect(page.locator("#sidebar")).to_be_visible()
            page.locator("body").click()
            page.keyboard.press("/")
            assert page.evaluate("document.activeElement.id") == "question"
    finally:
        path.unlink(missing_ok=True)


def test_a_reader_who_scrolled_up_stays_there_until_an_error_is_brought_into_view(
        running_dock, model):
    from playwright.sync_api import expect

    model.script(content=[f"Paragraph {i} of a long answer.\n\n" for i in range(40)])
    model.stream_error, model.stream_error_after = "the model server fell over", 39
    model.delta_delay = 0.08
    with browser_page(running_dock.url, viewport={"width": 390, "height": 844}) as page:
        ask(page, QUESTION, wait=False)
        answer = page.locator(".msg.assistant .answer")
        expect(answer).to_contain_text("Paragraph 12")
        # Following the stream: the newest text is in view.
        assert page.evaluate("(m => m.scrollHeight - m.scrollTop - m.clientHeight)"
                             "(document.getElementById('messages'))") < 80
        page.evaluate("document.getElementById('messages').scrollTop = 0")
        page.wait_for_timeout(500)
        assert page.evaluate("document.getElementById('messages').scrollTop") == 0
        error = page.locator(".msg.assistant .error")
        expect(error).to_contain_text("fell over", timeout=20_000)
        expect(error).to_be_in_viewport()
        expect(page.locator(".msg.assistant .answer")).to_contain_text("Paragraph 38")


def test_markdown_rendered_while_streaming_never_runs_model_html(running_dock, model):
    from playwright.sync_api import expect

    model.script(content=["<img src=x onerror=\"document.title='pwned'\"> ",
                          "[click](javascript:document.title='pwned') ",
                          "<script>document.title='pwned'</script> **safe** ", "and slow"])
    model.delta_delay = 0.4
    with browser_page(running_dock.url) as page:
        answer = ask(page, "show me html", profile="code", wait=False)
        expect(answer.locator("strong")).to_have_text("safe")  # rendered mid-stream
        assert "streaming" in (answer.get_attribute("class") or "")
        assert answer.locator("img, script, a[href^='javascript']").count() == 0
        expect(answer).to_contain_text("<script>")
        expect(answer).not_to_have_class(re.compile("streaming"), timeout=20_000)
        assert answer.locator("img, script, a[href^='javascript']").count() == 0
        assert page.title() != "pwned"


TRICKY = ("Setext title\n============\n\n1. first\n2. second\n\n   continued in the item\n\n"
          "> a quote\nlazily continued\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
          "- loose\n\n- list\n\n```python\ndef f():\n    return 1\n```\n\n    indented code\n\n"
          f"Cited [{LABEL}] and *done*.")


def test_streamed_rendering_equals_rendering_the_whole_text_at_every_step():
    from pathlib import Path

    playwright_api = pytest.importorskip("playwright.sync_api")
    static = Path(__file__).resolve().parents[2] / "Plugin" / "varaverk_dock" / "static"
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.set_content("<!doctype html><html><body></body></html>")
        for script in ("vendor/markdown-it.min.js", "vendor/purify.min.js",
                       "vendor/highlight.min.js", "render.js"):
            page.add_script_tag(path=str(static / script))
        mismatches = page.evaluate("""(text) => {
          const R = window.VaraverkRender;
          const live = document.createElement("div"), whole = document.createElement("div");
          const ctx = { sources: [{ citation: "%s", path: "Backup/rsync_mirror.sh" }] };
          const bad = [];
          for (let end = 1; end <= text.length; end += 3) {
            R.streamAnswer(live, text.slice(0, end), ctx);
            R.renderAnswer(whole, text.slice(0, end), ctx);
            if (live.innerHTML !== whole.innerHTML) bad.push(end);
          }
          R.streamAnswer(live, text, ctx);
          R.renderAnswer(whole, text, ctx);
          if (live.innerHTML !== whole.innerHTML) bad.push(text.length);
          return bad;
        }""" % LABEL, TRICKY)
        browser.close()
    assert mismatches == []
