"""`legato mcp serve module:obj`: serve tools, toolsets or agents over MCP."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

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
) -> None:
    """Serve TARGET over MCP (stdio by default; --http for Streamable HTTP at /mcp)."""
    from legato.cli._app import load_object
    from legato.mcp.server import as_server, serve_http, serve_stdio

    try:
        server = as_server(load_object(target), name=name)
    except LegatoError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if http:
        typer.echo(f"serving {server.name!r} at http://{host}:{port}/mcp", err=True)
        asyncio.run(serve_http(server, host=host, port=port))
    else:
        asyncio.run(serve_stdio(server))
