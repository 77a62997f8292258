"""The web UI's HTTP surface without a browser: the door (Host, Origin, token), bad input
(clear errors, nothing decided), the approval flow, conversations, and streams that resume."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from web_support import (
    BASE,
    TOKEN,
    GatedModel,
    Outbox,
    client,
    frames,
    make_app,
    prompt_body,
    resume_body,
)

from legato.store import SQLiteStore
from legato.web._guard import Guard

# -- the door -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/", "/static/app.js", "/api/threads", "/api/runs/x/events", "/api/updates"]
)
async def test_a_foreign_host_is_refused_on_every_route(path: str) -> None:
    app = make_app(Outbox())
    async with client(app, host="evil.example") as http:
        response = await http.get(path)
    assert response.status_code == 403
    assert "evil.example" in response.json()["message"]


async def test_the_loopback_names_of_the_port_are_allowed() -> None:
    app = make_app(Outbox())
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        async with client(app, host=host) as http:
            assert (await http.get("/api/threads")).status_code == 200, host
    async with client(app, host="127.0.0.1:9999") as http:  # another port: rebinding
        assert (await http.get("/api/threads")).status_code == 403


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "http://localhost:3000", "https://127.0.0.1:8765", "null"],
)
async def test_a_foreign_origin_cannot_start_a_run(origin: str) -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app, origin=origin) as http:
        response = await http.post("/api/agui", json=prompt_body("t", "Mail Ann"))
    assert response.status_code == 403
    assert origin in response.json()["message"]
    async with client(app) as http:  # nothing was started: no conversation, no run
        assert (await http.get("/api/threads")).json()["threads"] == []
    async with client(app, **{"sec-fetch-site": "cross-site"}) as http:
        assert (await http.post("/api/agui", json=prompt_body("t", "x"))).status_code == 403
    # twin: the page's own origin is accepted
    async with client(app, origin=BASE) as http:
        response = await http.post("/api/agui", json=prompt_body("t", "Mail Ann"))
    assert response.status_code == 200


async def test_a_missing_or_wrong_token_is_refused() -> None:
    app = make_app(Outbox())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        assert (await http.get("/")).status_code == 401
        assert (await http.get("/api/threads")).status_code == 401
        wrong = {"Authorization": "Bearer not-the-token"}
        assert (await http.get("/api/threads", headers=wrong)).status_code == 401
        assert (await http.get("/?token=nope")).status_code == 401
        posted = await http.post("/api/agui", json=prompt_body("t", "hi"))
        assert posted.status_code == 401


async def test_the_token_in_the_url_becomes_a_strict_httponly_cookie() -> None:
    app = make_app(Outbox())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        login = await http.get(f"/?token={TOKEN}")
        assert login.status_code == 303
        assert login.headers["location"] == "/"  # the token leaves the address bar
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        page = await http.get("/")  # the cookie jar now carries the token
        assert page.status_code == 200
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert (await http.get("/static/app.js")).status_code == 200


async def test_the_guard_refuses_hosts_until_told_which_to_allow() -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("never reached")

    guard = Guard(app=app, token=TOKEN)  # no hosts yet: everything is refused
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url=BASE) as http:
        response = await http.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 403


# -- bad input: clear errors, nothing decided ------------------------------------------------------


async def _parked(http: httpx.AsyncClient, thread: str = "t") -> str:
    body = (await http.post("/api/agui", json=prompt_body(thread, "Mail Ann"))).text
    last = frames(body)[-1][1]
    assert last["type"] == "RUN_FINISHED"
    assert last["outcome"]["type"] == "interrupt"
    return last["outcome"]["interrupts"][0]["id"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[]", 400, "JSON object"),
        (json.dumps({"threadId": "t", "runId": "r"}).encode(), 422, "messages"),
        (
            json.dumps({"threadId": "t", "runId": "r", "messages": [], "bogus": 1}).encode(),
            422,
            "bogus",
        ),
        (json.dumps({"threadId": "t", "runId": "r", "messages": []}).encode(), 400, "last message"),
        (json.dumps(prompt_body("../etc", "hi")).encode(), 400, "conversation name"),
    ],
)
async def test_a_malformed_agui_request_gets_a_clear_error(
    body: bytes, status: int, words: str
) -> None:
    app = make_app(Outbox())
    async with client(app) as http:
        response = await http.post(
            "/api/agui", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == status, response.text
        assert words in response.json()["message"]
        assert (await http.get("/api/threads")).json()["threads"] == []


@pytest.mark.parametrize(
    "payload",
    [None, {"verdict": "maybe"}, {"verdict": "edit", "arguments": "not an object"}],
)
async def test_a_malformed_decision_decides_nothing(payload: object) -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        interrupt = await _parked(http)
        body = resume_body("t", interrupt, {})
        body["resume"][0]["payload"] = payload
        response = await http.post("/api/agui", json=body)
        assert response.status_code == 400, response.text
        pending = (await http.get("/api/threads/t")).json()["pending"]
        assert [p["id"] for p in pending] == [interrupt]  # still pending
        assert outbox.sent == []


async def test_an_unknown_or_foreign_interrupt_is_refused() -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        interrupt = await _parked(http, "a")
        await http.post("/api/threads", json={"name": "b"})
        other = await http.post(
            "/api/agui", json=resume_body("b", interrupt, {"verdict": "approve"})
        )
        assert other.status_code == 400
        assert "no approval request" in other.json()["message"]
        unknown = await http.post(
            "/api/agui", json=resume_body("a", "apr_x", {"verdict": "approve"})
        )
        assert unknown.status_code == 400
        assert outbox.sent == []


async def test_a_decision_is_applied_once() -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        interrupt = await _parked(http)
        first = await http.post(
            "/api/agui", json=resume_body("t", interrupt, {"verdict": "approve"})
        )
        assert first.status_code == 200
        assert frames(first.text)[-1][1]["outcome"] == {"type": "success"}
        again = await http.post(
            "/api/agui", json=resume_body("t", interrupt, {"verdict": "approve"})
        )
        assert again.status_code == 409
        assert outbox.sent == ["ann@example.com"]


# -- the approval flow -------------------------------------------------------------------------------


async def test_a_rejection_with_a_reason_reaches_the_model_and_runs_nothing() -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        interrupt = await _parked(http)
        payload = {"verdict": "reject", "message": "Not today."}
        body = (await http.post("/api/agui", json=resume_body("t", interrupt, payload))).text
        events = [e for _, e in frames(body)]
        decided = next(e for e in events if e.get("name") == "legato.approval_decided")
        assert decided["value"]["verdict"] == "reject"
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert "Not today." in result["content"]
        assert outbox.sent == []


async def test_an_edit_runs_the_edited_arguments_once() -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        interrupt = await _parked(http)
        payload = {"verdict": "edit", "arguments": {"to": "bob@example.com", "body": "hi"}}
        response = await http.post("/api/agui", json=resume_body("t", interrupt, payload))
        assert response.status_code == 200
        assert outbox.sent == ["bob@example.com"]


async def test_a_parked_run_survives_a_new_server_on_the_same_store(tmp_path: Path) -> None:
    """The request waits in the store; a restarted server shows it and continues the run."""
    outbox = Outbox()
    path = tmp_path / "legato.db"
    async with client(make_app(outbox, store=SQLiteStore(path))) as http:
        interrupt = await _parked(http)
    restarted = make_app(
        outbox, turns=["Done: the email to Ann went out."], store=SQLiteStore(path)
    )
    async with client(restarted) as http:
        thread = (await http.get("/api/threads/t")).json()
        assert [p["id"] for p in thread["pending"]] == [interrupt]
        assert "token" not in thread["pending"][0]  # tokens stay on the server
        replay = frames((await http.get(f"/api/runs/{thread['runs'][0]}/events")).text)
        assert replay[-1][1]["outcome"]["interrupts"][0]["id"] == interrupt
        done = await http.post(
            "/api/agui", json=resume_body("t", interrupt, {"verdict": "approve"})
        )
        assert frames(done.text)[-1][1]["result"] == "Done: the email to Ann went out."
        assert outbox.sent == ["ann@example.com"]
        journal = (await http.get(f"/api/runs/{thread['runs'][0]}/journal")).json()["events"]
        assert journal[-1]["kind"] == "run_finished"
        messages = (await http.get("/api/threads/t")).json()["messages"]
        assert messages[-1]["text"] == "Done: the email to Ann went out."


# -- conversations -----------------------------------------------------------------------------------


async def test_conversations_are_created_renamed_forked_and_deleted() -> None:
    app = make_app(Outbox(), turns=["First answer."])
    async with client(app) as http:
        assert (await http.post("/api/threads", json={"name": "alpha"})).status_code == 201
        assert (await http.post("/api/threads", json={"name": "alpha"})).status_code == 409
        body = (await http.post("/api/agui", json=prompt_body("alpha", "hello"))).text
        assert frames(body)[-1][1]["result"] == "First answer."
        renamed = await http.patch("/api/threads/alpha", json={"name": "beta"})
        assert renamed.json() == {"id": "beta"}
        beta = (await http.get("/api/threads/beta")).json()
        assert len(beta["runs"]) == 1  # its runs followed it
        fork = await http.post("/api/threads/beta/fork", json={"name": "gamma"})
        assert fork.status_code == 201
        gamma = (await http.get("/api/threads/gamma")).json()
        assert [m["text"] for m in gamma["messages"]] == ["hello", "First answer."]
        assert (await http.delete("/api/threads/beta")).status_code == 200
        names = [t["id"] for t in (await http.get("/api/threads")).json()["threads"]]
        assert names == ["gamma"]
        missing = await http.get("/api/threads/beta")
        assert missing.status_code == 404
        bad = await http.patch("/api/threads/gamma", json={"name": ""})
        assert bad.status_code == 400


async def test_a_sub_agents_side_effect_waits_for_the_page_too() -> None:
    """A child's ask parks the whole tree; the page decides it like any other."""
    from web_support import PORT, email_tool

    from legato import Agent
    from legato.testing import ScriptedModel, call, reply
    from legato.web import create_app

    outbox = Outbox()
    child = Agent(
        ScriptedModel([reply(call("send_email", {"to": "ann@example.com"})), "Child sent it."]),
        tools=[email_tool(outbox)],
        name="mailer",
    )
    parent = Agent(
        ScriptedModel([reply(call("mailer", {"task": "mail Ann"})), "Parent done."]),
        tools=[child.as_tool(name="mailer", description="Sends mail.")],
    )
    app = create_app(parent, store=SQLiteStore(":memory:"), token=TOKEN, port=PORT)
    async with client(app) as http:
        events = [
            e
            for _, e in frames(
                (await http.post("/api/agui", json=prompt_body("t", "Mail Ann"))).text
            )
        ]
        assert outbox.sent == []
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        started = next(e for e in events if e["type"] == "SUBAGENT_STARTED")
        assert interrupt["subagentRunId"] == started["subagentRunId"]
        assert interrupt["message"].startswith('send_email({"to":"ann@example.com"})')
        (pending,) = (await http.get("/api/threads/t")).json()["pending"]
        assert pending["id"] == interrupt["id"]
        assert pending["tool"] == "send_email"
        assert pending["subagentRunId"] == started["subagentRunId"]
        done = await http.post(
            "/api/agui", json=resume_body("t", interrupt["id"], {"verdict": "approve"})
        )
        assert done.status_code == 200, done.text
        end = frames(done.text)[-1][1]
        assert end["outcome"] == {"type": "success"}
        assert end["result"] == "Parent done."
    assert outbox.sent == ["ann@example.com"]


async def test_an_edit_that_does_not_fit_the_tool_goes_back_to_the_person() -> None:
    """As in the terminal chat: the person fixes it; the model never sees the bad call."""
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        interrupt = await _parked(http)
        payload = {"verdict": "edit", "arguments": {"body": "no recipient"}}
        response = await http.post("/api/agui", json=resume_body("t", interrupt, payload))
        assert response.status_code == 400
        message = response.json()["message"]
        assert message.startswith("the edited arguments do not fit send_email: to")
        assert [r.id for r in await app.hub.approvals.pending()] == [interrupt]
        assert await app.hub.approvals.decision(interrupt) is None
        # twin: the same request with arguments that fit runs them
        payload = {"verdict": "edit", "arguments": {"to": "bob@example.com"}}
        response = await http.post("/api/agui", json=resume_body("t", interrupt, payload))
        assert response.status_code == 200
    assert outbox.sent == ["bob@example.com"]


async def test_a_new_conversation_is_named_after_its_first_message() -> None:
    app = make_app(Outbox())
    async with client(app) as http:

        async def create(title: object) -> str:
            response = await http.post("/api/threads", json={"title": title})
            assert response.status_code == 201
            return response.json()["id"]

        assert await create("Tell Ann <b>the</b> meeting is at 10!") == (
            "Tell Ann b the b meeting is at 10"
        )
        assert await create("Tell Ann <b>the</b> meeting is at 10!") == (
            "Tell Ann b the b meeting is at 10 2"
        )
        assert await create("") == "New conversation"
        assert await create(None) == "New conversation 2"
        assert await create("x" * 300) == "x" * 48
        long = "word " * 40
        assert len(await create(long)) <= 48


async def test_the_notices_tell_every_tab_what_changed() -> None:
    app = make_app(Outbox(), turns=["Hi."])
    async with client(app) as http:
        await http.post("/api/threads", json={"name": "alpha"})
        body = (await http.post("/api/agui", json=prompt_body("alpha", "hello"))).text
        run_id = frames(body)[0][1]["runId"]
        await http.patch("/api/threads/alpha", json={"name": "beta"})
        bad = await http.get("/api/updates?after=x")
        assert bad.status_code == 400
        assert bad.json()["message"] == "after='x' is not a notice number"
    kinds = [{k: v for k, v in n.items() if k != "n"} for n in app.hub.notices.items]
    assert kinds == [
        {"type": "threads"},
        {"type": "run", "threadId": "alpha", "runId": run_id, "active": True},
        {"type": "run", "threadId": "alpha", "runId": run_id, "active": False},
        {"type": "threads", "renamed": "alpha", "to": "beta"},
    ]


async def test_a_run_is_listed_with_its_conversation_before_anything_is_stored() -> None:
    """A page reloaded during the first model call finds the run and follows it."""
    model = GatedModel(["Slow answer."])
    app = make_app(Outbox(), model=model)
    async with client(app) as http:
        await http.post("/api/threads", json={"name": "alpha"})
        live = app.hub.start("alpha", "hello")
        async for frame in live.follow(None):  # until the model's first chunk, held there
            if frame is not None and frame.event["type"] == "TEXT_MESSAGE_CONTENT":
                break
        assert app.hub.store.list_runs(limit=10) == []
        info = (await http.get("/api/threads/alpha")).json()
        assert info["runs"] == [live.run_id]
        assert info["active"] == live.run_id
        model.release.set()
        await live.settled()
        info = (await http.get("/api/threads/alpha")).json()
        assert info["runs"] == [live.run_id]  # stored now, listed once
        assert info["active"] is None
