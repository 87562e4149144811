"""The dashboard tests' browser (system chromium via Playwright) and screenshot folder."""

from browser import browser, page, screenshots

__all__ = ["browser", "page", "screenshots"]
