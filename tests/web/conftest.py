"""The browser the web tests drive: Debian's chromium by path, through Playwright."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from web_support import browser_or_skip


@pytest.fixture
def browser() -> Generator[Any]:
    """A headless chromium (skipped, or failed in CI, when it or Playwright is missing)."""
    chromium = browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield launched
        finally:
            launched.close()
