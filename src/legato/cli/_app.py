"""The typer application behind the `legato` command."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from legato._version import __version__
from legato.agent import Agent
from legato.approvals import ApprovalPolicy, Rule, TerminalApprover
from legato.cli._mcp import mcp_app
from legato.cli._render import render_event, render_journal
from legato.cli._runs import runs_app
from legato.cli._serve import serve as serve_command
from legato.events import Journal, RunFinished, is_journal_event
from legato.exceptions import ConfigurationError, LegatoError
from legato.security import AuditLog, verify_audit
from legato.tools import Tool, ToolSource

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="legato: run and inspect LLM agents."
)

app.add_typer(mcp_app, name="mcp")
app.add_typer(runs_app, name="runs")
app.command("serve")(serve_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"legato {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run and inspect legato agents."""


def load_object(spec: str) -> Any:
    """Import `module:attribute` (the current directory is importable)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        msg = f"expected 'module:attribute', got {spec!r}"
        raise ConfigurationError(msg)
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        msg = f"cannot import {module_name!r}: {exc}"
        raise ConfigurationError(msg) from exc
    try:
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError as exc:
        msg = f"{module_name!r} has no attribute {attr!r}"
        raise ConfigurationError(msg) from exc
    return obj


def _tools(specs: list[str]) -> list[Tool | ToolSource]:
    tools: list[Tool | ToolSource] = []
    for spec in specs:
        obj = load_object(spec)
        items: list[Any] = list(obj) if isinstance(obj, list | tuple) else [obj]  # pyright: ignore[reportUnknownArgumentType]
        for item in items:
            tools.append(item if isinstance(item, Tool | ToolSource) else Tool.from_function(item))
    return tools


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="The user's message.")],
    model: Annotated[
        str, typer.Option("--model", "-m", help="A 'provider:model' string.")
    ] = "test:echo",
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", "-t", help="Tools to load, as module:object (repeatable)."),
    ] = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", "-i", help="The system prompt.")
    ] = None,
    max_steps: Annotated[int, typer.Option(help="Model calls allowed.")] = 20,
    journal: Annotated[
        Path | None, typer.Option(help="Write the run's journal (JSONL) here.")
    ] = None,
    ask: Annotated[
        list[str] | None,
        typer.Option("--ask", help="Ask on the terminal before calls of this tool (repeatable)."),
    ] = None,
    audit: Annotated[
        Path | None,
        typer.Option(help="Append a tamper-evident audit chain of the run to this file."),
    ] = None,
) -> None:
    """Run an agent on PROMPT, streaming its events to the terminal."""
    console = Console()
    try:
        approvals = (
            ApprovalPolicy(
                rules=[Rule(name, "ask") for name in ask],
                handler=TerminalApprover(show=lambda text: console.print(text, markup=False)),
            )
            if ask
            else None
        )
        agent = Agent(
            model,
            tools=_tools(tools or []),
            instructions=instructions,
            max_steps=max_steps,
            approvals=approvals,
            hooks=[AuditLog(audit)] if audit is not None else [],
        )
        events: list[Any] = []
        for event in agent.stream_sync(prompt):
            events.append(event)
            render_event(console, event)
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None
    if journal is not None:
        recorded = Journal(e for e in events if is_journal_event(e))
        journal.write_text(recorded.to_jsonl(), encoding="utf-8")
    if not any(isinstance(e, RunFinished) for e in events):
        raise typer.Exit(1)


@app.command()
def trace(
    path: Annotated[
        Path, typer.Argument(help="A journal file (JSON lines).", exists=True, dir_okay=False)
    ],
) -> None:
    """Print a recorded journal readably."""
    console = Console()
    try:
        journal = Journal.from_jsonl(path.read_text(encoding="utf-8"))
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None
    render_journal(console, journal)


audit_app = typer.Typer(no_args_is_help=True, help="Tamper-evident audit chains of runs.")
app.add_typer(audit_app, name="audit")


@audit_app.command("verify")
def audit_verify(
    path: Annotated[
        Path, typer.Argument(help="An audit chain file (JSON lines).", exists=True, dir_okay=False)
    ],
    head: Annotated[
        str | None,
        typer.Option(help="The expected last hash, kept elsewhere (detects deleted last events)."),
    ] = None,
) -> None:
    """Check that no event of an audit chain was edited, inserted or deleted."""
    console = Console()
    try:
        report = verify_audit(path.read_text(encoding="utf-8"), head=head)
    except LegatoError as exc:
        console.print(f"[bold red]tampered:[/] {exc}")
        raise typer.Exit(1) from None
    console.print(f"[green]ok:[/] {report.events} events, head {report.head}")
