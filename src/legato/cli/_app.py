"""The typer application behind the `legato` command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from legato._version import __version__
from legato.cli._chat import chat
from legato.cli._common import load_object, read_prompt
from legato.cli._doctor import doctor
from legato.cli._eval import eval_command
from legato.cli._mcp import mcp_app
from legato.cli._options import AskOption, AutoOption, BaseUrlOption, ModelOption, ToolsOption
from legato.cli._render import render_journal
from legato.cli._runs import runs_app
from legato.cli._serve import serve as serve_command
from legato.events import Journal
from legato.exceptions import (
    AuditChainBroken,
    ConfigurationError,
    LegatoError,
)
from legato.security import verify_audit

__all__ = ["app", "load_object"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="legato: run and inspect LLM agents.",
    rich_markup_mode=None,  # plain help: rich's marks every flag <bool>, as if it took a value
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


@app.command()
def run(
    first: Annotated[
        str | None,
        typer.Argument(
            metavar="[AGENT.yaml] PROMPT",
            help="The user's message ('-', or none with a pipe: standard input), after an "
            "optional agent file.",
        ),
    ] = None,
    second: Annotated[str | None, typer.Argument(hidden=True)] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    tools: ToolsOption = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", "-i", help="The system prompt.")
    ] = None,
    agent_file: Annotated[
        Path | None,
        typer.Option("--agent", "-a", help="An agent file (YAML) to run.", dir_okay=False),
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Model calls allowed.")] = None,
    journal: Annotated[
        Path | None,
        typer.Option(help="Write the run's journal (JSONL) here, whatever the outcome."),
    ] = None,
    ask: AskOption = None,
    auto: AutoOption = None,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="Keep the run in this SQLite file too (see `legato runs`); default: not stored.",
        ),
    ] = None,
    audit: Annotated[
        Path | None,
        typer.Option(help="Append a tamper-evident audit chain of the run to this file."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print one JSON object with the outcome instead of the stream."
        ),
    ] = False,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="OpenTelemetry GenAI spans (extra otel): sent over OTLP/HTTP to "
            "OTEL_EXPORTER_OTLP_ENDPOINT when it is set, else to the global tracer provider.",
        ),
    ] = False,
) -> None:
    """Run an agent on PROMPT, streaming its events to the terminal."""
    from legato.cli._run import RunRequest, run_once

    console = Console(stderr=as_json)
    try:
        prompt = first
        if first is not None and first.endswith((".yaml", ".yml")) and agent_file is None:
            agent_file, prompt = Path(first), second
        elif second is not None:
            msg = f"one prompt only (got {second!r} too); quote the prompt"
            raise ConfigurationError(msg)
        request = RunRequest(
            prompt=read_prompt(prompt),
            model=model,
            base_url=base_url,
            tools=tools or [],
            instructions=instructions,
            agent_file=agent_file,
            max_steps=max_steps,
            ask=ask or [],
            auto=auto or [],
            audit=audit,
            otel=otel,
            store=store,
        )
        code, summary = asyncio.run(
            run_once(request, console=console, journal=journal, quiet=as_json)
        )
    except LegatoError as exc:
        if as_json:
            typer.echo(json.dumps({"status": "error", "error": str(exc)}))
        else:
            console.print(
                f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False, default=str))
    if code:
        raise typer.Exit(code)


@app.command()
def trace(
    path: Annotated[
        Path, typer.Argument(help="A journal file (JSON lines).", exists=True, dir_okay=False)
    ],
    otel_json: Annotated[
        bool,
        typer.Option(
            "--otel-json",
            help="Print the run's OpenTelemetry GenAI spans as one line of OTLP/JSON (an "
            "ExportTraceServiceRequest; append lines to a file for a collector's file receiver).",
        ),
    ] = False,
    otlp_endpoint: Annotated[
        str | None,
        typer.Option(
            "--otlp-endpoint",
            metavar="URL",
            help="Send the run's spans to this OTLP/HTTP traces endpoint "
            "(e.g. http://127.0.0.1:4318/v1/traces).",
        ),
    ] = None,
) -> None:
    """Print a recorded journal readably, or give its spans to a collector (OTLP)."""
    console = Console()
    try:
        journal = Journal.from_jsonl(path.read_text(encoding="utf-8"))
        if otel_json:
            from legato.tracing import journal_otlp_json

            typer.echo(journal_otlp_json(journal))
            return
        if otlp_endpoint is not None:
            from legato.tracing import export_otlp_http

            sent = export_otlp_http(journal, otlp_endpoint)
            console.print(f"sent {sent} spans to {escape(otlp_endpoint)}", highlight=False)
            return
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    render_journal(console, journal)


audit_app = typer.Typer(
    no_args_is_help=True, help="Tamper-evident audit chains of runs.", rich_markup_mode=None
)
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
    except AuditChainBroken as exc:
        label = _audit_failure(exc)
        console.print(f"[bold red]{label}:[/] line {exc.line}: {exc.reason}", highlight=False)
        raise typer.Exit(1) from None
    except (LegatoError, UnicodeDecodeError) as exc:
        console.print(f"[bold red]not an audit chain:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None
    if report.events == 0:
        console.print("[yellow]empty:[/] the file holds no audit records")
        raise typer.Exit(1)
    console.print(f"[green]ok:[/] {report.events} events, head {report.head}")


_UNREADABLE = ("not JSON", "not an audit record", "not a journal event")


def _audit_failure(exc: AuditChainBroken) -> str:
    """`not an audit chain` for a file that is not one; `chain broken` for a chain that fails."""
    if exc.reason.startswith(_UNREADABLE):
        return "not an audit chain"
    return "chain broken (an event was edited, inserted or deleted)"


app.command("chat")(chat)
app.command("doctor")(doctor)
app.command("eval")(eval_command)
