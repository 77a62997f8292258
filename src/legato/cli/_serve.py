"""`legato serve`: the web UI for an agent built from the command line or an agent file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from legato.cli._common import DEFAULT_STORE
from legato.cli._options import AskOption, AutoOption, BaseUrlOption, ModelOption, ToolsOption
from legato.exceptions import LegatoError


def serve(
    agent_file: Annotated[
        Path | None,
        typer.Argument(help="An agent file (YAML) to serve.", dir_okay=False),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    tools: ToolsOption = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", "-i", help="The system prompt.")
    ] = None,
    ask: AskOption = None,
    auto: AutoOption = None,
    host: Annotated[
        str, typer.Option(help="The address to listen on (loopback unless --allow-remote).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port (0: any free port).")] = 8000,
    store: Annotated[
        Path, typer.Option(help="The SQLite file for conversations, journals and approvals.")
    ] = Path(DEFAULT_STORE),
    max_steps: Annotated[int | None, typer.Option(help="Model calls allowed per turn.")] = None,
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

    The same agent `legato run` and `legato chat` would build from these options;
    side-effecting tools wait for a decision in the page. The URL printed (with its
    token) is the only way in.
    """
    console = Console(stderr=True)
    try:
        from legato.cli._common import open_sqlite
        from legato.cli._run import AgentRequest, build_agent
        from legato.web import serve as serve_web

        if demo:
            from legato.web._demo import demo_agent

            agent = demo_agent()
        else:
            request = AgentRequest(
                model=model,
                base_url=base_url,
                tools=tools or [],
                instructions=instructions,
                agent_file=agent_file,
                max_steps=max_steps,
                ask=ask or [],
                auto=auto or [],
            )
            agent = build_agent(request, approver=None, console=console)
        serve_web(
            agent,
            host=host,
            port=port,
            store=open_sqlite(store),
            allow_remote=allow_remote,
            announce=lambda url: console.print(
                f"legato web UI for {agent.model.name}: [bold]{url}[/]", markup=True, soft_wrap=True
            ),
        )
    except LegatoError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
