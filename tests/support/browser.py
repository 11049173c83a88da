"""A real headless Chromium for the page's tests: Debian's ``chromium``, driven by Playwright."""

from __future__ import annotations

import contextlib
import os

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
# A module's ``pytestmark``: browser tests, skipped with the reason when Chromium is missing.
BROWSER_TESTS = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"{CHROMIUM} is missing: apt-get install -y chromium"),
]


@contextlib.contextmanager
def browser_page(url: str, **context_options):
    """A page of a fresh Chromium context on ``url`` (viewport, colour scheme, permissions as
    given); fails the test on any page error or console error."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    options = {"viewport": {"width": 1280, "height": 860}, **context_options}
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(**options)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url + "/")
        yield page
        context.close()
        browser.close()
        assert errors == [], errors
