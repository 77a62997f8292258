"""`legato serve` end to end in headless Chromium (Debian's `chromium`, driven by Playwright).

Playwright cannot download its own browser here, so the test launches the system's
chromium by path. Every request the page makes is checked: one that leaves loopback is
aborted and fails the test. Screenshots go to docs/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from web_support import (
    TOKEN,
    GatedModel,
    Guarded,
    Outbox,
    Server,
    email_script,
    email_tool,
    make_app,
    off_loop,
    running,
    shot,
    state_and_subagent_agent,
)

from legato import Agent
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply
from legato.web import create_app


def _pending(server: Server) -> list[str]:
    return [r.id for r in off_loop(server.app.hub.approvals.pending())]


def test_prompt_stream_tool_card_approval_survives_closing_the_page(
    browser: Any, tmp_path: Path
) -> None:
    outbox = Outbox()
    model = GatedModel(email_script())
    guard = Guarded()

    def factory(port: int) -> Any:
        app = make_app(outbox, model=model, store=SQLiteStore(tmp_path / "legato.db"))
        app.allow(port)
        return app

    with running(factory) as server:
        # -- first visit: send a prompt, watch the text stream, meet the approval -----------
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        page.wait_for_selector("#model:has-text('test:gated')")
        page.fill("#prompt", "Tell Ann the meeting is at 10.")
        page.click("#send")
        answer = page.locator(".msg.assistant").first
        answer.wait_for()
        # the model is held after its first chunk: the page shows a partial answer
        page.wait_for_function(
            "() => document.querySelector('.msg.assistant')?.textContent === 'I will'"
        )
        assert page.locator("#status").text_content() == "running"
        model.release.set()
        page.wait_for_selector(".tool-card .approval button.approve")
        assert answer.text_content() == "I will send the email to Ann now."
        card = page.locator(".tool-card").first
        assert card.locator(".name").text_content() == "send_email"
        assert '"to": "ann@example.com"' in (card.locator(".args").text_content() or "")
        interrupt = card.locator(".approval").get_attribute("data-interrupt-id")
        assert page.locator("#status").text_content() == "waiting for approval"
        page.screenshot(path=shot("web-approval.png"))
        assert outbox.sent == []

        # -- close the page mid-approval: nothing is decided ------------------------------
        context.close()
        assert _pending(server) == [interrupt]
        assert outbox.sent == []

        # -- reopen: the same request is shown again; approve it --------------------------
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        again = page.locator(f".approval[data-interrupt-id='{interrupt}']")
        again.wait_for()
        assert page.locator(".msg.user").first.text_content() == "Tell Ann the meeting is at 10."
        again.locator("button.approve").click()
        page.wait_for_selector(".msg.assistant:has-text('Done: the email to Ann went out.')")
        result = page.locator(".tool-card .result").first
        assert result.text_content() == "sent to ann@example.com"
        assert page.locator(".tool-card .outcome").first.text_content() == "ok"
        assert page.locator("#status").text_content() == "done"
        assert page.locator(".approval").count() == 0
        assert int(page.locator("#usage-requests").text_content() or "0") == 2
        assert page.locator("#usage-cost").text_content() == "$0.001200"
        page.select_option("#journal-run", index=0)
        page.click("#journal-load")
        page.wait_for_selector("#journal li:has-text('run_finished')")
        page.screenshot(path=shot("web-done.png"))
        context.close()

    assert outbox.sent == ["ann@example.com"]  # the effect ran exactly once
    assert _no_pending(tmp_path)
    assert guard.requests, "the guard saw no request: it is not attached"
    assert guard.blocked == [], f"requests left loopback: {guard.blocked}"


def _no_pending(tmp_path: Path) -> bool:
    from legato.approvals import SQLiteApprovalStore

    return off_loop(SQLiteApprovalStore(tmp_path / "legato.db").pending()) == []


def test_the_loopback_guard_catches_a_request_that_leaves(browser: Any) -> None:
    """Twin of the guard: a page that reaches for another host is caught."""

    def factory(port: int) -> Any:
        app = make_app(Outbox())
        app.allow(port)
        return app

    guard = Guarded()
    with running(factory) as server:
        context = browser.new_context()
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        page.wait_for_selector("#model:has-text('test:scripted')")
        # the page's own Content-Security-Policy stops a script's request to another host
        # before it reaches the network, so the guard never sees it ...
        refused = page.evaluate(
            "() => fetch('http://192.0.2.1/x').then(() => 'sent', () => 'refused')"
        )
        assert refused == "refused"
        assert guard.blocked == []
        # ... and a navigation elsewhere (not covered by connect-src) is caught by the guard
        from playwright.sync_api import Error as PlaywrightError

        with pytest.raises(PlaywrightError):
            page.goto("http://192.0.2.1/x")  # TEST-NET-1: never routed
        context.close()
    assert guard.blocked == ["http://192.0.2.1/x"]


def _answer(text: str | None) -> Any:
    """A handler for the page's next prompt() or confirm(): accept, typing `text`."""

    def accept(dialog: Any) -> None:
        if text is None:
            dialog.accept()
        else:
            dialog.accept(text)

    return accept


def test_state_panel_sub_agent_tree_and_conversation_list(browser: Any) -> None:
    def factory(port: int) -> Any:
        return create_app(
            state_and_subagent_agent(), store=SQLiteStore(":memory:"), token=TOKEN, port=port
        )

    guard = Guarded()
    with running(factory) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        page.wait_for_selector("#model:has-text('test:scripted')")
        page.fill("#prompt", "Count and research.")
        page.press("#prompt", "Enter")
        page.wait_for_selector(".msg.assistant:has-text('Counted and researched.')")
        name = page.locator("#thread-title").text_content() or ""
        assert name == "Count and research."  # named after the first message
        assert page.locator("#threads li.current .name").text_content() == name
        assert '"count": 2' in (page.locator("#state").text_content() or "")
        history = page.locator("#state-history li").first.text_content() or ""
        assert history == "v1 increment: count: 0 → 2"
        node = page.locator("#subagents li.done")
        assert node.locator(".label").text_content() == "researcher: find the page"
        assert node.locator(".say .text").text_content() == "Found it: page 4."  # its own text
        assert page.locator(".tool-card").count() == 2
        page.click("#journal-load")  # the run just made is offered without a reload
        child = page.locator("#journal li.tl-child")
        child.wait_for()
        assert "sub-agent researcher" in (child.text_content() or "")
        assert page.locator("#journal li.tl-model").count() == 2
        assert page.locator("#journal li.tl-tool").count() == 2
        page.screenshot(path=shot("web-state-subagents.png"))

        # the sub-agent's node opens its own timeline
        page.click("#subagents li .label")
        page.wait_for_selector("#timeline-trail:has-text('researcher')")
        page.wait_for_selector("#journal li.tl-end:has-text('finished')")
        assert page.locator("#journal li.tl-child").count() == 0
        page.click("#timeline-trail button.tl-back")  # and back to the parent's
        page.locator("#journal li.tl-child").wait_for()
        assert page.locator("#timeline-trail").is_hidden()

        # rename in place, fork and delete through the conversation list
        page.click(f"#threads li[data-thread-id='{name}'] button.rename")
        page.fill("#threads .rename-input", "counting")
        page.press("#threads .rename-input", "Enter")
        page.wait_for_selector("#thread-title:text-is('counting')")
        page.click("#threads li[data-thread-id='counting'] button.fork")
        page.wait_for_selector(".msg.history:has-text('Counted and researched.')")
        fork = page.locator("#thread-title").text_content() or ""
        assert fork.startswith("counting fork ")
        assert page.locator("#threads li").count() == 2
        page.once("dialog", _answer(None))
        page.click(f"#threads li[data-thread-id='{fork}'] button.delete")
        page.wait_for_function("() => document.querySelectorAll('#threads li').length === 1")
        assert page.locator("#threads li .name").text_content() == "counting"
        context.close()
    assert guard.blocked == []


def test_reject_with_a_reason_and_edit_the_arguments_in_the_page(browser: Any) -> None:
    outbox = Outbox()
    script = [
        reply(call("send_email", {"to": "ann@example.com", "body": "Hi"})),
        "Understood, nothing was sent.",
        reply(call("send_email", {"to": "ann@example.com", "body": "Hi again"})),
        "Sent, to the address you chose.",
    ]

    def factory(port: int) -> Any:
        app = make_app(outbox, turns=script)
        app.allow(port)
        return app

    guard = Guarded()
    with running(factory) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        page.wait_for_selector("#model:has-text('test:scripted')")
        page.fill("#prompt", "Mail Ann.")
        page.click("#send")
        box = page.locator(".approval")
        box.wait_for()
        box.locator("input.reason").fill("Not before Monday.")
        box.locator("button.reject").click()
        page.wait_for_selector(".msg.assistant:has-text('Understood, nothing was sent.')")
        first = page.locator(".tool-card").nth(0)
        assert first.locator(".decided").text_content() == "decision: reject (Not before Monday.)"
        assert "Not before Monday." in (first.locator(".result").text_content() or "")
        assert outbox.sent == []

        page.fill("#prompt", "Mail Ann again.")
        page.click("#send")
        box = page.locator(".tool-card").nth(1).locator(".approval")
        box.wait_for()
        box.locator("button.edit").click()
        box.locator("textarea.edited").fill('{"to": "bob@example.com", "body": "Hi again"}')
        box.locator("button.edit").click()  # "Run with these arguments"
        page.wait_for_selector(".msg.assistant:has-text('Sent, to the address you chose.')")
        second = page.locator(".tool-card").nth(1)
        assert second.locator(".result").text_content() == "sent to bob@example.com"
        assert (second.locator(".decided").text_content() or "").startswith("decision: edit")
        context.close()
    assert outbox.sent == ["bob@example.com"]
    assert guard.blocked == []


def _mailer_tree(outbox: Outbox, *, child_turns: list[Any], parent_turns: list[Any]) -> Agent:
    child = Agent(ScriptedModel(child_turns), tools=[email_tool(outbox)], name="mailer")
    return Agent(
        ScriptedModel(parent_turns),
        tools=[child.as_tool(name="mailer", description="Sends mail.")],
    )


def test_a_sub_agents_call_is_approved_in_the_page_after_a_restart(
    browser: Any, tmp_path: Path
) -> None:
    """A child's ask parks the tree; a new server on the same store shows it and goes on."""
    outbox = Outbox()
    path = tmp_path / "legato.db"

    def first(port: int) -> Any:
        tree = _mailer_tree(
            outbox,
            child_turns=[reply(call("send_email", {"to": "ann@example.com"}))],
            parent_turns=[reply(call("mailer", {"task": "mail Ann"}))],
        )
        return create_app(tree, store=SQLiteStore(path), token=TOKEN, port=port)

    def second(port: int) -> Any:  # a new process would build the same agents again
        tree = _mailer_tree(outbox, child_turns=["Sent it."], parent_turns=["All done."])
        return create_app(tree, store=SQLiteStore(path), token=TOKEN, port=port)

    guard = Guarded()
    with running(first) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        page.wait_for_selector("#model:has-text('test:scripted')")
        page.fill("#prompt", "Mail Ann through the mailer.")
        page.click("#send")
        page.locator(".approval").wait_for()
        assert page.locator(".tool-card.waiting .name").text_content() == "mailer › send_email"
        context.close()
    assert outbox.sent == []

    with running(second) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 760})
        guard.attach(context)
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        box = page.locator(".approval")
        box.wait_for()
        asked = page.locator(".tool-card.waiting")
        assert asked.locator(".name").text_content() == "mailer › send_email"
        assert '"to": "ann@example.com"' in (asked.locator(".args").text_content() or "")
        box.locator("button.approve").click()
        page.wait_for_selector(".msg.assistant:has-text('All done.')")
        assert page.locator(".approval").count() == 0
        assert "Sent it." in (page.locator("#subagents li").first.text_content() or "")
        context.close()
    assert outbox.sent == ["ann@example.com"]
    assert guard.blocked == []
