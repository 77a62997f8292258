"""A stdio MCP server written with the `mcp` SDK whose tools report progress.

Tools:
    count   reports progress 1..steps of `steps` (message "step i"), pausing `pause`
            seconds before each, then returns "counted <steps>"
    flood   reports progress 1..n of n back to back, then returns "flooded <n>"
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("progress")


@server.tool()
async def count(steps: int, ctx: Context, pause: float = 0.0) -> str:
    """Count to `steps`, reporting each step as progress."""
    for i in range(1, steps + 1):
        if pause:
            await asyncio.sleep(pause)
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted {steps}"


@server.tool()
async def flood(n: int, ctx: Context) -> str:
    """Send `n` progress notifications as fast as possible."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return f"flooded {n}"


if __name__ == "__main__":
    server.run("stdio")
