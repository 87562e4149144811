"""Browser fixtures shared by the dashboard tests: Debian's chromium driven by Playwright.

Playwright's own browser download is not used: the system's `chromium` (deploy/local/system-deps.sh
installs it) is launched by path. A missing browser fails the tests, it never skips them.
Screenshots go to build/dashboard-screenshots (gitignored), for a person to look at.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "build" / "dashboard-screenshots"
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def chromium_path() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.fail(
        "no chromium on this machine: install it with `bash deploy/local/system-deps.sh` (Debian package chromium)",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # per module: two folders' conftests import this fixture, and Playwright's sync API allows
    # one instance at a time per thread
    with sync_playwright() as playwright:
        # --no-sandbox: the suite may run as root, where chromium's sandbox refuses to start
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
