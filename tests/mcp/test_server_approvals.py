"""`legato mcp serve` asks before side-effecting calls: the client's user decides (elicitation)."""

from __future__ import annotations

from legato import tool
from legato.approvals import ApprovalPolicy, Rule
from legato.mcp import ElicitationRequest, ElicitationResponse, MCPClient, ToolCallResult
from legato.mcp.server import build_server
from legato.messages import TextPart

SENT: list[str] = []


@tool(side_effects="irreversible")
def send(to: str) -> str:
    """Send a message.

    Args:
        to: The recipient.
    """
    SENT.append(to)
    return f"sent to {to}"


@tool
def peek(key: str) -> str:
    """Read something.

    Args:
        key: What to read.
    """
    return f"value of {key}"


def _text(result: ToolCallResult) -> str:
    part = result.content[0]
    assert isinstance(part, TextPart)
    return part.text


def _server(policy: ApprovalPolicy | None) -> object:
    return build_server([send, peek], name="guarded", approvals=policy)


async def _yes(request: ElicitationRequest) -> ElicitationResponse:
    assert request.message.startswith('Allow send({"to": "bob"})?')
    return ElicitationResponse(action="accept", content={"approve": True})


async def _no(request: ElicitationRequest) -> ElicitationResponse:
    return ElicitationResponse(action="accept", content={"approve": False, "reason": "not today"})


async def test_side_effecting_calls_wait_for_the_client_users_yes() -> None:
    SENT.clear()
    asking = ApprovalPolicy(default="ask")
    async with MCPClient(_server(asking), name="g") as client:  # no elicitation: cannot ask
        refused = await client.call_tool("send", {"to": "bob"})
        read = await client.call_tool("peek", {"key": "k"})
    assert refused.is_error and "cannot ask its user" in _text(refused)
    assert read.content == (TextPart(text="value of k"),)  # read-only tools run freely
    async with MCPClient(_server(asking), name="g", elicitation=_no) as client:
        rejected = await client.call_tool("send", {"to": "bob"})
    assert rejected.is_error and "not today" in _text(rejected)
    assert SENT == []
    async with MCPClient(_server(asking), name="g", elicitation=_yes) as client:
        approved = await client.call_tool("send", {"to": "bob"})
    assert approved.content == (TextPart(text="sent to bob"),)
    assert SENT == ["bob"]


async def test_rules_deny_and_allow_and_the_twin_without_a_policy_runs_everything() -> None:
    SENT.clear()
    denying = ApprovalPolicy(rules=[Rule("send", "deny")], default="ask")
    async with MCPClient(_server(denying), name="g", elicitation=_yes) as client:
        denied = await client.call_tool("send", {"to": "bob"})
    assert denied.is_error and "denies send" in _text(denied)
    allowing = ApprovalPolicy(rules=[Rule("send", "auto")], default="ask")
    async with MCPClient(_server(allowing), name="g") as client:
        await client.call_tool("send", {"to": "amy"})
    assert SENT == ["amy"]
    # the twin: a server with no policy runs a side-effecting call nobody approved
    async with MCPClient(_server(None), name="g") as client:
        await client.call_tool("send", {"to": "eve"})
    assert SENT == ["amy", "eve"]
