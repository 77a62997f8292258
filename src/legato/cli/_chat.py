"""`legato chat`: a conversation on the terminal, stored as a session you can resume.

Output is append-only (no alternate screen, no cursor movement, so scrollback keeps every
line), and plain when standard output is not a terminal. Ctrl-C during a turn cancels it
through the run's fence and returns to the prompt (Ctrl-C again while it stops ends the
chat). Ctrl-C at the prompt clears the line and prompts again, as in IPython or psql; Ctrl-D
on an empty line, or `/exit`, ends the chat. Approval questions are asked in the stream's
place (see `legato.cli._turn`).
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from legato.agent import Agent
from legato.cli._common import DEFAULT_STORE, open_sqlite, resolve_model
from legato.cli._editor import LineEditor, clean_text, editor_wanted, history_path
from legato.cli._lines import Interrupted, LineReader
from legato.cli._options import AskOption, AutoOption, BaseUrlOption, ModelOption, ToolsOption
from legato.cli._render import render_journal
from legato.cli._run import AgentRequest, build_agent
from legato.cli._turn import ConsoleApprover, TurnOutcome, TurnView, drive_turn
from legato.events import Journal, RunFailed, StateCommitted, StateLoaded
from legato.exceptions import LegatoError
from legato.messages import Usage
from legato.store import Store

__all__ = ["COMMANDS", "ChatSession", "chat"]

COMMANDS: dict[str, str] = {
    "/help": "this list",
    "/model [NAME]": "show the model, or switch to provider:model",
    "/tools": "the tools the agent has",
    "/approvals [reset]": "the approval rules, and the tools approved always (reset: forget them)",
    "/undo": "remove the last turn from the session",
    "/fork NAME": "copy the session to NAME and continue there",
    "/state": "the session, its last run and the verified state",
    "/cost": "usage and cost per turn and in total",
    "/trace": "the last run's journal, event by event",
    "/save [FILE]": "write the last run's journal (JSON lines)",
    "/exit": "leave (Ctrl-D does too)",
}
"""The slash commands and what they do."""


@dataclass(kw_only=True)
class _Turn:
    run_id: str
    status: str
    usage: Usage
    cost: float | None


@dataclass(kw_only=True)
class ChatSession:
    """The chat's state: agent, store, session, the turns so far."""

    agent: Agent[str]
    console: Console
    reader: LineReader
    approver: ConsoleApprover
    session: str
    editor: LineEditor | None = None
    """The line editor for the chat's own prompt (None: plain lines, as when piped)."""
    turns: list[_Turn] = field(default_factory=lambda: [])
    last_journal: Journal | None = None
    done: bool = False

    # -- the loop ------------------------------------------------------------------------------------

    async def loop(self) -> None:
        """Read prompts and commands until the person leaves."""
        with self.reader.catching_interrupts():
            while not self.done:
                read = self.editor.read if self.editor is not None else self.reader.read
                try:
                    line = await read("› ")
                except Interrupted as interrupted:
                    if self.interrupted_at_prompt(interrupted.typed):
                        break
                    continue
                if line is None:
                    self.console.print()
                    break
                line = clean_text(line).strip()
                if not line:
                    continue
                if line.startswith("/") and "\n" not in line:
                    self.command(line)
                else:
                    await self.turn(line)
        self.console.print(
            f"[dim]session {escape(self.session)} saved; resume with: legato chat --session {escape(self.session)}[/]"
        )

    def interrupted_at_prompt(self, typed: str) -> bool:
        """Ctrl-C at the prompt: the line is dropped and the chat stays (returns False to stay).

        On an empty line it says how to leave, since Ctrl-C no longer does.
        """
        if self.editor is None:
            self.console.print()  # the terminal echoed ^C and no newline; the editor ends its line
        if not typed.strip():
            self.console.print("[dim](Ctrl-D on an empty line, or /exit, leaves)[/]")
        return False

    async def turn(self, prompt: str) -> TurnOutcome:
        """Run one turn of the conversation."""
        view = TurnView(self.console)
        try:
            handle = self.agent.start(prompt, session=self.session)
        except LegatoError as exc:
            self.console.print(f"[bold red]error:[/] {escape(str(exc))}")
            return TurnOutcome(status="failed", error=exc)
        outcome = await drive_turn(handle, view=view, reader=self.reader, approver=self.approver)
        await handle.wait()
        self.last_journal = handle.journal
        self.turns.append(
            _Turn(
                run_id=handle.run_id, status=outcome.status, usage=outcome.usage, cost=outcome.cost
            )
        )
        shown = any(isinstance(e, RunFailed) for e in outcome.events)  # the view printed it
        if outcome.status == "failed" and outcome.error is not None and not shown:
            self.console.print(f"[bold red]error:[/] {escape(str(outcome.error))}")
        elif outcome.status == "cancelled":
            self.console.print("[yellow]turn cancelled[/]")
        self.console.print(f"[dim]{escape(self._usage_line(outcome))}[/]")
        if outcome.exit_requested:
            self.done = True
        return outcome

    def _usage_line(self, outcome: TurnOutcome) -> str:
        total, cost = self.total()
        return f"turn: {_usage(outcome.usage, outcome.cost)} · total: {_usage(total, cost)}"

    def total(self) -> tuple[Usage, float | None]:
        """Usage and cost of every turn so far."""
        usage, cost = Usage(), None
        for turn in self.turns:
            usage = usage + turn.usage
            if turn.cost is not None:
                cost = (cost or 0.0) + turn.cost
        return usage, cost

    # -- slash commands -------------------------------------------------------------------------------

    def command(self, line: str) -> None:
        """Run a slash command; bad input prints a message and the chat goes on."""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            self._error(f"cannot read the command: {exc}")
            return
        name, args = words[0], words[1:]
        handler = _HANDLERS.get(name)
        if handler is None:
            self._error(f"unknown command {name}; /help lists them")
            return
        try:
            handler(self, args)
        except LegatoError as exc:
            self._error(str(exc))

    def _store(self) -> Store:
        store = self.agent.store
        assert store is not None  # `chat` gives the agent its store before the loop starts
        return store

    def _error(self, text: str) -> None:
        self.console.print(f"[red]{escape(text)}[/]")

    def do_help(self, args: list[str]) -> None:
        for usage, what in COMMANDS.items():
            self.console.print(f"  {usage:<20} {what}", highlight=False, markup=False)
        self.console.print(
            "  Ctrl-C cancels a turn, and clears the line at the prompt; "
            "Ctrl-D on an empty line (or /exit) leaves."
        )
        if self.editor is not None:
            self.console.print(
                "  Alt-Enter or Ctrl-J adds a line; Tab completes commands and tool names; "
                "Up and Down walk the history."
            )

    def do_model(self, args: list[str]) -> None:
        if not args:
            self.console.print(f"model: {escape(self.agent.model.name)}", highlight=False)
            return
        if len(args) > 1:
            self._error("usage: /model provider:model")
            return
        model = resolve_model(args[0])
        self.agent = _with_model(self.agent, model)
        self.console.print(f"model: {escape(model.name)}", highlight=False)

    def do_tools(self, args: list[str]) -> None:
        shown = False
        for tool in self.agent.toolset:
            shown = True
            self.console.print(
                f"  {escape(tool.name)} [dim]({tool.side_effects})[/] {escape(tool.description.splitlines()[0] if tool.description else '')}",
                highlight=False,
            )
        for source in self.agent.tool_sources[1:]:
            shown = True
            self.console.print(f"  {escape(source.name)} [dim](tool source)[/]", highlight=False)
        if not shown:
            self.console.print("no tools")

    def do_approvals(self, args: list[str]) -> None:
        if args == ["reset"]:
            self.approver.always.clear()
            self.console.print("forgot the tools approved always")
            return
        if args:
            self._error("usage: /approvals [reset]")
            return
        policy = self.agent.approvals
        if policy is None:
            self.console.print("no approval policy: side-effecting calls run without asking")
        else:
            for rule in policy.rules:
                self.console.print(f"  {escape(rule.describe())}", highlight=False)
            self.console.print(
                f"side-effecting calls no rule matches: {policy.default}", highlight=False
            )
        always = ", ".join(sorted(self.approver.always)) or "none"
        self.console.print(f"approved always in this session: {escape(always)}", highlight=False)

    def do_undo(self, args: list[str]) -> None:
        removed = self._store().undo_turn(self.session)
        self.console.print(f"removed the last turn ({len(removed)} messages)")

    def do_fork(self, args: list[str]) -> None:
        if len(args) != 1:
            self._error("usage: /fork NAME")
            return
        store = self._store()
        store.load_session(self.session, create=True)
        store.fork_session(self.session, args[0])
        self.session = args[0]
        self.console.print(f"forked: now in session {escape(args[0])}", highlight=False)

    def do_state(self, args: list[str]) -> None:
        store = self._store()
        messages = store.load_session(self.session, create=True)
        self.console.print(
            f"session {escape(self.session)}: {len(messages)} messages, {len(self.turns)} turns here",
            highlight=False,
        )
        if self.turns:
            last = self.turns[-1]
            self.console.print(f"last run {last.run_id}: {last.status}", highlight=False)
        values = _state_values(self.last_journal)
        if values is None:
            self.console.print("verified state: none")
        else:
            for key, value in values.items():
                self.console.print(f"  {escape(key)} = {escape(repr(value))}", highlight=False)

    def do_cost(self, args: list[str]) -> None:
        for number, turn in enumerate(self.turns, start=1):
            self.console.print(
                f"  turn {number} [{turn.status}]: {_usage(turn.usage, turn.cost)}",
                highlight=False,
                markup=False,
            )
        total, cost = self.total()
        self.console.print(f"total: {_usage(total, cost)}", highlight=False)

    def do_trace(self, args: list[str]) -> None:
        if self.last_journal is None:
            self._error("no run yet")
            return
        render_journal(self.console, self.last_journal)

    def do_save(self, args: list[str]) -> None:
        if self.last_journal is None or not self.turns:
            self._error("no run yet")
            return
        if len(args) > 1:
            self._error("usage: /save [FILE]")
            return
        path = Path(args[0]) if args else Path(f"{self.session}-{self.turns[-1].run_id[:8]}.jsonl")
        try:
            path.write_text(self.last_journal.to_jsonl(), encoding="utf-8")
        except OSError as exc:
            self._error(f"cannot write {path}: {exc.strerror}")
            return
        self.console.print(f"saved the last run's journal to {escape(str(path))}", highlight=False)

    def do_exit(self, args: list[str]) -> None:
        self.done = True


_HANDLERS: dict[str, Callable[[ChatSession, list[str]], None]] = {
    "/help": ChatSession.do_help,
    "/model": ChatSession.do_model,
    "/tools": ChatSession.do_tools,
    "/approvals": ChatSession.do_approvals,
    "/undo": ChatSession.do_undo,
    "/fork": ChatSession.do_fork,
    "/state": ChatSession.do_state,
    "/cost": ChatSession.do_cost,
    "/trace": ChatSession.do_trace,
    "/save": ChatSession.do_save,
    "/exit": ChatSession.do_exit,
    "/quit": ChatSession.do_exit,
}


def _usage(usage: Usage, cost: float | None) -> str:
    price = f"${cost:.6f}" if cost is not None else "cost n/a"
    calls = "1 model call" if usage.requests == 1 else f"{usage.requests} model calls"
    return f"{calls}, {usage.input_tokens} in / {usage.output_tokens} out tokens, {price}"


def _state_values(journal: Journal | None) -> dict[str, Any] | None:
    if journal is None:
        return None
    values: dict[str, Any] | None = None
    for event in journal:
        if isinstance(event, StateLoaded):
            values = dict(event.values)
        elif isinstance(event, StateCommitted) and values is not None:
            for change in event.changes:
                values[change.key] = change.new
    return values


def _with_model(agent: Agent[str], model: Any) -> Agent[str]:
    """The same agent on another model."""
    return Agent(
        model,
        name=agent.name,
        instructions=agent.instructions,
        tools=agent.tool_sources,
        approvals=agent.approvals,
        budget=agent.budget,
        max_steps=agent.max_steps,
        hooks=agent.hooks,
        store=agent.store,
    )


def chat(
    agent_file: Annotated[
        Path | None,
        typer.Argument(help="An agent file (YAML) to chat with.", dir_okay=False),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    tools: ToolsOption = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", "-i", help="The system prompt.")
    ] = None,
    ask: AskOption = None,
    auto: AutoOption = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Continue this stored session (created if new)."),
    ] = None,
    store: Annotated[
        Path, typer.Option("--store", help="The SQLite file sessions and journals are kept in.")
    ] = Path(DEFAULT_STORE),
    max_steps: Annotated[int | None, typer.Option(help="Model calls allowed per turn.")] = None,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="OpenTelemetry GenAI spans (extra otel): sent over OTLP/HTTP to "
            "OTEL_EXPORTER_OTLP_ENDPOINT when it is set, else to the global tracer provider.",
        ),
    ] = False,
) -> None:
    """Chat with an agent on the terminal (sessions are stored and resumable)."""
    console = Console(highlight=False)
    approver = ConsoleApprover()
    name = session or time.strftime("chat-%Y%m%d-%H%M%S")
    request = AgentRequest(
        model=model,
        base_url=base_url,
        tools=tools or [],
        instructions=instructions,
        agent_file=agent_file,
        max_steps=max_steps,
        ask=ask or [],
        auto=auto or [],
        otel=otel,
        session=name,
    )
    try:
        agent = build_agent(request, approver=approver, console=console)
        agent.store = open_sqlite(store)
        earlier = agent.store.load_session(name, create=True)
        model_name = agent.model.name
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    again = f", {len(earlier)} messages so far" if earlier else ""
    console.print(
        f"[bold]legato chat[/] · model {escape(model_name)} · session {escape(name)}{again}\n"
        "[dim]/help for commands · Ctrl-C cancels a turn · Ctrl-D leaves[/]"
    )
    reader = LineReader(show=lambda text: console.print(text, end="", markup=False))
    chat_session = ChatSession(
        agent=agent, console=console, reader=reader, approver=approver, session=name
    )
    if editor_wanted(sys.stdin, sys.stdout):
        chat_session.editor = LineEditor(
            commands=[*COMMANDS, "/quit"],
            tools=lambda: [t.name for t in chat_session.agent.toolset],
            history=history_path(),
        )
    asyncio.run(chat_session.loop())
