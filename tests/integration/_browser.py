"""A report read in headless Chromium (``tests/integration/test_report_store.py``'s binary and
flags), a fresh profile each time, as the report tests read it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def report_page(html: Path, width: int = 1024) -> Iterator[Any]:
    """The page of ``html`` loaded in a window ``width`` px wide and 900 high; the browser is
    closed when the block ends."""
    from playwright.sync_api import sync_playwright

    from tests.integration.test_report_store import CHROMIUM, CHROMIUM_FLAGS

    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = ctx.new_page()
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(html.as_uri(), wait_until="load")
            yield page
        finally:
            ctx.close()


def overflow_and_width(page: Any) -> tuple[list[Any], int]:
    """The tables wider than their box (``OVERFLOW_JS``) and the document's scroll width."""
    from tests.integration.test_report_browser import OVERFLOW_JS

    return page.evaluate(OVERFLOW_JS), page.evaluate("document.documentElement.scrollWidth")
