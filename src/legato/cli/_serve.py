"""`legato serve`: the web UI for an agent built from the command line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from legato.exceptions import LegatoError


def serve(
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="A 'provider:model' string (default: $LEGATO_MODEL or test:echo)."
        ),
    ] = None,
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", "-t", help="Tools to load, as module:object (repeatable)."),
    ] = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", "-i", help="The system prompt.")
    ] = None,
    host: Annotated[
        str, typer.Option(help="The address to listen on (loopback unless --allow-remote).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port (0: any free port).")] = 8000,
    store: Annotated[
        Path, typer.Option(help="The SQLite file for conversations, journals and approvals.")
    ] = Path(".legato/legato.db"),
    demo: Annotated[
        bool,
        typer.Option(
            "--demo", help="A scripted agent with one side-effecting tool: no key, no network."
        ),
    ] = False,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a non-loopback --host: anyone who reaches it with the token can approve calls.",
        ),
    ] = False,
) -> None:
    """Serve a web UI for an agent: conversations, streaming, tool cards and approvals.

    Side-effecting tools wait for a decision in the page; the URL printed (with its
    token) is the only way in.
    """
    console = Console(stderr=True)
    try:
        from legato.agent import Agent
        from legato.cli._app import load_object
        from legato.store import SQLiteStore
        from legato.tools import Tool, ToolSource
        from legato.web import serve as serve_web

        loaded: list[Tool | ToolSource] = []
        for spec in tools or []:
            obj = load_object(spec)
            items: list[Any] = list(obj) if isinstance(obj, list | tuple) else [obj]  # pyright: ignore[reportUnknownArgumentType]
            loaded.extend(
                i if isinstance(i, Tool | ToolSource) else Tool.from_function(i) for i in items
            )
        if demo:
            from legato.web._demo import demo_agent

            agent = demo_agent()
        else:
            agent = Agent(
                model or os.environ.get("LEGATO_MODEL") or "test:echo",
                tools=loaded,
                instructions=instructions,
            )
        serve_web(
            agent,
            host=host,
            port=port,
            store=SQLiteStore(store),
            allow_remote=allow_remote,
            announce=lambda url: console.print(
                f"legato web UI for {agent.model.name}: [bold]{url}[/]", markup=True, soft_wrap=True
            ),
        )
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {exc}", markup=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
