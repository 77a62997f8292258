"""The conformance suite's client driver, built on legato's MCP client.

The suite runs `python conformance_client.py <server-url>` once per scenario (the URL is
the last argument; the scenario's name is in MCP_CONFORMANCE_SCENARIO). The driver
connects over Streamable HTTP, lists the tools (as legato tools) and calls each one,
answering elicitation with the schema's defaults, then exits 0 (1 on an error). A
`json_schema_echo` tool is sent the schema legato holds for the other tool, so the suite
can see that legato keeps schemas as the server wrote them.
"""

from __future__ import annotations

import asyncio
import os
import sys

from legato.mcp import HTTPServer, MCPClient, accept_defaults

ARGUMENTS: dict[str, dict[str, object]] = {"add_numbers": {"a": 5, "b": 3}}


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    client = MCPClient(
        HTTPServer(url=url), name=f"conformance:{scenario}", elicitation=accept_defaults, timeout=30
    )
    async with client:
        tools = {str(t.metadata["mcp_name"]): t for t in await client.list_tools()}
        for name in tools:
            arguments = ARGUMENTS.get(name, {})
            if name == "json_schema_echo":
                focal = next(t for n, t in tools.items() if n != name)
                arguments = {"schema": focal.parameters}
            result = await client.call_tool(name, arguments)
            print(f"{name}: error={result.is_error} {result.content}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1])))
