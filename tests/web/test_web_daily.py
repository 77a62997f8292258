"""The web UI for daily use, in headless Chromium: reload and several tabs, a page that
never scrolls, Markdown, errors, edited arguments, narrow windows, themes, keys, axe-core.

Each test drives `legato serve`'s app on 127.0.0.1 with a scripted model; the page's
requests are checked to stay on loopback. Screenshots go to docs/ with LEGATO_SCREENSHOTS=1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from web_support import (
    AXE,
    TOKEN,
    GatedModel,
    Guarded,
    Outbox,
    email_script,
    make_app,
    off_loop,
    running,
    shot,
    skip_or_fail,
)

from legato.messages import Usage
from legato.models import ModelProfile, ModelRequest, ModelStreamEvent
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply

WIDE = {"width": 1280, "height": 800}


def _open(browser: Any, server: Any, guard: Guarded, **options: Any) -> Any:
    context = browser.new_context(viewport=options.pop("viewport", WIDE), **options)
    guard.attach(context)
    page = context.new_page()
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector("body[data-ready='true']")
    return page


def _factory(outbox: Outbox, **kwargs: Any) -> Any:
    def factory(port: int) -> Any:
        app = make_app(outbox, **kwargs)
        app.allow(port)
        return app

    return factory


def test_a_reload_during_the_first_model_call_shows_the_prompt_and_follows_the_run(
    browser: Any, tmp_path: Path
) -> None:
    outbox = Outbox()
    model = GatedModel(["I will answer in a moment.", "unused"])
    guard = Guarded()
    with running(_factory(outbox, model=model, store=SQLiteStore(tmp_path / "l.db"))) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "What time is it?")
        page.click("#send")
        page.wait_for_function(
            "() => document.querySelector('.msg.assistant')?.textContent === 'I will'"
        )
        assert server.app.hub.store.list_runs(limit=10) == []  # nothing stored yet
        page.reload()
        page.wait_for_selector(".msg.user:text-is('What time is it?')")
        page.wait_for_function(
            "() => document.querySelector('.msg.assistant')?.textContent === 'I will'"
        )
        assert page.locator("#status").text_content() == "running"
        assert page.locator("#stop").is_enabled()
        assert page.locator("#journal-run option").count() == 1
        # the timeline of the run going on shows its model call, not finished yet
        page.locator("#journal li.tl-model:has-text('model call 1')").wait_for()
        assert page.locator("#journal li.tl-end").count() == 0
        model.release.set()
        page.wait_for_selector("#status:text-is('done')")
        page.locator("#journal li.tl-end:has-text('finished')").wait_for()
        assert page.locator(".msg.assistant").all_text_contents() == [
            "I will answer in a moment."
        ]  # no chunk twice
        assert page.locator(".msg.user").count() == 1
        assert not page.locator("#stop").is_enabled()
        page.context.close()
    assert guard.blocked == []


def test_a_message_written_during_a_run_waits_for_it_instead_of_failing(browser: Any) -> None:
    model = GatedModel(["Answer one, at length.", "Second answer."])
    guard = Guarded()
    with running(_factory(Outbox(), model=model)) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "First question")
        page.click("#send")
        page.wait_for_function(
            "() => document.querySelector('.msg.assistant')?.textContent === 'Answer'"
        )
        page.fill("#prompt", "Second question")
        page.press("#prompt", "Enter")
        queued = page.locator(".msg.queued")
        queued.wait_for()
        assert "Second question" in (queued.text_content() or "")
        assert page.locator(".msg.error").count() == 0
        assert page.locator("#notice").is_hidden()
        model.release.set()
        page.wait_for_selector(".msg.assistant:has-text('Second answer.')")
        assert page.locator(".msg.user").all_text_contents() == [
            "First question",
            "Second question",
        ]
        assert page.locator(".msg.queued").count() == 0
        assert page.locator(".msg.error").count() == 0
        page.context.close()


def test_a_long_answer_scrolls_the_transcript_and_the_message_box_stays_in_view(
    browser: Any,
) -> None:
    long = "\n\n".join(f"Paragraph {i}: the answer goes on." for i in range(120))
    guard = Guarded()
    with running(_factory(Outbox(), turns=[long])) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Tell me everything.")
        page.click("#send")
        page.wait_for_selector(".msg.assistant:has-text('Paragraph 119')")
        sizes = page.evaluate(
            """() => ({
                page: document.scrollingElement.scrollHeight,
                window: innerHeight,
                composer: document.querySelector('#composer').getBoundingClientRect().bottom,
                messages: document.querySelector('#messages').scrollHeight,
                shown: document.querySelector('#messages').clientHeight,
            })"""
        )
        assert sizes["page"] <= sizes["window"]
        assert sizes["composer"] <= sizes["window"]
        assert sizes["messages"] > 3 * sizes["shown"]  # the transcript scrolls, not the page
        page.context.close()


def test_a_second_tab_follows_live_and_a_decision_made_elsewhere_is_said_plainly(
    browser: Any,
) -> None:
    outbox = Outbox()
    script = [*email_script(), "Second answer."]
    guard = Guarded()
    with running(_factory(outbox, turns=script)) as server:
        first = _open(browser, server, guard)
        first.fill("#prompt", "Tell Ann the meeting is at 10.")
        first.click("#send")
        first.locator(".approval").wait_for()
        live = _open(browser, server, guard)  # shows the parked run, then follows it live
        stale = _open(browser, server, guard)
        stale.context.route("**/api/updates*", _refuse)
        stale.reload()  # this tab hears nothing any more: its card goes stale
        stale.locator(".approval button.approve").wait_for()
        live.locator(".approval button.approve").wait_for()

        first.click(".approval button.approve")
        live.wait_for_selector(".msg.assistant:has-text('Done: the email to Ann went out.')")
        assert live.locator(".approval").count() == 0
        assert live.locator("#status").text_content() == "done"

        stale.click(".approval button.approve")
        stale.wait_for_selector(".approval .why:has-text('Already decided elsewhere')")
        assert stale.locator(".approval button").count() == 0
        assert stale.locator(".msg.error").count() == 0
        assert outbox.sent == ["ann@example.com"]  # once

        # a run started in one tab shows up in the other
        first.fill("#prompt", "And now?")
        first.click("#send")
        live.wait_for_selector(".msg.user:text-is('And now?')")
        live.wait_for_selector(".msg.assistant:has-text('Second answer.')")
        # the stale tab is still usable: reopening the conversation shows everything
        stale.click("#threads li.current .name")
        stale.wait_for_selector(".msg.assistant:has-text('Second answer.')")
        for page in (first, live, stale):
            page.context.close()
    assert guard.blocked == []


def _refuse(route: Any) -> None:
    route.abort()


MARKDOWN = """## Plan

1. Read the **file**
2. Run `make test`

| tool | calls |
|------|------:|
| grep | 3 |

```python
def add(a, b):
    return a + b  # sum
```

See [the docs](https://example.org/docs) and [this](javascript:alert(1)).
<img src=x onerror="window.pwned = 1"> <script>window.pwned = 2</script>"""


def test_markdown_and_code_are_drawn_and_html_from_the_model_stays_text(browser: Any) -> None:
    guard = Guarded()
    with running(_factory(Outbox(), turns=[MARKDOWN])) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Make a plan.")
        page.click("#send")
        answer = page.locator(".msg.assistant")
        answer.locator("pre.code-block").wait_for()
        assert answer.locator("h4").text_content() == "Plan"
        assert answer.locator("ol li").all_text_contents() == ["Read the file", "Run make test"]
        assert answer.locator("ol li strong").text_content() == "file"
        assert answer.locator("table td").all_text_contents() == ["grep", "3"]
        code = answer.locator("pre.code-block code")
        assert code.text_content() == "def add(a, b):\n    return a + b  # sum"
        assert code.locator(".tok-keyword").first.text_content() == "def"
        assert answer.locator("a").count() == 1  # the javascript: link is not a link
        assert answer.locator("a").get_attribute("href") == "https://example.org/docs"
        assert answer.locator("a").get_attribute("rel") == "noopener noreferrer nofollow"
        assert answer.locator("img, script").count() == 0
        assert "<img src=x" in (answer.text_content() or "")
        assert page.evaluate("() => window.pwned") is None
        # whatever the text, the renderer makes only these elements and attributes
        made = page.evaluate(
            """(texts) => {
                const tags = new Set(), attrs = new Set();
                for (const text of texts) {
                    const box = document.createElement('div');
                    box.append(renderMarkdown(text));
                    for (const node of box.querySelectorAll('*')) {
                        tags.add(node.tagName.toLowerCase());
                        for (const a of node.attributes) attrs.add(a.name);
                    }
                }
                return {tags: [...tags].sort(), attrs: [...attrs].sort()};
            }""",
            [
                MARKDOWN,
                "<svg onload=alert(1)>",
                "[x](javascript:alert(1)) [y](data:text/html,hi) [z](https://a.b/?q=<i>)",
                "```\n<script>alert(1)</script>\n```",
                "| <b>a</b> |\n|---|\n| `<i>` |",
                "> <iframe src=x>\n- <a href=x>y</a>\n1. **<u>z</u>**",
                "*" * 500 + "_" * 500 + "`" * 501,
                "",
            ],
        )
        allowed = {"p", "br", "strong", "em", "del", "code", "a", "h3", "h4", "h5", "h6"}
        allowed |= {"hr", "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr"}
        allowed |= {"th", "td", "div", "pre", "span", "button"}
        assert set(made["tags"]) <= allowed
        safe = {"class", "href", "target", "rel", "data-lang", "start", "type", "aria-label"}
        assert set(made["attrs"]) <= safe  # the Copy button has a type and a label
        assert set(made["attrs"]) >= {"href"}  # the https link
        hrefs = page.evaluate(
            """() => { const b = document.createElement('div');
                b.append(renderMarkdown('[x](javascript:alert(1)) [y](data:text/html,hi)'));
                return b.querySelectorAll('a').length; }"""
        )
        assert hrefs == 0
        page.context.close()
    assert guard.blocked == []


class _Broken(BaseModel):
    model: str
    choices: list[int]
    usage: dict[str, int]


class FailingModel:
    """A model whose provider answers something that does not validate (a long error)."""

    name = "test:failing"

    @property
    def profile(self) -> ModelProfile:
        return ScriptedModel([]).profile

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        try:
            _Broken.model_validate({"choices": ["a", "b", "c"], "usage": {"x": "y"}})
        except ValidationError as exc:
            raise RuntimeError(f"the provider's answer did not parse: {exc}") from exc
        for event in ():  # an async generator that never yields
            yield event


def test_a_provider_error_is_one_line_with_the_details_on_demand(browser: Any) -> None:
    guard = Guarded()
    with running(_factory(Outbox(), model=FailingModel())) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Hello?")
        page.click("#send")
        error = page.locator(".msg.error")
        error.wait_for()
        summary = error.locator(".summary").text_content() or ""
        assert "\n" not in summary
        assert "the provider's answer did not parse" in summary
        details = error.locator("details")
        assert not details.locator("pre").is_visible()
        details.locator("summary").click()
        assert "validation errors for _Broken" in (details.locator("pre").text_content() or "")
        assert page.locator("#status").text_content() == "failed"
        page.context.close()


def test_tokens_a_provider_did_not_report_are_not_shown_as_zero(browser: Any) -> None:
    """Some local servers send no usage when streaming: the page says so instead of 0."""
    turns = [reply("Hi.", usage=Usage(requests=1)), "Counted."]
    guard = Guarded()
    with running(_factory(Outbox(), turns=turns)) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Hello")
        page.click("#send")
        page.wait_for_selector("#status:text-is('done')")
        assert page.locator("#usage-requests").text_content() == "1"
        assert page.locator("#usage-input").text_content() == "not reported"
        assert page.locator("#usage-output").text_content() == "not reported"
        # twin: a provider that reports tokens gets them shown
        page.fill("#prompt", "Again")
        page.click("#send")
        page.wait_for_selector(".msg.assistant:has-text('Counted.')")
        page.wait_for_selector("#status:text-is('done')")
        assert (page.locator("#usage-input").text_content() or "").isdigit()
        page.context.close()


def test_edited_arguments_are_shown_as_sent_and_a_bad_edit_goes_back_to_the_person(
    browser: Any,
) -> None:
    outbox = Outbox()
    script = [reply(call("send_email", {"to": "ann@example.com", "body": "Hi"})), "Sent."]
    guard = Guarded()
    with running(_factory(outbox, turns=script)) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Mail Ann.")
        page.click("#send")
        box = page.locator(".approval")
        box.wait_for()
        box.locator("button.edit").click()
        box.locator("textarea.edited").fill('{"body": "no recipient"}')
        box.locator("button.edit").click()
        page.wait_for_selector(".approval .why.problem:has-text('do not fit send_email')")
        assert box.locator("textarea.edited").is_visible()  # still the person's to fix
        assert box.locator("button.edit").is_enabled()
        assert off_loop(server.app.hub.approvals.pending())  # nothing decided
        box.locator("textarea.edited").fill('{"to": "bob@example.com", "body": "Hi"}')
        box.locator("button.edit").click()
        page.wait_for_selector(".msg.assistant:has-text('Sent.')")

        def check() -> None:
            card = page.locator(".tool-card").first
            assert '"to": "bob@example.com"' in (card.locator(".args").text_content() or "")
            assert card.locator(".result").text_content() == "sent to bob@example.com"
            assert "ann@example.com" in (card.locator(".asked pre").text_content() or "")
            assert (card.locator(".took").text_content() or "").endswith(("ms", " s"))

        check()
        page.reload()
        page.wait_for_selector(".msg.assistant:has-text('Sent.')")
        check()
        page.context.close()
    assert outbox.sent == ["bob@example.com"]


def test_from_360_px_to_wide_the_transcript_gets_the_room(browser: Any) -> None:
    guard = Guarded()
    with running(_factory(Outbox(), turns=[MARKDOWN])) as server:
        for width in (360, 760, 1024, 1600):
            page = _open(browser, server, guard, viewport={"width": width, "height": 740})
            if width == 360:
                page.fill("#prompt", "Make a plan.")
                page.click("#send")
            page.wait_for_selector(".msg.assistant pre.code-block")
            sizes = page.evaluate(
                """() => ({
                    scroll: document.scrollingElement.scrollWidth,
                    transcript: document.querySelector('#messages').getBoundingClientRect().width,
                })"""
            )
            assert sizes["scroll"] <= width  # nothing sticks out sideways
            assert sizes["transcript"] >= min(width, 1024) * 0.7
            if width < 800:  # the conversations are one tap away
                assert not page.locator("#threads").is_visible()
                page.click("#show-threads")
                page.locator("#threads li.current").wait_for()
                page.click("#threads li.current .name")
                assert not page.locator("#threads").is_visible()
            if width < 1200:
                page.click("#show-panels")
                page.locator("#journal li.tl-model").wait_for()
                page.keyboard.press("Escape")
                assert not page.locator("#journal").is_visible()
            if width == 360:
                page.screenshot(path=shot("web-narrow.png"))
            page.context.close()


def test_keys_approve_and_enter_in_the_message_box_never_does(browser: Any) -> None:
    outbox = Outbox()
    guard = Guarded()
    with running(_factory(outbox)) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Tell Ann the meeting is at 10.")
        page.click("#send")
        page.locator(".approval").wait_for()
        page.focus("#prompt")
        page.keyboard.press("Enter")  # an empty box: nothing is sent, nothing approved
        page.keyboard.press("a")  # typed into the box, not a shortcut
        assert page.input_value("#prompt") == "a"
        assert off_loop(server.app.hub.approvals.pending())
        page.fill("#prompt", "")
        page.locator("#messages").focus()
        page.keyboard.press("?")
        assert page.locator("#help").is_visible()
        page.keyboard.press("Escape")
        assert not page.locator("#help").is_visible()
        page.keyboard.press("a")
        page.wait_for_selector(".msg.assistant:has-text('Done: the email to Ann went out.')")
        page.context.close()
    assert outbox.sent == ["ann@example.com"]


def test_a_rejection_by_keyboard_and_a_message_held_while_the_run_waits(browser: Any) -> None:
    outbox = Outbox()
    model = GatedModel(
        [
            reply("Let me see.", call("send_email", {"to": "ann@example.com"})),
            "Understood, not sent.",
        ]
    )
    guard = Guarded()
    with running(_factory(outbox, model=model)) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Mail Ann.")
        page.click("#send")
        page.locator(".msg.assistant").wait_for()  # held after its first chunk
        page.fill("#prompt", "Also, thanks!")
        page.press("#prompt", "Enter")
        page.locator(".msg.queued").wait_for()
        model.release.set()
        page.locator(".approval").wait_for()
        # the run waits for a person: the message is not sent past the approval
        page.wait_for_selector("#notice:has-text('your message is back in the box')")
        assert page.input_value("#prompt") == "Also, thanks!"
        assert page.locator(".msg.queued").count() == 0
        page.locator("#messages").focus()
        page.keyboard.press("r")
        assert page.evaluate("() => document.activeElement.className") == "reason"
        page.keyboard.type("Not today.")
        page.keyboard.press("Enter")
        page.wait_for_selector(".msg.assistant:has-text('Understood, not sent.')")
        assert page.locator(".decided").text_content() == "decision: reject (Not today.)"
        page.context.close()
    assert outbox.sent == []


def test_escape_stops_the_run_and_the_text_so_far_stays(browser: Any) -> None:
    model = GatedModel(["Answer that will be stopped.", "Next answer."])
    guard = Guarded()
    with running(_factory(Outbox(), model=model)) as server:
        page = _open(browser, server, guard)
        page.fill("#prompt", "Go on and on.")
        page.click("#send")
        page.wait_for_function(
            "() => document.querySelector('.msg.assistant')?.textContent === 'Answer'"
        )
        page.locator("#messages").focus()
        with page.expect_response("**/cancel") as cancel:
            page.keyboard.press("Escape")
        assert cancel.value.json() == {"cancelled": True}
        model.release.set()  # the held model call returns; the fence drops what follows
        page.wait_for_selector("#status:text-is('cancelled')")
        assert not page.locator("#stop").is_enabled()
        assert (page.locator(".msg.assistant").first.text_content() or "").startswith("Answer")
        page.fill("#prompt", "Again?")  # the conversation goes on
        page.click("#send")
        page.wait_for_selector(".msg.assistant:has-text('Next answer.')")
        page.context.close()


def test_dark_and_light_themes_follow_the_system_and_the_toggle(browser: Any) -> None:
    guard = Guarded()
    background = "() => getComputedStyle(document.body).backgroundColor"
    with running(_factory(Outbox(), turns=[MARKDOWN])) as server:
        page = _open(browser, server, guard, color_scheme="dark")
        dark = page.evaluate(background)
        assert dark == "rgb(20, 23, 28)"
        page.fill("#prompt", "Make a plan.")
        page.click("#send")
        page.wait_for_selector(".msg.assistant pre.code-block")
        page.screenshot(path=shot("web-dark.png"))
        page.click("#theme")  # auto -> light
        assert page.locator("#theme").text_content() == "Theme: light"
        assert page.evaluate(background) == "rgb(246, 247, 249)"
        page.reload()  # the choice is kept
        page.wait_for_selector("body[data-ready='true']")
        assert page.evaluate(background) == "rgb(246, 247, 249)"
        page.context.close()


def test_a_missing_conversation_in_the_address_is_said_and_the_page_stays_usable(
    browser: Any,
) -> None:
    guard = Guarded()
    with running(_factory(Outbox(), turns=["Hello there."])) as server:
        context = browser.new_context(viewport=WIDE)
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}#thread=no%20such%20chat")
        page.wait_for_selector("#notice:has-text('There is no conversation \"no such chat\"')")
        page.fill("#prompt", "Hi")
        page.click("#send")
        page.wait_for_selector(".msg.assistant:has-text('Hello there.')")
        assert page.locator("#notice").is_hidden()
        context.close()


def _axe(page: Any) -> list[str]:
    """Serious and critical axe-core violations of the page as it is now."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        """async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations
              .filter((v) => ['serious', 'critical'].includes(v.impact))
              .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
        }"""
    )
    return list(found)


def test_axe_finds_no_serious_violation_idle_waiting_and_done_in_both_themes(
    browser: Any,
) -> None:
    if not AXE.exists():
        skip_or_fail("the axe-core npm package (`make pytest` installs it under .web-node)")
    guard = Guarded()
    with running(_factory(Outbox(), turns=[*email_script(), MARKDOWN])) as server:
        for scheme in ("light", "dark"):
            # axe is injected as a script of its own: the page's CSP would refuse it
            page = _open(browser, server, guard, color_scheme=scheme, bypass_csp=True)
            assert _axe(page) == [], scheme
            if scheme == "light":
                page.fill("#prompt", "Tell Ann the meeting is at 10.")
                page.click("#send")
                page.locator(".approval").wait_for()
                assert _axe(page) == [], "waiting for approval"
                page.click(".approval button.approve")
                page.wait_for_selector("#status:text-is('done')")
                page.fill("#prompt", "Make a plan.")
                page.click("#send")
                page.wait_for_selector(".msg.assistant pre.code-block")
            else:
                page.wait_for_selector(".msg.assistant pre.code-block")
            page.wait_for_selector("#journal li.tl-model")
            assert _axe(page) == [], f"done, {scheme}"
            page.context.close()


def test_axe_check_catches_a_violation() -> None:
    """Twin of the accessibility check: the same filter reports a page with a bad control."""
    if not AXE.exists():
        skip_or_fail("the axe-core npm package (`make pytest` installs it under .web-node)")
    from web_support import browser_or_skip

    chromium = browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True)
        page = launched.new_page()
        page.set_content("<html lang='en'><body><main><button></button></main></body></html>")
        found = _axe(page)
        launched.close()
    assert any(v.startswith("button-name") for v in found)


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "twin_without_openRows"])
def test_a_timeline_row_opened_during_a_run_stays_open_as_the_run_goes_on(
    browser: Any, keep: bool
) -> None:
    outbox = Outbox()
    script = [reply(call("send_email", {"to": "ann@example.com", "body": "Hi"})), "Sent."]
    guard = Guarded()
    with running(_factory(outbox, turns=script)) as server:
        page = _open(browser, server, guard)
        if not keep:  # the old redraw: every row folded again
            page.evaluate("window.openRows = () => new Set()")
        page.fill("#prompt", "Mail Ann.")
        page.click("#send")
        page.locator(".approval").wait_for()
        page.wait_for_selector("#journal li.tl-model")
        head = page.locator("#journal li.tl-model .tl-head").first
        head.click()
        assert head.get_attribute("aria-expanded") == "true"
        page.locator(".approval button.approve").click()
        page.wait_for_selector("#journal li.tl-end:has-text('finished')")  # redrawn since
        head = page.locator("#journal li.tl-model .tl-head").first
        expanded = head.get_attribute("aria-expanded")
        shown = page.locator("#journal li.tl-model .tl-events").first.is_visible()
        assert (expanded, shown) == (("true", True) if keep else ("false", False))
        page.context.close()
    assert outbox.sent == ["ann@example.com"]


def _send_before_ready(browser: Any, *, guard_off: bool) -> tuple[Any, Any]:
    """Enter pressed while the page still loads its conversations (that request held)."""
    model = ScriptedModel([reply("Hello there.")])
    guard = Guarded()
    server_cm = running(_factory(Outbox(), model=model))
    server = server_cm.__enter__()
    context = browser.new_context(viewport=WIDE)
    guard.attach(context)
    page = context.new_page()
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route("**/api/threads", hold)
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_function("() => document.querySelector('#model').textContent !== ''")
    while not held:
        page.wait_for_timeout(20)
    if guard_off:  # the page believes its first view is open already
        page.evaluate("() => { document.body.dataset.ready = 'true'; }")
    page.fill("#prompt", "Early question")
    page.press("#prompt", "Enter")
    page.wait_for_timeout(300)
    page.unroute("**/api/threads", hold)  # the held requests go on
    return page, server_cm


def test_a_message_sent_before_the_page_is_ready_is_sent_once_it_is(browser: Any) -> None:
    page, server_cm = _send_before_ready(browser, guard_off=False)
    try:
        page.wait_for_selector(".msg.assistant:has-text('Hello there.')")
        assert page.locator(".msg.user").all_text_contents() == ["Early question"]
    finally:
        page.context.close()
        server_cm.__exit__(None, None, None)


def test_twin_sent_before_the_first_view_opens_the_message_is_wiped(browser: Any) -> None:
    page, server_cm = _send_before_ready(browser, guard_off=True)
    try:
        page.wait_for_function("() => document.querySelector('#status')?.textContent !== 'running'")
        page.wait_for_timeout(1500)
        assert page.locator(".msg.user").all_text_contents() == []
    finally:
        page.context.close()
        server_cm.__exit__(None, None, None)
