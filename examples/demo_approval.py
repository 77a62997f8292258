"""Demo section: an approval that really holds. While a person decides on one call, its
side-effecting sibling waits; read-only calls go on.

Run alone: `python examples/demo_approval.py`. The model asks, in one response, to refund
an order (needs a person's yes), to close the ticket (a side effect, allowed by policy) and
to look the order up (read-only). The approver here is a function standing in for a person.
"""

from __future__ import annotations

import asyncio

from legato import Agent, tool
from legato.approvals import ApprovalPolicy, ApprovalRequest, Approve, CallbackApprover, Rule
from legato.events import ApprovalDecided, ApprovalRequested, ToolCallFinished
from legato.testing import ScriptedModel, call, reply

timeline: list[str] = []


@tool(side_effects="irreversible")
def refund(order: str, amount: int) -> str:
    """Refund an order.

    Args:
        order: The order id.
        amount: Euros to refund.
    """
    timeline.append(f"refund {order} ran")
    return f"refunded {amount} EUR on {order}"


@tool(side_effects="idempotent")
def close_ticket(ticket: str) -> str:
    """Close a support ticket.

    Args:
        ticket: The ticket id.
    """
    timeline.append(f"close_ticket {ticket} ran")
    return f"{ticket} closed"


@tool
def lookup_order(order: str) -> str:
    """Read an order.

    Args:
        order: The order id.
    """
    timeline.append(f"lookup_order {order} ran (read-only)")
    return f"{order}: 1 kettle, 40 EUR, delivered broken"


async def person(request: ApprovalRequest) -> Approve:
    """Stands in for a person: takes a moment, looks at what has run so far, says yes."""
    await asyncio.sleep(0.2)
    ran = "; ".join(timeline) or "nothing"
    timeline.append(f"a person approves {request.tool} (until now: {ran})")
    return Approve()


def main() -> list[str]:
    timeline.clear()
    model = ScriptedModel(
        [
            reply(
                call("refund", {"order": "A17", "amount": 40}),
                call("close_ticket", {"ticket": "T-9"}),
                call("lookup_order", {"order": "A17"}),
            ),
            "Refunded 40 EUR on A17 and closed T-9.",
        ],
        name="test:demo-approval",
    )
    policy = ApprovalPolicy(rules=[Rule("refund", "ask")], handler=CallbackApprover(person))
    agent = Agent(model, tools=[refund, close_ticket, lookup_order], approvals=policy)
    result = agent.run_sync("The kettle in A17 arrived broken: refund it and close T-9.")
    for event in result.journal:
        if isinstance(event, ApprovalRequested):
            print(f"  ? approval requested for {event.call.name}({event.call.raw_arguments})")
        elif isinstance(event, ApprovalDecided):
            print(f"  ! decided: {event.verdict}")
        elif isinstance(event, ToolCallFinished):
            print(f"  <- {event.call.name}: {event.result.text}")
    print("  in order:")
    for line in timeline:
        print(f"    {line}")
    print(result.output)
    return list(timeline)


if __name__ == "__main__":
    main()
