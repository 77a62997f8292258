"""One turn of a run on the terminal: stream it, ask approvals in their place, stop on Ctrl-C.

The terminal has one owner, the turn's consumer. The run never prints: its approval
handler (`ConsoleApprover`) only queues the request behind the run's events, and the
consumer asks when it reaches the request's `ApprovalRequested` event, so every streamed
character before the request is on the screen before the question, and nothing is printed
while the question waits. End of input (Ctrl-D) at the question is a rejection the model is
told about; Ctrl-C there, or at any time during the turn, cancels the run through its fence
(`RunHandle.cancel`: `CancelRequested` is journaled, nothing more is admitted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from legato.approvals import ApprovalRequest, Approve, Decision, Edit, Reject, canonical_json
from legato.cli._lines import Interrupted, LineReader
from legato.cli._render import render_event
from legato.events import (
    ApprovalDecided,
    ApprovalRequested,
    CancelRequested,
    ChildEvent,
    ModelRequested,
    ModelResponded,
    RunEvent,
    RunFailed,
    RunFinished,
    TextDelta,
    ThinkingDelta,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
    ToolCallStarted,
)
from legato.exceptions import ToolArgumentsInvalid
from legato.messages import Usage
from legato.run import RunHandle
from legato.tools import Tool

__all__ = ["EOF_REJECTION", "ConsoleApprover", "TurnOutcome", "TurnView", "drive_turn"]

EOF_REJECTION = (
    "The user closed the input (end of input) instead of answering; the call was not run."
)
"""What the model is told when the approval prompt reads end of input."""

_FALLBACK_WAIT = 0.5
"""Seconds to wait for a request's own event before asking anyway (a request reused on resume)."""


@dataclass(kw_only=True)
class _Ask:
    request: ApprovalRequest
    answer: asyncio.Future[Decision]


@dataclass(kw_only=True)
class _End:
    error: BaseException | None


class ConsoleApprover:
    """An approval handler that hands requests to the turn's consumer to ask on the terminal.

    `always` holds the tools approved "always" in this session: their calls are approved
    without asking (the decision is still journaled).
    """

    def __init__(self) -> None:
        self.always: set[str] = set()
        self.tools: dict[str, Tool] = {}
        """The agent's tools by name: edited arguments are checked against their schema."""
        self._queue: asyncio.Queue[RunEvent | _Ask | _End] | None = None

    def attach(self, queue: asyncio.Queue[RunEvent | _Ask | _End] | None) -> None:
        """Send requests to this queue (the current turn's)."""
        self._queue = queue

    async def __call__(self, request: ApprovalRequest) -> Decision | None:
        """Wait for the consumer's answer (None parks the run when no turn is attached)."""
        if request.tool in self.always:
            return Approve(message=f"always allowed for {request.tool} in this session")
        queue = self._queue
        if queue is None:
            return None
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        queue.put_nowait(_Ask(request=request, answer=answer))
        return await answer


@dataclass(kw_only=True)
class TurnOutcome:
    """How a turn ended and what it cost."""

    status: Literal["finished", "failed", "cancelled", "parked"]
    events: list[RunEvent] = field(default_factory=lambda: [])
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    error: BaseException | None = None
    exit_requested: bool = False
    """Ctrl-C was pressed a second time while the turn was being cancelled."""


_QUIET_IN_CHAT = (
    ToolCallStarted,
    ApprovalRequested,
    ToolCallAdmitted,
    ToolCallRefused,
    RunFinished,
    CancelRequested,
)
_STOPS = ("RunCancelled", "RunTimedOut")


def _inner(event: RunEvent) -> RunEvent:
    while isinstance(event, ChildEvent):
        event = event.event
    return event


def _prefix(event: RunEvent) -> str:
    """`  [agent] ` for a child's event, indented by its depth in the tree ('' at the root)."""
    depth, agent = 0, ""
    while isinstance(event, ChildEvent):
        depth, agent, event = event.lineage.depth, event.lineage.agent, event.event
    return f"{'  ' * depth}[blue]\\[{escape(agent)}][/] " if depth else ""


def _short(text: str, limit: int = 200) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TurnView:
    """Prints a turn's events append-only (no cursor movement, scrollback intact)."""

    def __init__(self, console: Console, *, one_line_tools: bool = True) -> None:
        self.console = console
        self.one_line_tools = one_line_tools
        self._mid_line = False
        self._edited: dict[str, str] = {}
        self.muted = False
        """The turn is being cancelled: its streamed text is no longer shown."""

    def line(self, text: str, *, markup: bool = True) -> None:
        """Print a line of its own (ending a streamed line first)."""
        self.end_line()
        self.console.print(text, markup=markup, highlight=False)

    def end_line(self) -> None:
        """End the streamed text's line, if one is open."""
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def show(self, event: RunEvent) -> None:
        """Print one event."""
        inner = _inner(event)
        if isinstance(inner, TextDelta | ThinkingDelta):
            if isinstance(event, ChildEvent) or self.muted:
                return  # a child's text shows in its SpawnFinished line
            render_event(self.console, inner)
            self._mid_line = not inner.text.endswith("\n")
            return
        if isinstance(inner, ModelResponded) and not isinstance(event, ChildEvent):
            self.end_line()
            return
        if self.one_line_tools and isinstance(inner, _QUIET_IN_CHAT):
            return  # the question, the tool line and the turn's usage line say it
        if self.one_line_tools and isinstance(inner, RunFailed) and inner.error_type in _STOPS:
            return  # "turn cancelled" says it
        if isinstance(inner, ApprovalDecided) and inner.verdict == "edit":
            self._edited[inner.call_id] = json.dumps(inner.arguments, ensure_ascii=False)
        if self.one_line_tools and isinstance(inner, ApprovalDecided):
            mark = {"approve": "[green]✓ approved[/]", "edit": "[green]✓ edited[/]"}.get(
                inner.verdict, "[red]✗ rejected:[/]"
            )
            note = f" [dim]{escape(_short(inner.message))}[/]" if inner.message else ""
            self.line(f"{_prefix(event)}{mark}{note}")
            return
        if self.one_line_tools and isinstance(inner, ToolCallFinished):
            self._tool_line(inner, _prefix(event))
            return
        self.end_line()
        if not isinstance(event, ChildEvent):
            render_event(self.console, event)
            return
        with self.console.capture() as capture:  # a child's line, under its branch of the tree
            render_event(self.console, inner)
        text = capture.get().rstrip("\n")
        if text.strip():
            self.console.print(Text.from_markup(_prefix(event)) + Text.from_ansi(text))

    def _tool_line(self, event: ToolCallFinished, prefix: str) -> None:
        style = "red" if event.result.is_error else "green"
        edited = self._edited.pop(event.call.id, None)
        arguments = edited if edited is not None else event.call.raw_arguments
        mark = " [yellow](edited)[/]" if edited is not None else ""
        self.line(
            f"{prefix}[cyan]⚙ {escape(event.call.name)}[/]"
            f"({escape(_short(arguments))}){mark} "
            f"[{style}]→ {escape('[' + event.outcome + ']')}[/] {escape(_short(event.result.text))}"
        )


async def _question(
    reader: LineReader, view: TurnView, approver: ConsoleApprover, request: ApprovalRequest
) -> Decision:
    """Ask the person about one request; raises `Interrupted` on Ctrl-C."""
    view.line(
        f"[bold yellow]? approve {escape(request.tool)}"
        f"({escape(_short(canonical_json(request.arguments), 300))})[/]  "
        f"[dim]because: {escape(request.rule)}[/]"
    )
    while True:
        answer = await reader.read(
            "  [y] approve  [n] reject  [e] edit  [a] always for this tool: "
        )
        if answer is None:
            view.line("[dim](end of input)[/]")
            return Reject(message=EOF_REJECTION)
        choice = answer.strip().lower()
        if choice in ("y", "yes"):
            return Approve()
        if choice in ("a", "always"):
            approver.always.add(request.tool)
            return Approve(message=f"always allowed for {request.tool} in this session")
        if choice in ("n", "no"):
            reason = await reader.read("  reason (told to the model): ")
            if reason is None:
                return Reject(message=EOF_REJECTION)
            return Reject(message=reason.strip() or Reject().message)
        if choice in ("e", "edit"):
            edited = await _edited(reader, view, approver.tools.get(request.tool))
            if edited is not None:
                return edited
            continue
        view.line("[dim]answer y, n, e or a (Ctrl-D rejects, Ctrl-C cancels the turn)[/]")


async def _edited(reader: LineReader, view: TurnView, tool: Tool | None) -> Edit | None:
    """The person's arguments, or None (asked again) when they are not a valid call of `tool`."""
    text = await reader.read("  arguments as JSON: ")
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        view.line(f"[red]not JSON: {escape(str(exc))}[/]")
        return None
    if not isinstance(value, dict):
        view.line("[red]the arguments must be a JSON object[/]")
        return None
    if tool is not None:
        try:
            tool.validate(value)  # pyright: ignore[reportUnknownArgumentType]
        except ToolArgumentsInvalid as exc:
            view.line(
                f"[red]not valid for {escape(tool.name)}: {escape('; '.join(exc.problems))}[/]"
            )
            return None
    return Edit(arguments=value)  # pyright: ignore[reportUnknownArgumentType]


class _Consumer:
    """The terminal's one owner during a turn: shows events, asks requests in their place."""

    def __init__(
        self,
        handle: RunHandle[Any],
        *,
        view: TurnView,
        reader: LineReader,
        approver: ConsoleApprover,
        on_event: Callable[[RunEvent], None] | None,
    ) -> None:
        self.handle = handle
        self.view = view
        self.reader = reader
        self.approver = approver
        self.on_event = on_event
        self.queue: asyncio.Queue[RunEvent | _Ask | _End] = asyncio.Queue()
        self.outcome = TurnOutcome(status="finished")
        self.seen: set[str] = set()
        """Requests whose `ApprovalRequested` event is on the screen."""
        self.held: dict[str, _Ask] = {}
        """Requests waiting for their event to be shown first."""

    async def pump(self) -> None:
        """Move the run's events to the queue, then its end."""
        try:
            async for event in self.handle.events():
                self.queue.put_nowait(event)
        except BaseException as exc:  # the run's end, passed on to the consumer
            self.queue.put_nowait(_End(error=exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            self.queue.put_nowait(_End(error=None))

    def interrupt(self) -> None:
        """Ctrl-C: cancel the turn through the run's fence; a second one asks to leave."""
        if self.handle.done:
            return
        if self.outcome.status == "cancelled":
            if not self.outcome.exit_requested:
                self.view.line("[yellow]leaving once the turn has stopped[/]")
            self.outcome.exit_requested = True
            return
        self.outcome.status = "cancelled"
        self.handle.cancel("cancelled with Ctrl-C")
        self.view.line("[yellow]cancelling the turn (Ctrl-C again to quit)[/]")
        self.view.muted = True  # nothing of the cancelled answer after that line

    async def ask(self, item: _Ask) -> None:
        """Ask one request and hand the decision to the run."""
        if item.answer.done() or self.outcome.status == "cancelled":
            return  # the turn is being cancelled: nothing more is asked
        try:
            decision = await _question(self.reader, self.view, self.approver, item.request)
        except Interrupted:
            self.interrupt()
            item.answer.cancel()
            return
        if not item.answer.done():
            item.answer.set_result(decision)

    async def next_item(self) -> RunEvent | _Ask | _End | None:
        """The next event or request; None after asking the requests whose event never came."""
        if not self.held or not self.queue.empty():
            return await self.queue.get()
        try:
            return await asyncio.wait_for(self.queue.get(), _FALLBACK_WAIT)
        except TimeoutError:
            for waiting in list(self.held.values()):
                self.held.pop(waiting.request.id)
                await self.ask(waiting)
            return None

    async def handle_item(self, item: RunEvent | _Ask) -> None:
        """Show an event (asking a request held for it), or ask or hold a request."""
        if isinstance(item, _Ask):
            if item.request.id in self.seen:
                await self.ask(item)
            else:
                self.held[item.request.id] = item
            return
        self.outcome.events.append(item)
        if self.on_event is not None:
            self.on_event(item)
        self.view.show(item)
        inner = _inner(item)
        if isinstance(inner, ApprovalRequested):
            self.seen.add(inner.request_id)
            waiting = self.held.pop(inner.request_id, None)
            if waiting is not None:
                await self.ask(waiting)

    async def run(self) -> TurnOutcome:
        """Consume the turn until the run ends."""
        self.approver.attach(self.queue)
        pump_task = asyncio.create_task(self.pump())
        try:
            with self.reader.on_interrupt(self.interrupt):
                while True:
                    item = await self.next_item()
                    if isinstance(item, _End):
                        self.outcome.error = item.error
                        break
                    if item is not None:
                        await self.handle_item(item)
        finally:
            self.approver.attach(None)
            if not pump_task.done():
                pump_task.cancel()
            with contextlib.suppress(BaseException):
                await pump_task
            self.view.end_line()
        _settle(self.outcome)
        return self.outcome


async def drive_turn(
    handle: RunHandle[Any],
    *,
    view: TurnView,
    reader: LineReader,
    approver: ConsoleApprover,
    on_event: Callable[[RunEvent], None] | None = None,
) -> TurnOutcome:
    """Show a started run's events until it ends, asking its approvals in order."""
    consumer = _Consumer(handle, view=view, reader=reader, approver=approver, on_event=on_event)
    return await consumer.run()


def _settle(outcome: TurnOutcome) -> None:
    """Status, usage and cost from the turn's events and error."""
    from legato.exceptions import RunCancelled, RunParked

    finished = next((e for e in outcome.events if isinstance(e, RunFinished)), None)
    if finished is not None:
        outcome.status, outcome.usage, outcome.cost = "finished", finished.usage, finished.cost
        return
    usage, cost = Usage(), None
    for event in outcome.events:
        if isinstance(event, ModelResponded):
            usage = usage + event.response.usage
            if event.response.cost is not None:
                cost = (cost or 0.0) + event.response.cost
    # a call cancelled mid-answer has no response (and no token counts), but it was made
    made = sum(1 for e in outcome.events if isinstance(e, ModelRequested))
    if made > usage.requests:
        usage = replace(usage, requests=made)
    outcome.usage, outcome.cost = usage, cost
    if isinstance(outcome.error, RunParked):
        outcome.status = "parked"
    elif isinstance(outcome.error, RunCancelled) or outcome.status == "cancelled":
        outcome.status = "cancelled"
    elif outcome.error is not None or any(isinstance(e, RunFailed) for e in outcome.events):
        outcome.status = "failed"
