"""The ASGI application of `legato serve`: the page, the AG-UI endpoint and a small REST API.

Routes (every one behind `Guard`: allowed Host, no foreign Origin, the token):

- `GET /` the page; `GET /static/...` its script and style (shipped in the wheel).
- `POST /api/agui` an AG-UI `RunAgentInput`; the answer is the run's AG-UI events as SSE.
  With `resume[]` it applies approval decisions and continues the parked run.
- `GET /api/runs/{id}/events` the run's events again (`Last-Event-ID` resumes), following
  it while it runs; `POST /api/runs/{id}/cancel`; `GET /api/runs/{id}/journal`.
- `GET/POST /api/threads`, `GET/PATCH/DELETE /api/threads/{id}`,
  `POST /api/threads/{id}/fork`: conversations (stored sessions).
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from legato._version import __version__
from legato.exceptions import (
    ConversationBusy,
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    JournalError,
    LegatoError,
    RequestInvalid,
    SessionExists,
    SessionNotFound,
)
from legato.web._guard import Guard, loopback_hosts
from legato.web._hub import Frame, LiveRun, RunHub, parse_event_id

if TYPE_CHECKING:
    from legato.agent import Agent
    from legato.store import Store

__all__ = ["WebApp", "create_app"]

_NAME = re.compile(r"^[\w][\w .:@-]{0,99}$")
_STATIC = {
    **{
        f"{name}.js": "text/javascript"
        for name in (
            "core",
            "markdown",
            "timeline",
            "shell",
            "stream",
            "transcript",
            "approvals",
            "panels",
            "threads",
            "app",
        )
    },
    "app.css": "text/css",
}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    role: Literal["user", "assistant", "system", "developer", "tool", "activity", "reasoning"]
    content: str | list[dict[str, Any]] | None = None


class _Resume(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interruptId: str = Field(min_length=1)
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class _RunInput(BaseModel):
    """AG-UI's `RunAgentInput` (what legato reads of it)."""

    model_config = ConfigDict(extra="forbid")
    threadId: str
    runId: str
    messages: list[_Message]
    protocolVersion: str | None = None
    parentRunId: str | None = None
    state: Any = None
    tools: list[Any] = Field(default_factory=lambda: [])
    context: list[Any] = Field(default_factory=lambda: [])
    forwardedProps: Any = None
    resume: list[_Resume] | None = None


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        msg = (
            f"a conversation name must be 1-100 letters, digits, spaces or . : @ - _ "
            f"(starting with a letter or digit), not {name!r}"
        )
        raise RequestInvalid(msg)
    return name


def _prompt(messages: list[_Message]) -> str:
    if not messages or messages[-1].role != "user":
        msg = "the last message must be the user's (role 'user') for a new run"
        raise RequestInvalid(msg)
    content = messages[-1].content
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    if not content or not content.strip():
        msg = "the user's message is empty"
        raise RequestInvalid(msg)
    return content


def _error(exc: Exception) -> JSONResponse:
    status = 400
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return JSONResponse(
            {"error": "RequestInvalid", "message": f"{where}: {first['msg']}"}, status_code=422
        )
    if isinstance(exc, SessionNotFound | JournalError):
        status = 404
    elif isinstance(exc, ConversationBusy | DecisionAlreadyUsed | SessionExists):
        status = 409
    elif isinstance(exc, DecisionTokenInvalid):
        status = 410  # expired: the run asks again when resumed
    return JSONResponse({"error": type(exc).__name__, "message": str(exc)}, status_code=status)


async def _body(request: Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        msg = f"the request body is not JSON: {exc}"
        raise RequestInvalid(msg) from None
    if not isinstance(data, dict):
        msg = "the request body must be a JSON object"
        raise RequestInvalid(msg)
    return data  # pyright: ignore[reportUnknownVariableType]


def _sse(frames: AsyncIterator[Frame | None]) -> StreamingResponse:
    async def body() -> AsyncIterator[str]:
        async for frame in frames:
            if frame is None:
                yield ": keepalive\n\n"  # a comment: clients skip it, dead connections show
            else:
                yield f"id: {frame.id}\ndata: {json.dumps(frame.event)}\n\n"

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class WebApp:
    """The web UI for one agent, as an ASGI application (the `Guard` in front of its routes)."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        store: Store,
        token: str | None = None,
        port: int = 8000,
        hosts: set[str] | None = None,
        keepalive: float = 15.0,
    ) -> None:
        """Build the app; `hosts` are allowed `Host` values beside the loopback names.

        A quiet event stream gets a keepalive comment every `keepalive` seconds.
        """
        self.hub = RunHub(agent, store)
        self.keepalive = keepalive
        self.token = token or secrets.token_urlsafe(24)
        self.agent = agent
        routes = [
            Route("/", self.index),
            Route("/static/{name}", self.static),
            Route("/api/info", self.info),
            Route("/api/updates", self.updates),
            Route("/api/agui", self.agui, methods=["POST"]),
            Route("/api/threads", self.threads, methods=["GET", "POST"]),
            Route("/api/threads/{thread}", self.thread, methods=["GET", "PATCH", "DELETE"]),
            Route("/api/threads/{thread}/fork", self.fork, methods=["POST"]),
            Route("/api/runs/{run}/events", self.events),
            Route("/api/runs/{run}/cancel", self.cancel, methods=["POST"]),
            Route("/api/runs/{run}/journal", self.journal),
        ]
        self.starlette = Starlette(routes=routes, lifespan=self._lifespan)
        self.guard = Guard(app=self.starlette, token=self.token)
        self.allow(port, extra=hosts or set())

    def allow(self, port: int, *, extra: set[str] | None = None) -> None:
        """Allow the loopback `Host` names for `port` (and `extra` ones)."""
        self.guard.hosts = loopback_hosts(port) | (extra or set())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI entry point."""
        await self.guard(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncGenerator[None]:
        yield
        await self.hub.close()

    # -- the page ------------------------------------------------------------------------------

    async def index(self, _request: Request) -> Response:
        """The page."""
        html = resources.files("legato.web").joinpath("static/index.html").read_text("utf-8")
        return Response(html, media_type="text/html", headers=_page_headers())

    async def static(self, request: Request) -> Response:
        """The page's script and style."""
        name = request.path_params["name"]
        if name not in _STATIC:
            return JSONResponse({"error": "NotFound", "message": name}, status_code=404)
        text = resources.files("legato.web").joinpath(f"static/{name}").read_text("utf-8")
        return Response(text, media_type=_STATIC[name], headers=_page_headers())

    async def info(self, _request: Request) -> Response:
        """What the page shows in its header."""
        return JSONResponse(
            {
                "agent": self.agent.name,
                "model": self.agent.model.name,
                "version": __version__,
                "approvalDefault": self.hub.policy.default,
            }
        )

    # -- AG-UI ---------------------------------------------------------------------------------

    async def agui(self, request: Request) -> Response:
        """Start (or, with `resume[]`, continue) a run; stream its AG-UI events."""
        try:
            data = _RunInput.model_validate(await _body(request))
            thread = _check_name(data.threadId)
            live: LiveRun
            if data.resume:
                entries = [e.model_dump() for e in data.resume]
                live = await self.hub.resume(thread, entries)
                after = _last_of(live)  # the new segment only
            else:
                live = self.hub.start(thread, _prompt(data.messages))
                after = None
        except (LegatoError, ValidationError) as exc:
            return _error(exc)
        return _sse(live.follow(after, keepalive=self.keepalive))

    async def events(self, request: Request) -> Response:
        """The run's events after `Last-Event-ID` (or `?after=`), following a live run."""
        try:
            after = parse_event_id(
                request.headers.get("last-event-id") or request.query_params.get("after")
            )
            live = self.hub.get(request.path_params["run"])
        except LegatoError as exc:
            return _error(exc)
        return _sse(live.follow(after, keepalive=self.keepalive))

    async def updates(self, request: Request) -> Response:
        """Notices for every open tab (a run started or ended, the list changed) as SSE."""
        after = request.query_params.get("after", str(self.hub.notices.n))  # default: from now
        if not after.isdigit():
            return _error(RequestInvalid(f"after={after!r} is not a notice number"))
        notices = self.hub.notices.follow(int(after), keepalive=self.keepalive)

        async def body() -> AsyncIterator[str]:
            yield f'retry: 2000\nid: {int(after)}\ndata: {{"type": "hello"}}\n\n'
            async for item in notices:
                if item is None:
                    yield ": keepalive\n\n"
                else:
                    yield f"id: {item['n']}\ndata: {json.dumps(item)}\n\n"

        return StreamingResponse(
            body(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def cancel(self, request: Request) -> Response:
        """Cancel a run in progress (a disconnect never does)."""
        return JSONResponse({"cancelled": self.hub.cancel(request.path_params["run"])})

    async def journal(self, request: Request) -> Response:
        """The run's journal as JSON events (the journal viewer)."""
        try:
            journal = self.hub.journal(request.path_params["run"])
        except LegatoError as exc:
            return _error(exc)
        lines = [json.loads(line) for line in journal.to_jsonl().splitlines()]
        return JSONResponse({"runId": request.path_params["run"], "events": lines})

    # -- conversations -------------------------------------------------------------------------

    async def threads(self, request: Request) -> Response:
        """List conversations, or create one (`{"name": ...}`)."""
        store = self.hub.store
        try:
            if request.method == "POST":
                body = await _body(request)
                taken = {s.name for s in store.list_sessions()}
                if body.get("name"):
                    name = _check_name(body["name"])
                    if name in taken:
                        raise SessionExists(name)
                else:
                    name = _name_from(body.get("title"), taken)
                store.load_session(name, create=True)
                self.hub.notices.add(type="threads")
                return JSONResponse({"id": name}, status_code=201)
            items = [
                {
                    "id": s.name,
                    "updatedAt": s.updated_at,
                    "messages": s.messages,
                    "forkedFrom": s.forked_from,
                    "active": self.hub.active(s.name) is not None,
                    "pending": len(await self.hub.pending(s.name)),
                }
                for s in store.list_sessions()
            ]
            return JSONResponse({"threads": items})
        except LegatoError as exc:
            return _error(exc)

    async def thread(self, request: Request) -> Response:
        """A conversation's runs and pending approvals; rename (PATCH) or delete it."""
        store = self.hub.store
        name = request.path_params["thread"]
        try:
            if request.method == "GET":
                messages = store.load_session(name)
                active = self.hub.active(name)
                return JSONResponse(
                    {
                        "id": name,
                        "runs": self.hub.run_ids(name),
                        "active": active.run_id if active else None,
                        "pending": await self.hub.pending(name),
                        "messages": [{"role": m.role, "text": m.text} for m in messages],
                    }
                )
            if self.hub.active(name) is not None:
                msg = f"conversation {name!r} has a run in progress; cancel it or wait"
                raise ConversationBusy(msg)
            if request.method == "DELETE":
                store.delete_session(name)
                self.hub.notices.add(type="threads", deleted=name)
                return JSONResponse({"deleted": name})
            new_name = _check_name((await _body(request)).get("name"))
            store.rename_session(name, new_name)
            self.hub.notices.add(type="threads", renamed=name, to=new_name)
            return JSONResponse({"id": new_name})
        except LegatoError as exc:
            return _error(exc)

    async def fork(self, request: Request) -> Response:
        """Copy a conversation into a new one."""
        name = request.path_params["thread"]
        try:
            body = await _body(request)
            new_name = _check_name(body.get("name") or f"{name[:80]} fork {secrets.token_hex(2)}")
            info = self.hub.store.fork_session(name, new_name)
        except LegatoError as exc:
            return _error(exc)
        self.hub.notices.add(type="threads")
        return JSONResponse({"id": info.name, "forkedFrom": name}, status_code=201)


def _name_from(title: object, taken: set[str]) -> str:
    """A free conversation name from the first words of `title` (the first prompt)."""
    words = re.sub(r"[^\w .:@-]+", " ", title if isinstance(title, str) else "").split()
    base = ""
    for word in words:
        if len(base) + len(word) + 1 > 48:
            break
        base = f"{base} {word}".strip()
    if not base and words:
        base = words[0][:48]  # one long word
    base = base.lstrip(" .:@-") or "New conversation"
    name, n = base, 2
    while name in taken:
        name, n = f"{base} {n}", n + 1
    return name


def _last_of(live: LiveRun) -> tuple[int, int] | None:
    """The id of the last frame the run has (the new segment starts after it)."""
    if not live.frames:
        return None
    last = live.frames[-1]
    return last.seq, last.k


def _page_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": _CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def create_app(
    agent: Agent[Any],
    *,
    store: Store | None = None,
    token: str | None = None,
    port: int = 8000,
    hosts: set[str] | None = None,
    keepalive: float = 15.0,
) -> WebApp:
    """The web UI for `agent` as an ASGI app (see `legato.web.serve` to run it).

    Runs, conversations and approvals live in `store` (default: the agent's store, else
    a `SQLiteStore` at `.legato/legato.db`).
    """
    if store is None:
        from legato.store import SQLiteStore

        store = agent.store if agent.store is not None else SQLiteStore()
    return WebApp(agent, store=store, token=token, port=port, hosts=hosts, keepalive=keepalive)
