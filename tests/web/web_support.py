"""Shared pieces of the web tests: a scripted agent with a side-effecting tool, an SSE
reader, a server on 127.0.0.1 in a thread."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from legato import Agent, RunContext, tool
from legato.contracts import State
from legato.models import ModelProfile, ModelRequest, ModelStreamEvent, TextDelta
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, ScriptedTurn, call, reply
from legato.web import WebApp, create_app
from legato.web._serve import bind

TOKEN = "test-token-0123456789"
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"


@dataclass
class Outbox:
    """Counts the effects of `send_email`, outside the framework."""

    sent: list[str] = field(default_factory=lambda: [])


def email_tool(outbox: Outbox) -> Any:
    @tool(side_effects="irreversible")
    def send_email(to: str, body: str = "hello") -> str:
        """Send an email.

        Args:
            to: The recipient.
            body: The text.
        """
        outbox.sent.append(to)
        return f"sent to {to}"

    return send_email


def email_script() -> list[ScriptedTurn]:
    return [
        reply(
            "I will send the email to Ann now.",
            call("send_email", {"to": "ann@example.com", "body": "See you at 10."}),
            cost=0.0005,
        ),
        reply("Done: the email to Ann went out.", cost=0.0007),
    ]


class GatedModel:
    """A scripted model whose first answer stops after its first text chunk until released.

    It proves streaming: the page shows the first chunk while the answer is unfinished.
    """

    def __init__(self, turns: Sequence[ScriptedTurn]) -> None:
        self.inner = ScriptedModel(turns, chunk_size=6)
        self.release = threading.Event()

    @property
    def name(self) -> str:
        return "test:gated"

    @property
    def profile(self) -> ModelProfile:
        return self.inner.profile

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        first = True
        async for event in self.inner.stream(request):
            yield event
            if first and isinstance(event, TextDelta):
                first = False
                await asyncio.to_thread(self.release.wait, 60)


def make_app(
    outbox: Outbox,
    *,
    turns: Sequence[ScriptedTurn] | None = None,
    store: SQLiteStore | None = None,
    model: Any = None,
    keepalive: float = 15.0,
) -> WebApp:
    agent = Agent(
        model or ScriptedModel(list(turns if turns is not None else email_script())),
        tools=[email_tool(outbox)],
    )
    return create_app(
        agent,
        store=store or SQLiteStore(":memory:"),
        token=TOKEN,
        port=PORT,
        keepalive=keepalive,
    )


def client(app: WebApp, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=BASE,
        headers={"Authorization": f"Bearer {TOKEN}", **headers},
    )


def frames(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(id, event) for every SSE frame of a body."""
    out: list[tuple[str, dict[str, Any]]] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            key, _, value = line.partition(": ")
            fields[key] = value
        out.append((fields["id"], json.loads(fields["data"])))
    return out


def prompt_body(thread: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": "r-1",
        "messages": [{"id": "m-1", "role": "user", "content": text}],
    }


def resume_body(thread: str, interrupt: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": "r-2",
        "messages": [],
        "resume": [{"interruptId": interrupt, "status": "resolved", "payload": payload}],
    }


@dataclass
class Server:
    """A uvicorn server on 127.0.0.1 in a thread of the test process."""

    app: WebApp
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def running(app_factory: Any) -> Generator[Server]:
    """Start `app_factory(port)` on a free loopback port; stop it afterwards."""
    import uvicorn

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app: WebApp = app_factory(port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                msg = "the server thread died before it started"
                raise RuntimeError(msg)
            threading.Event().wait(0.02)
        yield Server(app=app, port=port)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def state_and_subagent_agent() -> Any:
    """A parent with a typed state, a tool that commits to it, and a sub-agent."""

    def added(old: Any, new: Any, args: Mapping[str, Any], result: Any) -> bool:
        return bool(new["count"] == old["count"] + args["by"])

    @tool(writes=["count"], ensures=added)
    def increment(ctx: RunContext, by: int) -> str:
        """Add to the counter.

        Args:
            by: How much.
        """
        state = ctx.state
        assert state is not None
        state["count"] = state["count"] + by
        return f"count is {state['count']}"

    child = Agent(ScriptedModel(["Found it: page 4."]), name="researcher")
    script = [
        reply(call("increment", {"by": 2}), call("researcher", {"task": "find the page"})),
        "Counted and researched.",
    ]
    return Agent(
        ScriptedModel(script),
        tools=[increment, child.as_tool(name="researcher", description="Finds things.")],
        state=State.typed(count=(int, 0)),
    )


# -- the browser tests' pieces ---------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs"
AXE = Path(__file__).resolve().parents[2] / ".web-node" / "node_modules" / "axe-core" / "axe.min.js"
LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


def shot(name: str, *, docs: bool = False) -> str:
    """Where a screenshot goes: docs/ for one the docs show (`docs`) when LEGATO_SCREENSHOTS
    is set (`make screenshots`), else the temporary folder, so a test run never changes
    tracked files. The docs' pictures come from runs of the real local model
    (test_quickstart.py, test_local_page.py); the scripted tests' stay in the temporary folder."""
    wanted = docs and os.environ.get("LEGATO_SCREENSHOTS")
    folder = DOCS if wanted else Path(tempfile.gettempdir())
    return str(folder / name)


def browser_or_skip() -> str:
    """The system's chromium, or a skip (a failure in CI) naming what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    missing: list[str] = []
    if chromium is None:
        missing.append("the `chromium` package (apt-get install chromium; `make test` does)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright (the `dev` extra)")
    if missing:
        skip_or_fail("browser test needs " + " and ".join(missing))
    assert chromium is not None
    return chromium


def skip_or_fail(reason: str) -> None:
    """Skip the test, except in CI where what it needs must be there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: in CI it must run")
    pytest.skip(reason)


class Guarded:
    """Every request of a browser context, and those that tried to leave loopback."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.blocked: list[str] = []

    def attach(self, context: Any) -> None:
        def route(route: Any) -> None:
            url: str = route.request.url
            self.requests.append(url)
            host = urlsplit(url).hostname or ""
            if urlsplit(url).scheme in ("data", "blob") or host in LOOPBACK:
                route.continue_()
            else:
                self.blocked.append(url)
                route.abort()

        context.route("**/*", route)


def off_loop(coro: Any) -> Any:
    """Run a coroutine on a thread of its own (Playwright's sync API holds this one's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(60)
