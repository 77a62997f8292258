"""`legato mcp serve module:obj`: serve tools, toolsets or agents over MCP."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from legato.approvals import Action
from legato.exceptions import LegatoError

mcp_app = typer.Typer(
    no_args_is_help=True, help="Serve legato tools and agents over MCP.", rich_markup_mode=None
)


@mcp_app.command()
def serve(
    target: Annotated[
        str, typer.Argument(help="module:object - a tool, list, toolset, agent or MCP server.")
    ],
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="Address to listen on (--http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (--http).")] = 8000,
    name: Annotated[str | None, typer.Option(help="The server's name.")] = None,
    ask: Annotated[
        list[str] | None,
        typer.Option("--ask", metavar="TOOL", help="Ask the client's user before each call."),
    ] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", metavar="TOOL", help="Run calls of this tool without asking."),
    ] = None,
    deny: Annotated[
        list[str] | None,
        typer.Option("--deny", metavar="TOOL", help="Never run calls of this tool."),
    ] = None,
    side_effects: Annotated[
        Action,
        typer.Option(
            "--side-effects",
            help="What happens to calls of side-effecting tools no rule names: ask the "
            "client's user (MCP elicitation; refused when the client cannot ask), auto, deny.",
        ),
    ] = "ask",
) -> None:
    """Serve TARGET over MCP (stdio by default; --http for Streamable HTTP at /mcp).

    Calls of side-effecting tools wait for a yes from the client's user unless allowed;
    read-only tools run freely. A prebuilt SDK server's own handlers decide its calls.
    """
    from legato.approvals import ApprovalPolicy, Rule
    from legato.cli._common import load_object
    from legato.mcp.server import as_server, serve_http, serve_stdio

    rules = [
        *(Rule(tool, "deny") for tool in deny or []),
        *(Rule(tool, "ask") for tool in ask or []),
        *(Rule(tool, "auto") for tool in allow or []),
    ]
    try:
        policy = ApprovalPolicy(rules=rules, default=side_effects)
        server = as_server(load_object(target), name=name, approvals=policy)
    except LegatoError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if http:
        typer.echo(f"serving {server.name!r} at http://{host}:{port}/mcp", err=True)
        asyncio.run(serve_http(server, host=host, port=port))
    else:
        asyncio.run(serve_stdio(server))
