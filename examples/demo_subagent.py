"""Demo section: a sub-agent with its slice, and the cost of the whole tree.

The lead reads two files, then spawns a child for one question. The child is granted only
`read_file` (never `delete_file`) and is handed only the part of the lead's context that
matters to its task. One dollar budget, reserved before each call, covers lead and child.

Run alone: `python examples/demo_subagent.py`. Prices are the demo's own (scripted models
have none): $3 per million input tokens, $15 per million output tokens.
"""

from __future__ import annotations

from legato import Agent, tool
from legato.budgets import Budget, Prices
from legato.events import ChildEvent, ContextSliced, SpawnFinished, SpawnStarted, ToolCallStarted
from legato.spawn import spawn_tools
from legato.testing import ScriptedModel, call, reply

FILES = {"auth.py": "SESSION_TTL = 900", "billing.py": "CURRENCY = 'EUR'"}
PRICES = Prices(input=3.0, output=15.0)


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file's path.
    """
    return FILES[path]


@tool(side_effects="irreversible")
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file's path.
    """
    raise AssertionError("never granted to the child, never called in this demo")


def main() -> dict[str, object]:
    child_model = ScriptedModel(
        [reply(call("read_file", {"path": "auth.py"})), "SESSION_TTL is 900 s (15 min)."],
        name="test:demo-child",
    )
    lead_model = ScriptedModel(
        [
            reply(
                call("read_file", {"path": "auth.py"}), call("read_file", {"path": "billing.py"})
            ),
            reply(
                call(
                    "spawn",
                    {
                        "task": "Is the session TTL in auth.py shorter than an hour?",
                        "tools": ["read_file"],
                    },
                )
            ),
            "Sessions last 15 minutes; billing is in EUR.",
        ],
        name="test:demo-lead",
    )
    spawner = spawn_tools([read_file, delete_file], model=child_model)
    agent = Agent(lead_model, tools=[spawner], name="lead")
    budget = Budget(dollars=1.00, prices=PRICES)
    events = list(agent.stream_sync("Review auth.py and billing.py.", budget=budget))
    for event in events:
        if isinstance(event, SpawnStarted):
            print(
                f"  spawned {event.lineage.run_id[:8]}: {event.task!r}, tools {list(event.tools)}"
            )
        elif isinstance(event, ContextSliced):
            ids = [e.id for e in event.entries]
            print(
                f"  its slice: {ids} ({event.tokens_passed} of {event.tokens_available} tokens):"
                " the prompt and the read of auth.py; billing.py left out"
            )
        elif isinstance(event, ChildEvent) and isinstance(event.event, ToolCallStarted):
            print(f"    [child] -> {event.event.call.name}({event.event.call.raw_arguments})")
        elif isinstance(event, SpawnFinished):
            print(f"  child finished ({event.outcome}): {event.output}")
    child_tools = sorted(t.name for t in child_model.requests[0].tools)
    print(f"  the child was shown the tools {child_tools}")
    used = budget.used
    print(
        f"  cost of the tree (lead and child): {used.model_calls:.0f} model calls, "
        f"{used.input_tokens:.0f} in / {used.output_tokens:.0f} out tokens, "
        f"${used.dollars:.6f} of a $1 budget"
    )
    return {"child_tools": child_tools, "used": used}


if __name__ == "__main__":
    main()
