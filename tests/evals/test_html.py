"""The HTML report: one file, failures first, each case's journal, nothing from a case run
as markup; checked in headless Chromium (Debian's, by path, driven by Playwright)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Generator
from html import escape
from pathlib import Path
from typing import Any

import pytest

from legato import Agent
from legato.evals import Dataset, EvalReport, evaluate_sync, report_html
from legato.messages import ModelResponse
from legato.models import ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, call, reply

HOSTILE = '<script>window.pwned = true</script><img src="http://example.invalid/x.png">'


def lookup(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def _answer(request: ModelRequest) -> ModelResponse | str:
    question = request.messages[0].text if request.messages else ""
    last = request.messages[-1]
    if question == "weather?" and last.role == "user":
        return reply(call("lookup", {"city": "Paris"}))
    if question == "weather?":
        return "sunny"
    if question == "hostile":
        return HOSTILE
    return "wrong"


def _report(tmp_path: Path) -> tuple[EvalReport, SQLiteStore]:
    dataset = Dataset.from_records(
        [
            {"id": "ok", "input": "weather?", "expected": "sunny"},
            {"id": "bad", "input": "capital?", "expected": "Paris"},
            {"id": "hostile", "input": "hostile", "checks": {"contains": ["safe"]}},
            {"id": "refused", "input": 1},
        ]
    )
    store = SQLiteStore(tmp_path / "e.db")
    agent = Agent(FunctionModel(_answer), tools=[lookup])
    return evaluate_sync(agent, dataset, eval_id="html", store=store, concurrency=1), store


def test_the_page_lists_failures_first_with_journals_and_escapes_everything(
    tmp_path: Path,
) -> None:
    report, store = _report(tmp_path)
    page = report_html(report, store=store)
    assert page.index('data-case="bad"') < page.index('data-case="ok"')
    assert page.index('data-case="hostile"') < page.index('data-case="ok"')
    assert escape('tool lookup({"city": "Paris"}) -> ok: sunny in Paris') in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "invalid" in page and "input: Input should be a valid string" in page
    without = report_html(report)  # no store: the page says so instead of a journal
    assert "journal not available" in without


def _browser_or_skip() -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None or importlib.util.find_spec("playwright") is None:
        reason = "needs Debian's chromium and playwright (the `dev` extra)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return chromium


@pytest.fixture
def browser() -> Generator[Any]:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def test_the_page_in_chromium(browser: Any, tmp_path: Path) -> None:
    report, store = _report(tmp_path)
    path = tmp_path / "report.html"
    path.write_text(report_html(report, store=store), encoding="utf-8")
    context = browser.new_context()
    requests: list[str] = []

    def seen(request: Any) -> None:
        requests.append(str(request.url))

    context.on("request", seen)
    page = context.new_page()
    page.goto(path.as_uri())
    verdicts = page.locator("tr.case").evaluate_all("rows => rows.map(r => r.dataset.verdict)")
    assert verdicts == ["fail", "fail", "pass", "invalid"]  # failures first
    assert page.evaluate("window.pwned === undefined")  # the case's markup stayed text
    assert HOSTILE in page.locator('tr[data-case="hostile"] pre').inner_text()
    ok = page.locator('tr[data-case="ok"]')
    assert not ok.locator(".event").first.is_visible()  # journals start folded
    ok.locator("summary").click()
    assert "tool lookup" in ok.locator("details").inner_text()
    assert requests == [path.as_uri()]  # one file: nothing else is fetched
    # the twin: the same markup written raw does run, so the check above can fail
    raw = tmp_path / "raw.html"
    raw.write_text(f"<!doctype html><body>{HOSTILE}</body>", encoding="utf-8")
    page.goto(raw.as_uri())
    assert page.evaluate("window.pwned === true")
    context.close()
