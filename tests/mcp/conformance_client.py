"""The conformance suite's client driver, built on legato's MCP client.

The suite runs `python conformance_client.py <server-url>` once per scenario (the URL is
the last argument; the scenario's name is in MCP_CONFORMANCE_SCENARIO). The driver
connects over Streamable HTTP, lists the tools (as legato tools) and calls each one,
answering elicitation with the schema's defaults, then exits 0 (1 on an error). A
`json_schema_echo` tool is sent the schema legato holds for the other tool, so the suite
can see that legato keeps schemas as the server wrote them.

`auth/*` scenarios put the server behind OAuth: the driver authorizes with `MCPOAuth`,
approving by following the redirect (the suite's authorization server approves at once).
Pre-registered credentials come in MCP_CONFORMANCE_CONTEXT (`client_id`,
`client_secret`); otherwise the client registers itself, or uses a client metadata
document URL when the authorization server supports that (`auth/basic-cimd`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from legato.exceptions import MCPError
from legato.mcp import HTTPServer, MCPClient, MCPOAuth, accept_defaults, follow_redirect

ARGUMENTS: dict[str, dict[str, object]] = {"add_numbers": {"a": 5, "b": 3}}
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def _auth(scenario: str) -> MCPOAuth | None:
    if not scenario.startswith("auth/"):
        return None
    context: dict[str, str] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if context.get("client_id"):
        return MCPOAuth(
            authorize=follow_redirect(),
            client_name="legato-conformance",
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
        )
    return MCPOAuth(
        authorize=follow_redirect(),
        client_name="legato-conformance",
        client_metadata_url=CLIENT_METADATA_URL,
    )


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    client = MCPClient(
        HTTPServer(url=url, auth=_auth(scenario)),
        name=f"conformance:{scenario}",
        elicitation=accept_defaults,
        timeout=30,
    )
    try:
        async with client:
            tools = {str(t.metadata["mcp_name"]): t for t in await client.list_tools()}
            for name in tools:
                arguments = ARGUMENTS.get(name, {})
                if name == "json_schema_echo":
                    focal = next(t for n, t in tools.items() if n != name)
                    arguments = {"schema": focal.parameters}
                result = await client.call_tool(name, arguments)
                print(f"{name}: error={result.is_error} {result.content}", file=sys.stderr)
    except MCPError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1])))
