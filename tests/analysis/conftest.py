"""A headless Chromium for the explorer's browser tests: Debian's package (``make browser`` installs
it; ``CHROMIUM`` names another executable), driven by Playwright for Python. A missing browser
fails the tests that need it: a skipped browser test would pass a page nobody opened."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# as root in a container, without the sandbox; no background traffic on a closed network
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: run `make browser` (Debian's chromium package) or set CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser):
    """open_page(path) -> (page, errors): the file loaded in a fresh page; ``errors`` collects the
    console's errors and the page's uncaught exceptions."""
    pages = []

    def opener(path: Path):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(Path(path).resolve().as_uri())
        pages.append(page)
        return page, errors

    yield opener
    for page in pages:
        page.close()
