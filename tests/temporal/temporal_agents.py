"""Agents the Temporal tests run (importable by the worker processes too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from legato import Agent, tool
from legato.events import JournalEvent
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def adder(db: Path, **options: Any) -> Agent[str]:
    """A scripted agent: one call of `add`, then the answer (two model calls)."""
    model = ScriptedModel([reply(call("add", {"a": 2, "b": 3}, id="c1")), "It is 5."])
    return Agent(model, tools=[add], store=SQLiteStore(db), name="adder", **options)


def shape(events: list[JournalEvent]) -> list[str]:
    """A journal's kinds, without the claims each activity records (`run_resumed`)."""
    return [e.kind for e in events if e.kind != "run_resumed"]


def approving(
    db: Path, shipped: list[str], *, ttl: float | None = None, side_effects: Any = "irreversible"
) -> Agent[str]:
    """A scripted agent whose one call (`ship`) waits for an approval, then answers."""
    from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore

    @tool(side_effects=side_effects)
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: Which order.
        """
        shipped.append(order)
        return f"shipped {order}"

    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=SQLiteApprovalStore(db), ttl=ttl)
    model = ScriptedModel([reply(call("ship", {"order": "A1"}, id="c1")), "Done."])
    return Agent(model, tools=[ship], store=SQLiteStore(db), approvals=policy, name="shipper")


def delegating(db: Path, shipped: list[str]) -> Agent[str]:
    """A parent whose one call delegates to a child agent; the child's `ship` asks first."""
    from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore

    child = approving(db, shipped)
    as_tool = child.as_tool(name="shipping", description="Ships orders.")
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=SQLiteApprovalStore(db))
    model = ScriptedModel([reply(call("shipping", {"task": "ship A1"}, id="p1")), "All done."])
    return Agent(model, tools=[as_tool], store=SQLiteStore(db), approvals=policy, name="parent")


async def open_request(runs: Any, run_id: str) -> str:
    """The first approval request a run's workflow waits on, once it waits on one."""
    import asyncio

    while True:
        requests: list[str] = await runs.open_requests(run_id)
        if requests:
            return requests[0]
        await asyncio.sleep(0.05)


def activity_types(history: Any, *, only: str | None = None) -> list[str]:
    """The activity types a workflow history ran, in order: regular ones (scheduled) and
    local ones (their `core_local_activity` markers); `only="local"` or `"regular"`."""
    import json

    from temporalio.api.enums.v1 import EventType

    names: list[str] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if only != "local":
                names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name == "core_local_activity" and only != "regular":
                data = json.loads(marker.details["data"].payloads[0].data)
                names.append(data["activity_type"])
    return names
