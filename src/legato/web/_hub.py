"""Runs that outlive the connections watching them.

A `RunHub` starts each run as a task of the server, not of the request: a browser that
closes its tab stops reading, the run goes on, and every AG-UI event it produced is kept
with an id (`<journal sequence>.<k>`). A reconnecting client asks for the events after
the last id it saw (`Last-Event-ID`); a run the hub no longer holds (the server was
restarted) is replayed from its journal in the store.

Approvals are never decided by a connection: side-effecting calls park the run
(`Parked`), the pending request waits in the approval store, and only an explicit
decision (`resume[]` in an AG-UI request) continues it. A closed tab leaves the request
pending; only its time-to-live expires it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from legato.approvals import (
    ApprovalPolicy,
    ApprovalStore,
    Decision,
    Edit,
    MemoryApprovalStore,
    Reject,
    SQLiteApprovalStore,
    decision_from_json,
)
from legato.events import (
    Journal,
    Parked,
    RunFailed,
    RunFinished,
    RunStarted,
    is_journal_event,
)
from legato.exceptions import (
    ConversationBusy,
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    JournalError,
    RequestInvalid,
    RunCancelled,
    RunParked,
    ToolArgumentsInvalid,
)
from legato.web._agui import AguiEvent, AguiMapper

if TYPE_CHECKING:
    from legato.agent import Agent
    from legato.run import RunHandle
    from legato.store import Store
    from legato.tools import Tool

__all__ = ["Frame", "LiveRun", "Notices", "RunHub", "parse_event_id"]

_KEEP = 256
"""Finished runs kept in memory; older ones are replayed from their journals when asked."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One AG-UI event with its id: after journal event `seq`, the `k`-th event sent."""

    seq: int
    k: int
    event: AguiEvent

    @property
    def id(self) -> str:
        """The SSE id, `<seq>.<k>`."""
        return f"{self.seq}.{self.k}"


def parse_event_id(text: str | None) -> tuple[int, int] | None:
    """`(seq, k)` from a `Last-Event-ID`; `RequestInvalid` when it is not one of ours."""
    if text is None or not text.strip():
        return None
    seq, _, k = text.strip().partition(".")
    if not seq.isdigit() or not (k.isdigit() or k == ""):
        msg = f"Last-Event-ID {text!r} is not an event id of this server (expected '<seq>.<k>')"
        raise RequestInvalid(msg)
    return int(seq), int(k) if k else -1


@dataclass(kw_only=True)
class LiveRun:
    """A run the hub holds: its AG-UI events so far, and whether it is still going."""

    run_id: str
    thread_id: str
    mapper: AguiMapper
    frames: list[Frame] = field(default_factory=lambda: [])
    seq: int = 0
    """Journal events seen so far."""
    done: bool = True
    parked_ids: tuple[str, ...] = ()
    """The approval requests the run's last segment parked on (a child's included)."""
    _k: int = field(default=0, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    handle: RunHandle[Any] | None = None

    def push(self, events: Sequence[AguiEvent], *, journaled: bool) -> None:
        """Record the AG-UI events of one legato event and wake the readers."""
        if journaled:
            self.seq += 1
            self._k = 0
        for event in events:
            self.frames.append(Frame(self.seq, self._k, event))
            self._k += 1
        self._notify()

    def _notify(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    def parked(self) -> bool:
        """Whether the last event sent ends the segment with an interrupt."""
        if not self.frames:
            return False
        event = self.frames[-1].event
        return event["type"] == "RUN_FINISHED" and event["outcome"]["type"] == "interrupt"

    async def settled(self) -> None:
        """Wait until the current segment has ended."""
        while not self.done:
            await self._wake.wait()

    def finish(self) -> None:
        """The current segment of the run ended (finished, failed, parked or cancelled)."""
        self.done = True
        self._notify()

    async def follow(
        self, after: tuple[int, int] | None, *, keepalive: float | None = None
    ) -> AsyncIterator[Frame | None]:
        """The frames after `after`, then new ones as they come, until the run stops.

        With `keepalive`, a None is yielded after that many quiet seconds (the SSE layer
        sends a comment), so a connection that died half-open is noticed by both ends.
        """
        index = 0
        while index < len(self.frames) and after is not None:
            frame = self.frames[index]
            if (frame.seq, frame.k) > after:
                break
            index += 1
        while True:
            wake = self._wake
            while index < len(self.frames):
                yield self.frames[index]
                index += 1
            if self.done:
                return
            try:
                await asyncio.wait_for(wake.wait(), keepalive)
            except TimeoutError:
                yield None


@dataclass(kw_only=True)
class Notices:
    """What changed on the server, for every open tab: a run started or ended, the list changed.

    Each notice is a small JSON object with an increasing `n`; a tab follows them over
    `GET /api/updates` and fetches what it shows again (`?after=n` resumes).
    """

    items: list[dict[str, Any]] = field(default_factory=lambda: [])
    n: int = 0
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, **notice: Any) -> None:
        """Record a notice and wake the tabs following them."""
        self.n += 1
        self.items.append({"n": self.n, **notice})
        del self.items[: max(0, len(self.items) - _KEEP)]
        self._wake.set()
        self._wake = asyncio.Event()

    async def follow(self, after: int, *, keepalive: float) -> AsyncIterator[dict[str, Any] | None]:
        """The notices after `after`, then new ones; None after `keepalive` quiet seconds."""
        while True:
            wake = self._wake
            for item in [i for i in self.items if i["n"] > after]:
                after = item["n"]
                yield item
            try:
                await asyncio.wait_for(wake.wait(), keepalive)
            except TimeoutError:
                yield None


def approval_store_for(store: Store) -> ApprovalStore:
    """The approval store kept beside the run store (in memory for other stores)."""
    from legato.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return SQLiteApprovalStore(store)
    return MemoryApprovalStore()


class RunHub:
    """Starts, resumes, cancels and replays the runs of one agent for the web UI."""

    def __init__(self, agent: Agent[Any], store: Store) -> None:
        self.agent = agent
        self.store = store
        agent.store = store  # runs and sessions of the UI live in this store
        approvals = approval_store_for(store)
        base = agent.approvals or ApprovalPolicy(default="ask")
        # no handler: an `ask` parks the run; a person decides through the store
        self.policy = replace(base, handler=None, store=approvals, wait=0.0)
        self.approvals = approvals
        self._runs: dict[str, LiveRun] = {}
        self.notices = Notices()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- conversations -------------------------------------------------------------------------

    def active(self, thread_id: str) -> LiveRun | None:
        """The run of the conversation that is going on now, if any."""
        for live in self._runs.values():
            if live.thread_id == thread_id and not live.done:
                return live
        return None

    def run_ids(self, thread_id: str) -> list[str]:
        """The conversation's runs, oldest first (the one going on included, stored or not yet)."""
        ids = [r.run_id for r in reversed(self.store.list_runs(session=thread_id, limit=1000))]
        active = self.active(thread_id)
        if active is not None and active.run_id not in ids:
            ids.append(active.run_id)  # nothing is stored until its first model call ends
        return ids

    def parked(self, thread_id: str) -> dict[str, str]:
        """Request id -> the conversation's run parked on it (a child's requests included)."""
        out: dict[str, str] = {}
        for run_id in self.run_ids(thread_id):
            live = self._runs.get(run_id) or self._restore(thread_id, run_id)
            out.update(dict.fromkeys(live.parked_ids, run_id))
        return out

    async def pending(self, thread_id: str) -> list[dict[str, Any]]:
        """Approval requests of the conversation waiting for a decision (without tokens)."""
        parked = self.parked(thread_id)
        return [
            {
                "id": r.id,
                "runId": parked[r.id],
                "subagentRunId": r.run_id if r.run_id != parked[r.id] else None,
                "toolCallId": r.call_id,
                "tool": r.tool,
                "arguments": r.arguments,
                "rule": r.rule,
                "expiresAt": r.expires_at,
            }
            for r in await self.approvals.pending()
            if r.id in parked
        ]

    # -- runs ----------------------------------------------------------------------------------

    def start(self, thread_id: str, prompt: str) -> LiveRun:
        """Start a run of the conversation on `prompt` (`ConversationBusy` if one is going)."""
        if self.active(thread_id) is not None:
            msg = f"conversation {thread_id!r} has a run in progress; cancel it or wait"
            raise ConversationBusy(msg)
        handle = self.agent.start(prompt, session=thread_id, approvals=self.policy)
        live = LiveRun(
            run_id=handle.run_id,
            thread_id=thread_id,
            mapper=AguiMapper(thread_id=thread_id, run_id=handle.run_id),
        )
        self._runs[live.run_id] = live
        self._drive(live, handle, resumed=0)
        return live

    async def resume(self, thread_id: str, entries: Sequence[dict[str, Any]]) -> LiveRun:
        """Apply the decisions of `resume[]` and continue the run they belong to.

        Every entry is checked before any is applied, so a malformed request decides
        nothing. `RequestInvalid` for an unknown request or another conversation's;
        `DecisionAlreadyUsed` when it was decided already.
        """
        decisions: list[tuple[str, str, Decision]] = []
        run_id: str | None = None
        parked = self.parked(thread_id)
        for entry in entries:
            request = await self.approvals.get(entry["interruptId"])
            if request is not None and request.id not in parked:
                if await self.approvals.decision(request.id) is not None:
                    msg = f"request {request.id!r} was already decided; a decision is used once"
                    raise DecisionAlreadyUsed(msg)
            if request is None or request.id not in parked:
                msg = f"no approval request {entry['interruptId']!r} in conversation {thread_id!r}"
                raise RequestInvalid(msg)
            if run_id is not None and parked[request.id] != run_id:
                msg = "resume[] entries must belong to one run"
                raise RequestInvalid(msg)
            run_id = parked[request.id]
            decision = _decision(entry)
            if isinstance(decision, Edit):
                self._check_edit(request.tool, decision)
            decisions.append((request.id, request.token, decision))
        if run_id is None:
            msg = "resume[] is empty"
            raise RequestInvalid(msg)
        going = self.active(thread_id)
        if going is not None and going.run_id == run_id and going.parked():
            await going.settled()  # it has parked: only its last bookkeeping is left
        if self.active(thread_id) is not None:
            msg = f"conversation {thread_id!r} has a run in progress; cancel it or wait"
            raise ConversationBusy(msg)
        for request_id, token, decision in decisions:
            await self.approvals.decide(request_id, token, decision)
        live = self._runs.get(run_id) or self._restore(thread_id, run_id)
        stored = len(self.store.load_run(run_id))
        # the resumed run saves itself and continues its session; it streams its stored
        # events again first, which the conversation has already seen
        handle = self.agent.start_resumed(run_id, approvals=self.policy)
        self._drive(live, handle, resumed=stored)
        return live

    def _check_edit(self, tool_name: str, edit: Edit) -> None:
        """`RequestInvalid` when a person's edited arguments do not fit the tool's schema.

        They go back to the person who wrote them (the request stays pending), never to
        the model, as the terminal chat does.
        """
        tool = _find_tool(self.agent, tool_name)
        if tool is None:
            return
        try:
            tool.validate(edit.arguments)
        except ToolArgumentsInvalid as exc:
            problems = "; ".join(exc.problems)
            msg = f"the edited arguments do not fit {tool_name}: {problems} (nothing was sent)"
            raise RequestInvalid(msg) from None

    def cancel(self, run_id: str) -> bool:
        """Cancel a run in progress through its fence; False if it is not running."""
        live = self._runs.get(run_id)
        if live is None or live.done or live.handle is None:
            return False
        return live.handle.cancel("cancelled from the web UI")

    def get(self, run_id: str) -> LiveRun:
        """The run (restored from its journal if the hub does not hold it)."""
        live = self._runs.get(run_id)
        if live is not None:
            return live
        journal = self.store.load_run(run_id)  # JournalError if unknown
        first = journal.events[0] if len(journal) else None
        if not isinstance(first, RunStarted):
            msg = f"run {run_id!r} has no journal"
            raise JournalError(msg)
        info = next((r for r in self.store.list_runs(limit=1000) if r.run_id == run_id), None)
        return self._restore(info.session if info and info.session else "", run_id)

    def _restore(self, thread_id: str, run_id: str) -> LiveRun:
        """A finished segment of a run, rebuilt from its stored journal."""
        live = LiveRun(
            run_id=run_id,
            thread_id=thread_id,
            mapper=AguiMapper(thread_id=thread_id, run_id=run_id),
        )
        journal = self.store.load_run(run_id)
        for event in journal:
            if isinstance(event, Parked):
                live.parked_ids = event.request_ids
            live.push(live.mapper.feed(event), journaled=True)
        last = journal.events[-1] if len(journal) else None
        if not isinstance(last, RunFinished | RunFailed | Parked):
            # cancelled, or the server stopped mid-run: no run of this hub is driving it
            reason = "the run was stopped before it ended (cancelled, or the server stopped)"
            live.push(live.mapper.cancelled(reason), journaled=False)
        self._runs[run_id] = live
        return live

    def _drive(self, live: LiveRun, handle: RunHandle[Any], *, resumed: int) -> None:
        """Pump the run's events into `live`; `resumed` journal events were seen before."""
        live.done = False
        live.parked_ids = ()
        live.handle = handle
        self.notices.add(type="run", threadId=live.thread_id, runId=live.run_id, active=True)
        task = asyncio.get_running_loop().create_task(
            self._pump(live, handle, resumed=resumed), name=f"legato-web-{live.run_id[:8]}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self, live: LiveRun, handle: RunHandle[Any], *, resumed: int) -> None:
        skip = resumed  # a resumed run streams its journal again first: shown already
        try:
            async for event in handle.events():
                if skip and is_journal_event(event):
                    skip -= 1
                    continue
                if isinstance(event, Parked):
                    live.parked_ids = event.request_ids
                live.push(live.mapper.feed(event), journaled=is_journal_event(event))
        except RunParked:
            pass  # the journal's Parked event became the interrupt outcome
        except Exception as exc:  # the run failed or was cancelled: end the stream with it
            events = handle.journal.events  # unless its journal's last event already did
            if not events or not isinstance(events[-1], RunFailed | RunFinished):
                end = isinstance(exc, RunCancelled)
                live.push(
                    live.mapper.cancelled(str(exc)) if end else live.mapper.failed(exc),
                    journaled=False,
                )
        finally:
            live.finish()
            self._forget_old()
            self.notices.add(type="run", threadId=live.thread_id, runId=live.run_id, active=False)

    def _forget_old(self) -> None:
        done = [run_id for run_id, live in self._runs.items() if live.done]
        for run_id in done[: max(0, len(done) - _KEEP)]:
            del self._runs[run_id]  # its journal is in the store

    async def close(self) -> None:
        """Cancel the runs still going and wait for them (the server is stopping)."""
        for live in self._runs.values():
            if not live.done and live.handle is not None:
                live.handle.cancel("the server stopped")
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    def journal(self, run_id: str) -> Journal:
        """The run's journal: the live one while it runs, else the stored one."""
        live = self._runs.get(run_id)
        if live is not None and live.handle is not None:
            return live.handle.journal
        return self.store.load_run(run_id)


def _find_tool(agent: Agent[Any], name: str) -> Tool | None:
    """The agent's own tool called `name` (a sub-agent's tools are checked when they run)."""
    return next((t for t in agent.toolset if t.name == name), None)


def _decision(entry: dict[str, Any]) -> Decision:
    if entry.get("status") == "cancelled":
        return Reject(message="The user cancelled this call.")
    payload = entry.get("payload")
    if not isinstance(payload, dict):
        msg = "a resolved interrupt needs a payload like {'verdict': 'approve'}"
        raise RequestInvalid(msg)
    try:
        return decision_from_json(payload)  # pyright: ignore[reportUnknownArgumentType]
    except DecisionTokenInvalid as exc:  # a bad verdict or edit: the request is malformed
        raise RequestInvalid(str(exc)) from None
