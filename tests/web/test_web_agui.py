"""AG-UI conformance of the event stream, and streams that outlive their connection."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_support import (
    TOKEN,
    GatedModel,
    Outbox,
    client,
    email_script,
    frames,
    make_app,
    prompt_body,
    resume_body,
    running,
    state_and_subagent_agent,
)

from legato.events import (
    Lineage,
    SpawnFinished,
    SpawnStarted,
    StateChange,
    StateCommitted,
    StateLoaded,
)
from legato.store import SQLiteStore
from legato.web import AguiMapper, create_app, journal_to_agui

ag_ui = pytest.importorskip("ag_ui.core", reason="ag-ui-protocol (the dev extra) validates frames")


def _validate(events: list[dict[str, Any]], *, earlier: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment] # a tuple default
    """Every event is a valid AG-UI event, and the order rules hold within each segment.

    `earlier` are the events of the run's previous segments (a resumed run reports the
    results of calls announced before it parked).
    """
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(ag_ui.Event)
    for event in events:
        adapter.validate_python(event)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    open_runs = 0
    text: dict[str, str] = {}
    tools: dict[tuple[str, str], str] = {
        (e.get("subagentRunId", ""), e["toolCallId"]): "ended"
        for e in earlier
        if e["type"] == "TOOL_CALL_END"
    }
    for event in events:
        kind = event["type"]
        if kind == "RUN_STARTED":
            assert open_runs == 0, "a run started inside a run"
            open_runs = 1
            continue
        assert open_runs == 1, f"{kind} outside a run"
        if kind in ("RUN_FINISHED", "RUN_ERROR"):
            assert not [m for m, state in text.items() if state == "open"]
            open_runs = 0
        elif kind == "TEXT_MESSAGE_START":
            assert text.get(event["messageId"]) != "open"
            text[event["messageId"]] = "open"
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert text.get(event["messageId"]) == "open"
            if kind == "TEXT_MESSAGE_END":
                text[event["messageId"]] = "closed"
        elif kind.startswith("TOOL_CALL"):
            call = (event.get("subagentRunId", ""), event["toolCallId"])
            if kind == "TOOL_CALL_START":
                tools[call] = "open"
            elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
                assert tools[call] == "open"
                if kind == "TOOL_CALL_END":
                    tools[call] = "ended"
            elif kind == "TOOL_CALL_RESULT":
                assert tools[call] == "ended"
    assert open_runs == 0, "the last run never ended"


def _view(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client shows: text per message, arguments and results per tool call."""
    text: dict[str, str] = defaultdict(str)
    args: dict[str, str] = defaultdict(str)
    results: dict[str, str] = {}
    for event in events:
        if event["type"] == "TEXT_MESSAGE_START":
            text[event["messageId"]] = ""
        elif event["type"] == "TEXT_MESSAGE_CONTENT":
            text[event["messageId"]] += event["delta"]
        elif event["type"] == "TOOL_CALL_START":
            args[event["toolCallId"]] = ""
        elif event["type"] == "TOOL_CALL_ARGS":
            args[event["toolCallId"]] += event["delta"]
        elif event["type"] == "TOOL_CALL_RESULT":
            results[event["toolCallId"]] = event["content"]
    return {"text": dict(text), "args": dict(args), "results": results}


async def test_a_parked_and_resumed_run_is_valid_agui_and_matches_its_journal() -> None:
    outbox = Outbox()
    app = make_app(outbox)
    async with client(app) as http:
        first = frames((await http.post("/api/agui", json=prompt_body("t", "Mail Ann"))).text)
        parked = [e for _, e in first]
        _validate(parked)
        outcome = parked[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        run_id = parked[0]["runId"]
        journal = app.hub.journal(run_id)
        asked = [e for e in journal if e.kind == "approval_requested"]
        assert [interrupt["id"]] == [e.request_id for e in asked]
        assert interrupt["toolCallId"] == asked[0].call.id
        # concatenated ARGS parse to the journaled arguments
        view = _view(parked)
        assert json.loads(view["args"][asked[0].call.id]) == asked[0].call.arguments
        # the card is announced while the model is still writing the call (before the
        # journaled response that ends it)
        seq = {e["type"]: int(i.split(".")[0]) for i, e in first if e["type"].startswith("TOOL")}
        assert seq["TOOL_CALL_START"] < seq["TOOL_CALL_END"]

        second = frames(
            (
                await http.post(
                    "/api/agui", json=resume_body("t", interrupt["id"], {"verdict": "approve"})
                )
            ).text
        )
        resumed = [e for _, e in second]
        _validate(resumed, earlier=parked)
        assert resumed[-1]["outcome"] == {"type": "success"}
        assert resumed[-1]["result"] == "Done: the email to Ann went out."

        # ids: strictly increasing, and the last journaled sequence is the journal's length
        ids = [tuple(int(p) for p in i.split(".")) for i, _ in first + second]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)
        journal = app.hub.journal(run_id)
        assert ids[-1][0] == len(journal)

        # the stream rebuilt from the journal alone shows the same conversation
        live_view = _view(parked + resumed)
        replayed = journal_to_agui("t", run_id, journal)
        _validate(replayed)
        assert _view(replayed) == live_view
        assert outbox.sent == ["ann@example.com"]


def test_state_and_sub_agent_events_map_to_valid_agui_events() -> None:
    from pydantic import TypeAdapter

    mapper = AguiMapper(thread_id="t", run_id="r")
    lineage = Lineage(
        run_id="child-1", parent_run_id="r", parent_step=1, parent_call_id="c1", agent="researcher"
    )
    grandchild = Lineage(
        run_id="child-2",
        parent_run_id="child-1",
        parent_step=1,
        parent_call_id="c2",
        agent="reader",
        depth=2,
    )
    from legato.events import ChildEvent

    events = [
        StateLoaded(version=0, values={"balance": 10, "a/b": None}),
        StateCommitted(
            version=1,
            changes=(
                StateChange(key="balance", old=10, new=7),
                StateChange(key="a/b", old=None, new=1),
            ),
            tool="pay",
            call_id="c0",
        ),
        SpawnStarted(lineage=lineage, task="find the paper"),
        ChildEvent(lineage=lineage, event=SpawnStarted(lineage=grandchild, task="read it")),
        SpawnFinished(lineage=lineage, outcome="timeout", error="took too long"),
    ]
    out = [e for event in events for e in mapper.feed(event)]
    adapter: TypeAdapter[Any] = TypeAdapter(ag_ui.Event)
    for event in out:
        adapter.validate_python(event)
    kinds = [e["type"] for e in out]
    assert kinds == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "CUSTOM",
        "SUBAGENT_STARTED",
        "SUBAGENT_STARTED",
        "SUBAGENT_ERROR",
    ]
    assert out[2]["delta"] == [
        {"op": "add", "path": "/balance", "value": 7},
        {"op": "add", "path": "/a~1b", "value": 1},  # RFC 6901 escaping
    ]
    assert out[3]["value"]["version"] == 1
    assert out[5]["parentSubagentRunId"] == "child-1"
    assert out[4]["parentToolCallId"] == "c1"
    assert out[6]["code"] == "timeout"


# -- streams and approvals outlive the connection ----------------------------------------------------


def _read_until(lines: Any, stop: str) -> list[tuple[str, dict[str, Any]]]:
    got: list[tuple[str, dict[str, Any]]] = []
    block: list[str] = []
    for line in lines:
        if line:
            block.append(line)
            continue
        got.extend(frames("\n".join(block)))
        block = []
        if got and got[-1][1]["type"] == stop:
            return got
    return got


def test_a_dropped_stream_resumes_from_last_event_id_and_decides_nothing() -> None:
    outbox = Outbox()
    model = GatedModel(email_script())
    holder: dict[str, Any] = {}

    def factory(port: int) -> Any:
        app = make_app(outbox, model=model)
        app.allow(port)
        holder["app"] = app
        return app

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with running(factory) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        with http.stream("POST", "/api/agui", json=prompt_body("t", "Mail Ann")) as response:
            lines = response.iter_lines()
            before = _read_until(lines, "TEXT_MESSAGE_CONTENT")  # the user's message
            before += _read_until(lines, "TEXT_MESSAGE_CONTENT")  # the model's first chunk
            assert before[-1][1]["delta"] == "I will"
        # the connection is gone mid-answer; the run is not
        run_id = before[0][1]["runId"]
        model.release.set()
        last = before[-1][0]
        with http.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": last}
        ) as response:
            after = _read_until(response.iter_lines(), "RUN_FINISHED")
        everything = frames(http.get(f"/api/runs/{run_id}/events").text)
        assert [i for i, _ in before + after] == [i for i, _ in everything]  # no gap, no repeat
        events = [e for _, e in before + after]
        _validate(events)
        assert _view(events)["text"][f"{run_id}:m1"] == "I will send the email to Ann now."
        assert events[-1]["outcome"]["type"] == "interrupt"  # parked, not decided
        pending = http.get("/api/threads/t").json()["pending"]
        assert len(pending) == 1
        assert outbox.sent == []
        # a reconnect with an id that is not ours is a clear error
        bad = http.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"})
        assert bad.status_code == 400


def test_stop_cancels_the_run_through_its_fence() -> None:
    outbox = Outbox()
    model = GatedModel(email_script())

    def factory(port: int) -> Any:
        app = make_app(outbox, model=model)
        app.allow(port)
        return app

    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with running(factory) as server, httpx.Client(base_url=server.url, headers=auth) as http:
            with http.stream("POST", "/api/agui", json=prompt_body("t", "Mail Ann")) as response:
                lines = response.iter_lines()
                before = _read_until(lines, "TEXT_MESSAGE_CONTENT")  # the user's message
                before += _read_until(lines, "TEXT_MESSAGE_CONTENT")  # the model's first chunk
                run_id = before[0][1]["runId"]
                busy = http.post("/api/agui", json=prompt_body("t", "again"))
                assert busy.status_code == 409  # one run at a time per conversation
                assert http.post(f"/api/runs/{run_id}/cancel").json() == {"cancelled": True}
                rest = _read_until(lines, "RUN_FINISHED")
            end = rest[-1][1]
            assert end["outcome"] == {"type": "cancelled"}
            journal = [
                json.dumps(e) for e in http.get(f"/api/runs/{run_id}/journal").json()["events"]
            ]
            assert any('"cancel_requested"' in line for line in journal)
            assert http.post(f"/api/runs/{run_id}/cancel").json() == {"cancelled": False}
            model.release.set()  # frees the model's waiting thread before the server stops
    finally:
        model.release.set()
    assert outbox.sent == []


def test_an_approval_sent_as_soon_as_the_interrupt_arrives_is_accepted() -> None:
    """The client may decide before the parked run's stream has closed."""
    outbox = Outbox()

    def factory(port: int) -> Any:
        app = make_app(outbox)
        app.allow(port)
        return app

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with running(factory) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        with http.stream("POST", "/api/agui", json=prompt_body("t", "Mail Ann")) as response:
            got = _read_until(response.iter_lines(), "RUN_FINISHED")
            interrupt = got[-1][1]["outcome"]["interrupts"][0]["id"]
            done = http.post("/api/agui", json=resume_body("t", interrupt, {"verdict": "approve"}))
        assert done.status_code == 200, done.text
        assert frames(done.text)[-1][1]["outcome"] == {"type": "success"}
    assert outbox.sent == ["ann@example.com"]


async def test_runs_the_hub_let_go_of_are_replayed_from_their_journals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import legato.web._hub as hub_module

    monkeypatch.setattr(hub_module, "_KEEP", 0)
    app = make_app(Outbox(), turns=["One.", "Two."])
    async with client(app) as http:
        first = frames((await http.post("/api/agui", json=prompt_body("t", "1"))).text)
        await http.post("/api/agui", json=prompt_body("t", "2"))
        run_id = first[0][1]["runId"]
        assert run_id not in app.hub._runs  # let go of
        again = frames((await http.get(f"/api/runs/{run_id}/events")).text)
        assert _view([e for _, e in again]) == _view([e for _, e in first])
        assert [i for i, _ in again][-1] == [i for i, _ in first][-1]
        # a client that saw the first events resumes from the journal after them
        seen = [f for f in first if int(f[0].split(".")[0]) <= 2]
        rest = frames(
            (
                await http.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": seen[-1][0]})
            ).text
        )
        assert [e for _, e in seen + rest] == [e for _, e in again]


async def test_a_sub_agents_text_and_calls_stream_tagged_with_its_run() -> None:
    app = create_app(
        state_and_subagent_agent(), store=SQLiteStore(":memory:"), token=TOKEN, port=8765
    )
    async with client(app) as http:
        body = (await http.post("/api/agui", json=prompt_body("t", "Count and research."))).text
    events = [e for _, e in frames(body)]
    _validate(events)
    started = next(e for e in events if e["type"] == "SUBAGENT_STARTED")
    child = [
        e
        for e in events
        if e.get("subagentRunId") == started["subagentRunId"]
        and not e["type"].startswith("SUBAGENT_")
    ]
    said = "".join(e["delta"] for e in child if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == "Found it: page 4."
    assert events.index(child[-1]) < events.index(
        next(e for e in events if e["type"] == "SUBAGENT_FINISHED")
    )
    # the parent's own messages carry no sub-agent tag
    parent_text = [
        e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT" and "subagentRunId" not in e
    ]
    assert "".join(e["delta"] for e in parent_text).endswith("Counted and researched.")


def test_a_quiet_stream_gets_keepalive_comments() -> None:
    """While the model is silent, the stream still carries bytes: a half-open connection
    is noticed (the page gives up after 45 s of silence and resumes from its last id)."""
    outbox = Outbox()
    model = GatedModel(email_script())

    def factory(port: int) -> Any:
        app = make_app(outbox, model=model, keepalive=0.05)
        app.allow(port)
        return app

    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with running(factory) as server, httpx.Client(base_url=server.url, headers=auth) as http:
            with http.stream("POST", "/api/agui", json=prompt_body("t", "Mail Ann")) as response:
                lines = response.iter_lines()
                got = _read_until(lines, "TEXT_MESSAGE_CONTENT")  # the user's message
                assert got[-1][1]["delta"] == "Mail Ann"
                got = _read_until(lines, "TEXT_MESSAGE_CONTENT")  # the model's first chunk
                assert got[-1][1]["delta"] == "I will"  # ... and then it holds
                quiet = next(line for line in lines if line)
                assert quiet == ": keepalive"
                model.release.set()
                rest = _read_until(lines, "RUN_FINISHED")
            assert rest[-1][1]["outcome"]["type"] == "interrupt"
    finally:
        model.release.set()


async def test_a_cancelled_run_replays_from_its_journal_with_an_end(tmp_path: Path) -> None:
    """A cancelled journal has no terminal event; its replay still ends, so a page that
    reopens it does not wait for more."""
    outbox = Outbox()
    model = GatedModel(email_script())
    path = tmp_path / "legato.db"
    app = make_app(outbox, model=model, store=SQLiteStore(path))
    try:
        live = app.hub.start("t", "Mail Ann")
        async for frame in live.follow(None):
            if frame is not None and frame.event.get("delta") == "I will":
                break
        assert app.hub.cancel(live.run_id)
        await live.settled()
    finally:
        model.release.set()
    restarted = make_app(outbox, store=SQLiteStore(path))
    async with client(restarted) as http:
        replay = [e for _, e in frames((await http.get(f"/api/runs/{live.run_id}/events")).text)]
    _validate(replay)
    assert replay[-1]["outcome"] == {"type": "cancelled"}
    assert outbox.sent == []
