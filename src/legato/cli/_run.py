"""`legato run`: one turn on the terminal, its journal written whatever the outcome."""

from __future__ import annotations

import asyncio
import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from legato.agent import Agent
from legato.cli._common import load_tools, open_sqlite, resolve_model
from legato.cli._lines import LineReader
from legato.cli._turn import ConsoleApprover, TurnOutcome, TurnView, drive_turn
from legato.events import RunFailed, RunFinished
from legato.exceptions import PolicyError

if TYPE_CHECKING:
    from legato.approvals import ApprovalPolicy
    from legato.security import Hook

__all__ = ["AgentRequest", "RunRequest", "build_agent", "run_once", "turn_summary"]


@dataclass(kw_only=True)
class AgentRequest:
    """What the command line says about the agent to run."""

    model: str | None = None
    base_url: str | None = None
    tools: list[str] = field(default_factory=lambda: [])
    instructions: str | None = None
    agent_file: Path | None = None
    max_steps: int | None = None
    ask: list[str] = field(default_factory=lambda: [])
    """Tools that ask before every call (even read-only ones)."""
    auto: list[str] = field(default_factory=lambda: [])
    """Side-effecting tools that run without asking."""
    audit: Path | None = None
    otel: bool = False
    """Trace runs with OpenTelemetry GenAI spans on the global tracer provider."""
    session: str | None = None
    """The chat session (the spans' `gen_ai.conversation.id`)."""
    store: Path | None = None
    """The SQLite file runs are kept in (None: not stored)."""


@dataclass(kw_only=True)
class RunRequest(AgentRequest):
    """An agent and the prompt to run it on."""

    prompt: str


def build_agent(
    request: AgentRequest, *, approver: ConsoleApprover | None, console: Console
) -> Agent[str]:
    """The agent: from a file (command-line options add to it) or from the options alone.

    The same defaults for every command: side-effecting tools ask before each call (`--auto
    TOOL` lets one run freely, `--ask TOOL` asks for a read-only one too); a file's rules can
    make a call stricter, never looser. `approver` asks on the terminal; None leaves requests
    to whoever serves the agent. A `--ask`/`--auto` naming no tool is refused here, before
    any model call.
    """
    from legato.approvals import ApprovalPolicy, Rule
    from legato.security import AuditLog

    hooks: list[Hook] = [AuditLog(request.audit)] if request.audit is not None else []
    if request.otel:
        import atexit
        import os

        from legato.tracing import GenAITracing, otlp_provider_from_env

        provider = otlp_provider_from_env(os.environ)
        if provider is not None:  # OTEL_EXPORTER_OTLP_ENDPOINT set: export there
            atexit.register(provider.shutdown)  # the last batch leaves as the command ends
        hooks.append(GenAITracing(conversation_id=request.session, tracer_provider=provider))
    rules = [Rule(name, "ask") for name in request.ask]
    rules += [Rule(name, "auto") for name in request.auto]
    code_policy = ApprovalPolicy(rules=rules, default="ask", handler=approver)
    if request.agent_file is None:
        agent = Agent(
            resolve_model(request.model, base_url=request.base_url),
            tools=load_tools(request.tools),
            instructions=request.instructions,
            max_steps=request.max_steps or 20,
            approvals=code_policy,
            hooks=hooks,
        )
    else:
        agent = _from_file(request, code_policy, hooks, console)
        if agent.approvals is not None and agent.approvals.handler is None:
            from dataclasses import replace

            agent.approvals = replace(agent.approvals, handler=approver)
    _check_named_tools(agent, [*request.ask, *request.auto])
    if approver is not None:
        approver.tools = {t.name: t for t in agent.toolset}
    return agent


def _from_file(
    request: AgentRequest, policy: ApprovalPolicy, hooks: list[Hook], console: Console
) -> Agent[str]:
    from legato.agent_file import load_agent_file, register_mcp_factory
    from legato.mcp import agent_file_client

    register_mcp_factory(agent_file_client)  # the interface gives agent files their MCP client
    loaded = load_agent_file(
        request.agent_file or Path(), approvals=policy, max_steps=request.max_steps
    )
    for note in loaded.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    agent = loaded.agent
    if not (request.model or request.base_url or request.tools or hooks or request.instructions):
        return agent
    model = (
        resolve_model(request.model or agent.model.name, base_url=request.base_url)
        if request.model is not None or request.base_url is not None
        else agent.model
    )
    return Agent(
        model,
        name=agent.name,
        instructions=request.instructions or agent.instructions,
        tools=[*agent.tool_sources, *load_tools(request.tools)],
        approvals=agent.approvals,
        budget=agent.budget,
        max_steps=agent.max_steps,
        hooks=hooks,
    )


def _check_named_tools(agent: Agent[str], names: list[str]) -> None:
    """`PolicyError` for a `--ask`/`--auto` that names none of the agent's tools.

    Tools only known once the run lists them (an MCP server's, a sub-agent's) cannot be
    checked here: with such a source, the run checks the names when it starts.
    """
    tools = list(agent.toolset)
    if len(agent.tool_sources) > 1 or any(t.metadata.get("legato.spawns_children") for t in tools):
        return
    known = sorted(t.name for t in tools)
    for name in names:
        if not any(fnmatch.fnmatchcase(t, name) for t in known):
            listed = ", ".join(known) or "none (load some with --tools)"
            msg = f"--ask/--auto {name!r} names no tool of the agent; its tools: {listed}"
            raise PolicyError(msg)


def turn_summary(outcome: TurnOutcome, *, run_id: str) -> dict[str, Any]:
    """The outcome as one JSON-ready object (`--json`)."""
    finished = next((e for e in outcome.events if isinstance(e, RunFinished)), None)
    u = outcome.usage
    return {
        "status": outcome.status,
        "run_id": run_id,
        "output": finished.output if finished is not None else None,
        "error": str(outcome.error) if outcome.error is not None else None,
        "usage": {
            "requests": u.requests,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
        },
        "cost": outcome.cost,
    }


async def run_once(
    request: RunRequest, *, console: Console, journal: Path | None, quiet: bool = False
) -> tuple[int, dict[str, Any]]:
    """Run the turn; return the exit code (0 when the run finished) and its summary."""
    approver = ConsoleApprover()
    agent = build_agent(request, approver=approver, console=console)
    if request.store is not None:
        agent.store = open_sqlite(request.store)
    reader = LineReader(show=lambda text: console.print(text, end="", markup=False))
    view = TurnView(console, one_line_tools=False)
    handle = agent.start(request.prompt)
    try:
        with reader.catching_interrupts():
            outcome = await drive_turn(
                handle,
                view=view if not quiet else _Quiet(console),
                reader=reader,
                approver=approver,
            )
    finally:
        await handle.wait()
        if journal is not None:
            text = handle.journal.to_jsonl()
            await asyncio.to_thread(journal.write_text, text, encoding="utf-8")
    if outcome.status == "cancelled":
        console.print("[yellow]cancelled[/]")
    elif outcome.status == "parked":
        console.print(f"[yellow]parked:[/] {outcome.error}", highlight=False)
    elif (
        outcome.status == "failed"
        and outcome.error is not None
        and not quiet
        and not any(isinstance(e, RunFailed) for e in outcome.events)
    ):
        console.print(f"[bold red]error:[/] {escape(str(outcome.error))}", highlight=False)
    if request.store is not None and not quiet:
        console.print(f"[dim]run {handle.run_id} kept in {request.store}[/]", highlight=False)
    code = 0 if outcome.status == "finished" else 130 if outcome.status == "cancelled" else 1
    return code, json.loads(json.dumps(turn_summary(outcome, run_id=handle.run_id), default=str))


class _Quiet(TurnView):
    """Shows only what needs an answer (approval questions), for `--json`."""

    def show(self, event: Any) -> None:
        """Nothing: `--json` prints the outcome at the end."""
